"""Find quotes in document inputs page by page, in a confined helper process (host side and helper side).

`QuotesFound` runs on the host, but a document's text comes from C parsers (PDFium, lxml) that must
never see a hostile file in the host process (docs/decisions/quotes-in-documents.md). So the host
starts a fresh helper, `python -c <bootstrap>`, that before reading anything:

- applies Landlock: read Python, its libraries and the system's shared files, read the documents
  named in the request, write nothing (but /dev/null), connect to no TCP port;
- applies the seccomp filter of the kernel sandbox (no unix sockets, no listen, no ptrace...);
- limits its address space (`MEMORY_BYTES`) and CPU time.

Where this system cannot confine (no Landlock ABI 4, not Linux), the helper still runs in its own
process with the limits, and `Pages.confined` says so. The helper extracts each document with the
same extractors as the sandbox (`docread`), so its page numbers are the ones the root model saw,
but never through the document cache, which sandbox code can write. It reads the request (quotes,
documents) as JSON on stdin and writes one JSON line per document: every page (1-based) where each
quote starts, up to `MAX_HITS` per quote and document, or the sentence that refused the document.
A quote that runs over a page break is found at the page where it starts (and `end_page`).

The host reads the lines until the deadline; a helper still running then is killed, and the
documents it did not report are "not checked".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEMORY_BYTES = 4 * 2**30
MAX_HITS = 20
PAGE_SEPARATOR = "\n\n"


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
    from rlmnb.sandbox.confinement import support

    confined = not support()[1]
    cache = pages_cache_dir()
    request = {"cache": cache,"quotes": list(quotes), "documents": [[s, os.path.abspath(p)] for s, p in documents],
               "every": {q: list(d) if d is not None else None for q, d in (every or {}).items()},
               "confine": confined, "cpu_seconds": max(1, int(deadline - time.monotonic()) + 1)}
    root = str(Path(__file__).resolve().parents[1])
    code = (f"import sys; sys.path.insert(0, {root!r}); from rlmnb.quote_pages import helper; helper()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd="/", env={**os.environ, "PYTHONSAFEPATH": "1"})
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=max(0.1, deadline - time.monotonic()))
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
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
def helper() -> None:
    """The helper's main: confine, then report each document of the request on stdout (see the module)."""
    request = json.loads(sys.stdin.read())
    paths = [p for _, p in request["documents"]]
    _limit(int(request.get("cpu_seconds", 60)))
    cache = request.get("cache")
    if request.get("confine"):
        _confine(paths, cache)
    os.environ["RLMNB_DOCUMENT_CACHE"] = cache or os.devnull  # the guard's own cache, never the sandbox's
    from rlmnb.errors import InputError
    from rlmnb.inputs import docread
    from rlmnb.quotes import quote_pattern

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
        hits = _find(pages, patterns)
        found.update(hits)
        read.add(shown)
        _emit({"source": shown, "hits": hits})


def _find(pages: list[dict[str, Any]], patterns: dict[str, Any]) -> dict[str, list[tuple[int, str, int]]]:
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


def _limit(cpu_seconds: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def pages_cache_dir() -> str:
    """The helper's cache of extracted documents (docread's format, keyed by path, mtime and size): a folder
    of this user's, mode 0700, that a confined sandbox kernel cannot write; so a revision's check is fast."""
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"rlmnb-guard-pages-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def _confine(paths: Sequence[str], cache: str | None = None) -> None:
    from rlmnb.sandbox import confinement, landlock, seccomp

    policy = confinement.Policy(read=tuple(paths) + tuple(os.path.join("/etc", n) for n in confinement._ETC)
                                + confinement._SHARED_FILES + ("/proc/self",),
                                read_exec=tuple(dict.fromkeys([*confinement._SYSTEM_CODE,
                                                               *confinement.python_paths()])),
                                write=(cache,) if cache else ())
    landlock.restrict_self(paths=policy.rules(), connect_ports=())
    seccomp.apply()


__all__ = ["Hit", "Pages", "helper", "pages_cache_dir", "search_documents"]


# ---- the guard's side: document inputs, findings with pages, citations ------------------------------------
def document_inputs(fields: Sequence[Any]) -> list[tuple[str, str, str]]:
    """(input name, shown name, path) of every document of the document inputs among `fields`; the shown
    name is the file's name for a one-document input and its path within a folder or glob input."""
    found: list[tuple[str, str, str]] = []
    for f in fields:
        info = getattr(f, "info", None)
        kind, root = getattr(info, "kind", None), getattr(info, "path", None)
        if not root or kind not in ("document", "documents"):
            continue
        if kind == "document":
            found.append((f.name, os.path.basename(str(root)), str(root)))
            continue
        for rel in (getattr(f, "plan", None) or {}).get("files", ()):
            found.append((f.name, rel, rel if os.path.isabs(rel) else os.path.join(str(root), *rel.split("/"))))
    return found


def _same(cited: str, shown: str, name: str) -> bool:
    return cited in (shown, name) or os.path.basename(cited) == os.path.basename(shown)


def check_documents(search: Any, citations: Sequence[Any], fields: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    """Find the quotes `search` (a quote_search.Search) still misses, and every cited quote, in the document
    inputs, recording each finding's document and page in `search`; check each citation's source and page.

    Returns the problems of misplaced citations (one sentence each: quoted text, where cited, where it is)
    and the documents the helper could not read (shown name -> sentence).
    """
    docs = document_inputs(fields)
    if not docs:
        return [], {}
    cited = {c.text for c in citations if c.source is not None or c.page is not None}
    wanted = [q for q in search.quotes if q in cited or q not in search.found]
    every: dict[str, list[str] | None] = {}  # where each cited quote must be looked for: its source, or everywhere
    for c in citations:
        if c.text in wanted:
            named = [shown for name, shown, _ in docs if c.source is not None and _same(c.source, shown, name)]
            before = every.get(c.text, [])
            every[c.text] = None if not named or before is None else [*before, *named]
    first = {s for d in every.values() for s in d or ()}  # the cited documents are read first
    order = sorted(docs, key=lambda d: d[1] not in first)
    pages = search_documents(wanted, [(shown, path) for _, shown, path in order], deadline=search.deadline,
                             every=every)
    if pages.timed_out:
        search.timed_out = True
    input_of = {shown: name for name, shown, _ in docs}
    for quote in search.missing:
        if pages.hits.get(quote):
            h = pages.hits[quote][0]
            search.hit(quote, input_of[h.source], source=h.source, page=h.page, label=h.label)
    problems: list[str] = []
    for c in citations:
        hits = pages.hits.get(c.text, [])
        if not hits or c.text not in search.quotes:
            continue  # not in any document: an ordinary missing quote, or found in another input
        here = [h for h in hits if c.source is None or _same(c.source, h.source, input_of[h.source])]
        good = [h for h in here if c.page is None or h.page <= c.page <= max(h.page, h.end_page)]
        if good:
            search.found.pop(c.text, None)
            search.hit(c.text, input_of[good[0].source], source=good[0].source, page=good[0].page,
                       label=good[0].label)
            continue
        if here:
            at = ", ".join(str(h.page) for h in here[:5])
            why = (f"not on page {c.page} of {here[0].source}: it is on page{'s' if len(here) > 1 else ''} {at}")
        else:
            why = f"not in {c.source}: it is in {hits[0].source}, page {hits[0].page}"
        search.found[c.text] = _finding(c, why, input_of[(here or hits)[0].source])
        problems.append(f'"{c.text[:120]}" is {why}')
    return problems, pages.errors


def _finding(citation: Any, why: str, name: str) -> Any:
    from rlmnb.quotes import Finding

    return Finding(citation.text, False, why, input=name, source=citation.source, page=citation.page)
