"""Bounded XML reading for bind-time probes of Office files: linear time, a byte cap, a time budget.

Binding runs in the user's process, on files strangers wrote, so a probe of a document's XML part must
never take more than a bounded time: regular expressions that backtrack over file contents held the host
(and the GIL) for minutes on a 69 KB DOCX. Here a part is read through zipfile's streaming reader up to a
byte cap (`member_prefix`: whatever the zip directory declares, so a bomb inflates no further), and parsed
by expat (`scan`), which is linear in its input, fed in `CHUNK` pieces with the clock checked between
them. A document type declaration (DTD) is refused, so no entity is ever declared or expanded, and
nesting deeper than `MAX_DEPTH` stops the scan, so expat's stack of open tags stays small.

Entry points: `member_prefix(z, name, limit)` and `scan(data, handler, *, complete, deadline)`, whose
`Scan` outcome says whether the part was read to its end, cut at the cap (or at broken XML), or given up
when the deadline passed.
"""

from __future__ import annotations

import enum
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from xml.parsers import expat

CHUNK = 2**20          # bytes fed to expat between two looks at the clock
PROBE_SECONDS = 2.0    # one bind-time probe of one document's XML gives up after this
MAX_DEPTH = 512        # open elements; deeper, the scan stops (CUT)


class Scan(enum.Enum):
    """How far a scan went: the whole part, a prefix (cut at the byte cap, or at XML that does not parse,
    or stopped by the handler), or out of time."""

    WHOLE = "whole"
    CUT = "cut"
    TIMED_OUT = "timed out"


@dataclass
class Handler:
    """What a scan calls: `start(name, attrs)`, `end(name)` and `text(data)` (names as written, with their
    prefix: `w:p`). `start` and `end` may return True to stop the scan there (the outcome is then CUT)."""

    start: Callable[[str, dict[str, str]], bool | None] | None = None
    end: Callable[[str], bool | None] | None = None
    text: Callable[[str], None] | None = None


class _Stop(Exception):
    pass


def member_prefix(z: zipfile.ZipFile, name: str, limit: int) -> tuple[bytes, bool] | None:
    """At most `limit` inflated bytes of the archive member `name`, and whether that is all of it; None
    when the archive has no such member, (b"", False) when it cannot be inflated (a bad CRC, a size the
    directory misstates, damaged data). Reads through the streaming reader, so whatever the directory
    declares, no more than `limit` + 1 bytes are inflated."""
    try:
        info = z.getinfo(name)
    except KeyError:
        return None
    try:
        with z.open(info) as f:
            data = f.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError):
        return b"", False
    return data[:limit], len(data) <= limit


def scan(data: bytes, handler: Handler, *, complete: bool, deadline: float) -> Scan:
    """Parse `data` (a whole part when `complete`, else a prefix) with expat, calling `handler`, until its
    end, a parse error, the handler's stop or `deadline` (a time.monotonic() value)."""
    parser = expat.ParserCreate()
    parser.buffer_text = True

    def no_dtd(*_: object) -> None:
        raise _Stop  # no document type, so no entity is ever declared, let alone expanded

    parser.StartDoctypeDeclHandler = no_dtd
    parser.EntityDeclHandler = no_dtd
    depth = 0
    start, end = handler.start, handler.end

    def on_start(name: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH or (start is not None and start(name, attrs)):
            raise _Stop  # nesting this deep is no document's: expat would keep every open tag

    def on_end(name: str) -> None:
        nonlocal depth
        depth -= 1
        if end is not None and end(name):
            raise _Stop

    parser.StartElementHandler = on_start
    parser.EndElementHandler = on_end
    if handler.text is not None:
        parser.CharacterDataHandler = handler.text
    try:
        for at in range(0, len(data), CHUNK):
            if time.monotonic() > deadline:
                return Scan.TIMED_OUT
            parser.Parse(data[at:at + CHUNK], False)
        if complete:
            parser.Parse(b"", True)
    except (_Stop, expat.ExpatError):
        return Scan.CUT
    return Scan.WHOLE if complete else Scan.CUT


def local(name: str) -> str:
    """A tag or attribute name without its prefix: `w:pStyle` -> `pStyle`."""
    return name.rpartition(":")[2]


__all__ = ["CHUNK", "MAX_DEPTH", "PROBE_SECONDS", "Handler", "Scan", "local", "member_prefix", "scan"]
