"""Find quotes in document inputs page by page, in a confined helper process (host side and helper side).

`QuotesFound` runs on the host, but a document's text comes from C parsers (PDFium, lxml) that must
never see a hostile file in the host process (docs/decisions/quotes-in-documents.md). So the host
starts a fresh helper, `python -c <bootstrap>`, that before reading anything:

- applies Landlock: read Python, its libraries and the system's shared files, read the documents
  named in the request, write nothing (but /dev/null), connect to no TCP port;
- applies the seccomp filter of the kernel sandbox (no unix sockets, no listen, no ptrace...);
- limits its address space (`MEMORY_BYTES`) and CPU time.

Its environment is an allow-list (`helper_env`): locale, PATH, PYTHONPATH, and HOME and TMPDIR in a
private scratch folder removed when it ends; no API key or credential of the host's reaches it.

Where this system cannot confine (no Landlock ABI 4, not Linux), the helper still runs in its own
process with the limits, and `Pages.confined` says so. The helper extracts each document with the
same extractors as the sandbox (`docread`), so its page numbers are the ones the root model saw,
but never through the document cache, which sandbox code can write. It reads the request (quotes,
documents) as JSON on stdin and writes one JSON line per document: every page (1-based) where each
quote starts, up to `MAX_HITS` per quote and document, or the sentence that refused the document.
A quote that runs over a page break is found at the page where it starts (and `end_page`).

The host reads the lines until the deadline; a helper still running then is killed, and the
documents it did not report are "not checked". `quote_pattern` is the one definition of what matches a
quote, shared by the helper and the guard's own search (rlmnb._guards.quotes, which uses this module).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MAX_HITS", "MEMORY_BYTES", "PAGE_SEPARATOR", "Hit", "Pages", "confine", "find_quotes", "helper",
           "helper_env", "limit_resources", "pages_cache_dir", "quote_pattern", "search_documents"]

MEMORY_BYTES = 4 * 2**30
MAX_HITS = 20
PAGE_SEPARATOR = "\n\n"


def quote_pattern(quote: str) -> re.Pattern[str]:
    """A regex that finds `quote` in raw text with any whitespace between its words."""
    return re.compile(r"\s+".join(re.escape(word) for word in quote.split(" ")))


@dataclass(frozen=True)
class Hit:
    """Where one quote starts in one document: 1-based page, that page's label, and the page it ends on."""

    source: str
    page: int
    label: str = ""
    end_page: int = 0


@dataclass(frozen=True)
class Pages:
    """What the helper reported: hits per quote, documents it refused (shown name -> sentence), the
    documents it reached before the deadline, and whether it was confined."""

    hits: dict[str, list[Hit]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    reached: frozenset[str] = frozenset()
    confined: bool = False
    timed_out: bool = False


def search_documents(quotes: Sequence[str], documents: Sequence[tuple[str, str]], *, deadline: float,
                     every: Mapping[str, Sequence[str] | None] | None = None) -> Pages:
    """Look each quote up in each document ((shown name, path) pairs, read in that order) in a confined
    helper, by the deadline (a time.monotonic() value). The helper stops once every quote has a hit and
    every quote in `every` has been looked for in the documents listed for it (None: in all of them)."""
    if not quotes or not documents:
        return Pages(reached=frozenset())
    from rlmnb._sandbox.confinement.policy import support

    confined = not support()[1]
    cache = pages_cache_dir()
    scratch = tempfile.mkdtemp(prefix="rlmnb-guard-helper-")
    request = {"cache": cache, "scratch": scratch, "quotes": list(quotes),
               "documents": [[s, os.path.abspath(p)] for s, p in documents],
               "every": {q: list(d) if d is not None else None for q, d in (every or {}).items()},
               "confine": confined, "cpu_seconds": max(1, int(deadline - time.monotonic()) + 1)}
    root = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path.insert(0, {root!r}); from rlmnb._guards.quote_pages import helper; helper()")
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd="/", env=helper_env(scratch))
        try:
            out, err = proc.communicate(json.dumps(request).encode(), timeout=max(0.1, deadline - time.monotonic()))
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # fd-based on Linux: a link the helper planted is not followed
    hits: dict[str, list[Hit]] = {}
    errors: dict[str, str] = {}
    reached: set[str] = set()
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if not isinstance(report, dict) or "source" not in report:
            continue
        source = str(report["source"])
        reached.add(source)
        if report.get("error"):
            errors[source] = str(report["error"])
        for quote, found in (report.get("hits") or {}).items():
            hits.setdefault(quote, []).extend(Hit(source, int(p), str(label), int(end)) for p, label, end in found)
    if proc.returncode not in (0, None) and not timed_out:
        why = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        for source, _ in documents:
            if source not in reached:
                errors[source] = f"the document reader stopped ({why[0][:200]})"
    return Pages(hits, errors, frozenset(reached), confined, timed_out)


# ---- the helper process -----------------------------------------------------------------------------------
_PASSED_ENV = ("PATH", "LANG", "TZ", "PYTHONPATH")  # and every LC_* variable


def helper_env(scratch: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The helper's whole environment, by allow-list: nothing else of the host's reaches it.

    Passed on from `base` (default `os.environ`): PATH, LANG, every LC_*, TZ, and PYTHONPATH (so the
    helper imports the same libraries as the host). Set: HOME and TMPDIR to `scratch`, the private folder
    the helper may write, and PYTHONSAFEPATH (no current folder on its `sys.path`). Why: the helper parses
    hostile files, and whatever it can read it could be made to show; API keys, database URLs and
    webhooks are never among what it needs.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if k in _PASSED_ENV or k.startswith("LC_")}
    env.update(HOME=scratch, TMPDIR=scratch, PYTHONSAFEPATH="1")
    return env


def helper() -> None:
    """The helper's main: confine, then report each document of the request on stdout (see the module)."""
    request = json.loads(sys.stdin.read())
    paths = [p for _, p in request["documents"]]
    limit_resources(int(request.get("cpu_seconds", 60)))
    cache = request.get("cache")
    if request.get("confine"):
        confine(paths, cache, request.get("scratch"))
    os.environ["RLMNB_DOCUMENT_CACHE"] = cache or os.devnull  # the guard's own cache, never the sandbox's
    from rlmnb._ground.errors import InputError
    from rlmnb.inputs._families import docread

    patterns = {q: quote_pattern(q) for q in request["quotes"]}
    every: dict[str, list[str] | None] = request.get("every") or {}
    found: set[str] = set()
    read: set[str] = set()
    for shown, path in request["documents"]:
        if found >= set(patterns) and all(d is not None and read >= set(d) for d in every.values()):
            break  # every quote is placed, and every cited one looked for where it was cited
        fmt = docread.format_of(path)
        try:
            if fmt is None:
                raise InputError(f"{shown} is not a document")
            pages = [{"text": str(p), "label": p.label} for p in docread.Document(path, shown=shown).pages]
        except InputError as exc:
            _emit({"source": shown, "error": str(exc)})
            continue
        except Exception as exc:  # a hostile file may make a parser raise anything
            _emit({"source": shown, "error": f"{shown} could not be read ({type(exc).__name__})"})
            continue
        hits = find_quotes(pages, patterns)
        found.update(hits)
        read.add(shown)
        _emit({"source": shown, "hits": hits})


def find_quotes(pages: list[dict[str, Any]], patterns: dict[str, Any]) -> dict[str, list[tuple[int, str, int]]]:
    """Each quote's hits in these pages ({"text", "label"}): (1-based page where it starts, that page's label,
    page where it ends), at most MAX_HITS per quote; a quote may run over the break between two pages."""
    texts = [str(p.get("text", "")) for p in pages]
    starts, at = [], 0
    for text in texts:
        starts.append(at)
        at += len(text) + len(PAGE_SEPARATOR)
    whole = PAGE_SEPARATOR.join(texts)
    import bisect

    found: dict[str, list[tuple[int, str, int]]] = {}
    for quote, pattern in patterns.items():
        for match in pattern.finditer(whole):
            page = bisect.bisect_right(starts, match.start())
            end = bisect.bisect_right(starts, max(match.start(), match.end() - 1))
            found.setdefault(quote, []).append((page, str(pages[page - 1].get("label", "")), end))
            if len(found[quote]) >= MAX_HITS:
                break
    return found


def _emit(report: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()


def limit_resources(cpu_seconds: int) -> None:
    """Cap this process's address space (MEMORY_BYTES) and CPU time."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def pages_cache_dir() -> str:
    """The helper's cache of extracted documents (docread's format, keyed by path, mtime and size): a folder
    of this user's, mode 0700, that a confined sandbox kernel cannot write; so a revision's check is fast."""
    folder = os.path.join(tempfile.gettempdir(), f"rlmnb-guard-pages-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def confine(paths: Sequence[str], cache: str | None = None, scratch: str | None = None) -> None:
    """Confine this process for good: no capability (as the kernel sandbox's launcher), Landlock (read `paths`,
    Python and the system; write only `cache` and `scratch`, its HOME and TMPDIR; no TCP port) and the kernel
    sandbox's seccomp filter."""
    from rlmnb._sandbox.confinement import landlock, seccomp
    from rlmnb._sandbox.confinement.launch import drop_capabilities
    from rlmnb._sandbox.confinement.policy import reader_policy

    drop_capabilities()
    policy = reader_policy(read=paths, write=tuple(p for p in (cache, scratch) if p))
    landlock.restrict_self(paths=policy.rules(), connect_ports=())
    seccomp.apply()
