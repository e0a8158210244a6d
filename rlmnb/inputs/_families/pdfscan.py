"""A bounded, pure-Python reading of a PDF's structure on the host: pages, metadata, outline, scans.

Binding must not hand a hostile PDF to a C parser in the user's process, and must be fast (a 1,000-page
PDF in well under 200 ms), so this reads only the file's object dictionaries with the standard library:
the page tree (page count and order), the /Info dictionary, the outline's top two levels, whether the
file is encrypted, and, for each page, whether its content stream shows any text (`Tj`, `TJ`, `'`, `"`) — a
page that draws none has no text layer (a scan). Everything is bounded: bytes read (`SCAN_BYTES`),
bytes inflated per stream (`INFLATE_BYTES`), pages walked (`MAX_PAGES`), outline entries. What cannot
be read within the bounds is None ("unknown"), never a guess; text extraction happens in the sandbox.
"""

from __future__ import annotations

import base64
import re
import zlib
from dataclasses import dataclass, field

SCAN_BYTES = 64 * 2**20     # a larger PDF is described from its size alone (pages unknown until read)
INFLATE_BYTES = 4 * 2**20   # bytes one content or object stream may inflate to while scanning
A85_BYTES = 4096           # an ASCII85 stream longer than this is not decoded (unknown)
MAX_PAGES = 100_000         # pages walked in the page tree
MAX_OUTLINE = 200           # outline entries read

_OBJ = re.compile(rb"(\d+)\s+\d+\s+obj\b(.*?)\bendobj\b", re.S)
_REF = re.compile(rb"(\d+)\s+\d+\s+R\b")
_SHOWS_TEXT = re.compile(rb"T[jJ]\b|['\"]\s*$", re.M)  # the text-showing operators


@dataclass(frozen=True)
class PdfFacts:
    """What a bounded scan learned; `error` is why the file is not a readable PDF (else "")."""

    pages: int | None = None
    encrypted: bool = False
    meta: dict[str, str] = field(default_factory=dict)
    outline: tuple[str, ...] = ()
    textless: tuple[int, ...] | None = None   # 1-based numbers of pages with no text layer
    error: str = ""


def scan_pdf(path: str, size: int) -> PdfFacts:
    """The facts of the PDF at `path` (`size` bytes), read within the module's bounds."""
    with open(path, "rb") as f:
        head = f.read(1024)
        if b"%PDF-" not in head:
            return PdfFacts(error="it does not start like a PDF (no %PDF- header)")
        if size > SCAN_BYTES:
            f.seek(max(0, size - 65536))
            tail = f.read()
            return PdfFacts(encrypted=b"/Encrypt" in tail)
        f.seek(0)
        data = f.read(SCAN_BYTES)
    objects = _objects(data)
    encrypted = re.search(rb"/Encrypt\s+\d+\s+\d+\s+R", data) is not None
    if encrypted:
        return PdfFacts(encrypted=True)
    roots = _REF.findall(data[data.rfind(b"/Root"):]) if b"/Root" in data else []
    catalog = objects.get(int(roots[0])) if roots else None
    if catalog is None:
        catalog = next((o for o in objects.values() if re.search(rb"/Type\s*/Catalog\b", o)), None)
    if catalog is None:
        return PdfFacts(error="it has no document catalog (the file is damaged or truncated)")
    pages = _pages(objects, _ref(catalog, b"Pages"))
    info_at = data.rfind(b"/Info")
    info = objects.get(_ref(data[info_at:info_at + 40], b"Info") or -1, b"") if info_at >= 0 else b""
    meta = {k.lower(): v for k in ("Title", "Author", "Subject", "CreationDate", "ModDate")
            if (v := _string(info, k))}
    outline = _outline(objects, _ref(catalog, b"Outlines"))
    textless = tuple(i + 1 for i, page in enumerate(pages) if not _draws_text(objects, page))
    return PdfFacts(len(pages), False, meta, outline, textless)


def _objects(data: bytes) -> dict[int, bytes]:
    objects = {int(m.group(1)): m.group(2) for m in _OBJ.finditer(data)}
    for body in [o for o in objects.values() if re.search(rb"/Type\s*/ObjStm\b", o)]:
        raw = _stream(body)
        n, first = _int(body, b"N"), _int(body, b"First")
        if raw is None or n is None or first is None:
            continue
        pairs = [int(x) for x in raw[:first].split()[: 2 * n]]
        offsets = [(pairs[i], first + pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]
        for k, (num, start) in enumerate(offsets):
            end = offsets[k + 1][1] if k + 1 < len(offsets) else len(raw)
            objects.setdefault(num, raw[start:end])
    return objects


def _pages(objects: dict[int, bytes], root: int | None) -> list[bytes]:
    found: list[bytes] = []
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack and len(found) < MAX_PAGES:
        num = stack.pop()
        if num in seen or num not in objects:
            continue
        seen.add(num)
        node = _dict_part(objects[num])
        kids = re.search(rb"/Kids\s*\[(.*?)\]", node, re.S)
        if kids is not None and re.search(rb"/Type\s*/Pages\b", node):
            stack.extend(reversed([int(r) for r in _REF.findall(kids.group(1))]))
        else:
            found.append(node)
    return found


def _outline(objects: dict[int, bytes], first_of: int | None) -> tuple[str, ...]:
    titles: list[str] = []
    start = _ref(objects.get(first_of or -1, b""), b"First")
    queue: list[tuple[int | None, int]] = [(start, 0)]
    seen: set[int] = set()
    while queue and len(titles) < MAX_OUTLINE:
        num, depth = queue.pop(0)
        while num is not None and num not in seen and len(titles) < MAX_OUTLINE:
            seen.add(num)
            item = objects.get(num, b"")
            title = _string(item, "Title")
            if title:
                titles.append("  " * depth + title)
            if depth == 0 and (child := _ref(item, b"First")) is not None:
                queue.append((child, 1))
            num = _ref(item, b"Next")
    return tuple(titles)


def _draws_text(objects: dict[int, bytes], page: bytes) -> bool:
    """False only when every content stream of the page was read and none has a text operator."""
    contents = re.search(rb"/Contents\s*(\[.*?\]|\d+\s+\d+\s+R)", page, re.S)
    if contents is None:
        return False
    for ref in _REF.findall(contents.group(1)):
        body = objects.get(int(ref))
        raw = _stream(body) if body is not None else None
        if raw is None or _SHOWS_TEXT.search(raw):
            return True
    return False


def _stream(body: bytes) -> bytes | None:
    """A stream's decoded bytes (ASCII85 and Flate only), at most INFLATE_BYTES; None when not readable."""
    m = re.search(rb"\bstream\r?\n", body)
    if m is None:
        return None
    raw = body[m.end():body.rfind(b"endstream")]
    filters = re.findall(rb"/(ASCII85Decode|FlateDecode|A85|Fl|[A-Za-z0-9]+Decode)", _dict_part(body))
    for name in filters:
        try:
            if name in (b"ASCII85Decode", b"A85"):  # pure Python and slow: only in short streams
                text = raw.strip().removeprefix(b"<~").removesuffix(b"~>")
                if len(text) > A85_BYTES:
                    return None
                raw = base64.a85decode(text)
            elif name in (b"FlateDecode", b"Fl"):
                raw = zlib.decompressobj().decompress(raw, INFLATE_BYTES)
            else:
                return None
        except (ValueError, zlib.error):
            return None
    return raw


def _dict_part(body: bytes) -> bytes:
    at = body.find(b"stream")
    return body if at < 0 else body[:at]


def _ref(body: bytes, key: bytes) -> int | None:
    m = re.search(rb"/" + key + rb"\s+(\d+)\s+\d+\s+R", _dict_part(body))
    return int(m.group(1)) if m else None


def _int(body: bytes, key: bytes) -> int | None:
    m = re.search(rb"/" + key + rb"\s+(\d+)", _dict_part(body))
    return int(m.group(1)) if m else None


_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f", b"(": b"(", b")": b")", b"\\": b"\\"}


def _string(body: bytes, key: str) -> str:
    """A string value of the dictionary (literal or hex), decoded; "" when absent."""
    m = re.search(rb"/" + key.encode() + rb"\s*(\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>)", _dict_part(body), re.S)
    if m is None:
        return ""
    token = m.group(1)
    if token.startswith(b"<"):
        raw = bytes.fromhex(re.sub(rb"\s", b"", token[1:-1]).decode())
    else:
        raw = re.sub(rb"\\([0-7]{1,3}|.)", lambda e: _ESCAPES.get(e.group(1), bytes([int(e.group(1), 8) & 255])
                                                                 if e.group(1)[:1].isdigit() else e.group(1)),
                     token[1:-1], flags=re.S)
    if raw.startswith(b"\xfe\xff"):
        return raw[2:].decode("utf-16-be", "replace")
    return raw.decode("latin-1")


__all__ = ["A85_BYTES", "INFLATE_BYTES", "MAX_OUTLINE", "MAX_PAGES", "PdfFacts", "SCAN_BYTES", "scan_pdf"]
