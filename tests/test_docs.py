"""The documentation is checked like code: every link resolves, every example runs, the README stays a front door.

Conventions the pages follow (CONTRIBUTING.md says them too):

- a ```` ```python ```` block is an example and runs, unless the line before it is `<!-- notest -->` (it needs a
  key, a server or a value the page does not make); any other fenced block runs when the line before it is
  `<!-- test -->` (a `%%rlm` cell);
- a page's examples run in order in one IPython shell (so `%load_ext` and `%%rlm` work, and a later block sees an
  earlier one's names), offline, in a scratch folder, with the response cache and journals there too;
- relative links and images resolve to files of the repository, and `#anchors` to headings of the target page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FRONT_PAGES = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "RESULTS.md"]
PAGES = [*FRONT_PAGES, *sorted(DOCS.rglob("*.md"))]

# Pages other engineers write, linked before they land: a link to one is checked once the page exists.
PENDING: set[Path] = set()

README_MAX_BYTES = 12 * 1024
FIRST_SCREEN_LINES = 40
TWO_COMMANDS = ("make demo", "make test")
EXAMPLE_TIMEOUT_S = 150

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, its text, the line it starts on and its test marker."""

    lang: str
    code: str
    line: int
    marker: str | None  # "test", "notest" or None

    @property
    def runs(self) -> bool:
        return self.marker == "test" or (self.lang == "python" and self.marker != "notest")


def split_page(text: str) -> tuple[list[str], list[Block]]:
    """The page's prose lines (fenced blocks blanked, so links in code are not links) and its fenced blocks."""
    prose: list[str] = []
    blocks: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            prose.append(lines[i])
            i += 1
            continue
        fence, start = match.group("fence"), i
        before = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
        marker = {"<!-- test -->": "test", "<!-- notest -->": "notest"}.get(before)
        body: list[str] = []
        i += 1
        while i < len(lines) and not (lines[i].startswith(fence) and lines[i].strip() == fence):
            body.append(lines[i])
            i += 1
        blocks.append(Block(match.group("info").strip().split(" ")[0].lower(), "\n".join(body), start + 1, marker))
        prose.extend([""] * (len(body) + 2))
        i += 1
    return prose, blocks


def slugs(title: str) -> set[str]:
    """The anchors a heading gets on GitHub and in mkdocs (they differ on repeated hyphens)."""
    plain = _CODE_SPAN.sub(lambda m: m.group(0).strip("`"), title)
    plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", plain)
    github = re.sub(r"[^\w\- ]", "", plain.lower()).replace(" ", "-")
    normal = unicodedata.normalize("NFKD", plain)
    mkdocs = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", normal).strip().lower())
    return {github, mkdocs}


def anchors(page: Path) -> set[str]:
    prose, _ = split_page(page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for line in prose:
        match = _HEADING.match(line)
        if match:
            found |= slugs(match.group("title"))
    return found


def broken_links(page: Path) -> list[str]:
    """Every relative link or image of `page` whose file or heading does not exist, as 'line: target (why)'."""
    prose, _ = split_page(page.read_text(encoding="utf-8"))
    problems: list[str] = []
    for number, line in enumerate(prose, 1):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group("target")
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http(s):, mailto: and the like
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            if resolved in PENDING and not resolved.exists():
                continue
            if not resolved.exists():
                problems.append(f"{number}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{number}: {target} (no heading #{anchor})")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_checker_catches_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A `code` heading: here\n\ntext\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-heading-here) [gone](nope.md) [bad](other.md#nothing)\n"
                    "![img](other.md) [web](https://example.org/x) `[in code](nope.md)`\n"
                    "```\n[in a block](nope.md)\n```\n[self](#title)\n")
    assert [p.split(" ")[1] for p in broken_links(page)] == ["nope.md", "other.md#nothing", "#title"]


def runnable(page: Path) -> list[Block]:
    return [block for block in split_page(page.read_text(encoding="utf-8"))[1] if block.runs]


def test_markers_choose_which_blocks_run() -> None:
    text = ("```python\na = 1\n```\n<!-- notest -->\n```python\nb = 2\n```\n"
            "<!-- test -->\n```text\n%%rlm -m root\nQ?\n```\n```bash\nmake demo\n```\n")
    assert [(b.lang, b.code) for b in split_page(text)[1] if b.runs] == [("python", "a = 1"), ("text", "%%rlm -m root\nQ?")]


_RUNNER = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
for line, code in json.load(open(sys.argv[1])):
    result = shell.run_cell(code, store_history=True)
    if not result.success:
        print(f"EXAMPLE FAILED: the block at line {line}", file=sys.stderr)
        sys.exit(1)
"""

EXAMPLE_PAGES = [page for page in PAGES if runnable(page)]


@pytest.mark.integration
@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_page_run_offline(page: Path, tmp_path: Path) -> None:
    cells = [(block.line, block.code) for block in runnable(page)]
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    (tmp_path / "runner.py").write_text(_RUNNER)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RLMNB_CACHE_DIR=str(tmp_path / "cache"), RLMNB_JOURNAL_DIR=str(tmp_path / "runs"),
               RLMNB_WARM_KERNEL="0", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "runner.py", "cells.json"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=EXAMPLE_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_readme_is_a_front_door() -> None:
    data = README.read_bytes()
    assert len(data) < README_MAX_BYTES
    first_screen = data.decode("utf-8").split("\n")[:FIRST_SCREEN_LINES]
    commands = [line.split("#")[0].strip() for line in first_screen]
    assert all(command in commands for command in TWO_COMMANDS)
    setup = next(line for line in first_screen if line.startswith("apt-get "))
    assert first_screen.index(setup) < min(commands.index(command) for command in TWO_COMMANDS)
    assert "bubblewrap" in setup.split()


def test_the_readme_holds_no_commit_hash_and_no_benchmark_table() -> None:
    text = README.read_text(encoding="utf-8")
    prose = "\n".join(split_page(text)[0])
    assert re.findall(r"\b[0-9a-f]{7,40}\b", prose) == []
    assert "bench/RESULTS.md" in text
    assert not re.search(r"^\|.*\b(?:score|calls/s|tokens per answer)\b", text, re.M | re.I)


@pytest.mark.integration
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "rlmnb" / "index.html").exists()
