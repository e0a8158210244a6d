"""A bounded, pure-Python reading of a PDF's structure on the host: pages, metadata, outline, scans.

Binding must not hand a hostile PDF to a C parser in the user's process, and must take the same time
for 100 pages as for 1,000, so this reads only what it needs with the standard library. It follows the
cross-reference data from `startxref` (classic tables and xref streams, through /Prev and /XRefStm,
objects inside object streams) and reads each object it needs with a seek and a bounded read: the page
tree (page count and order), the /Info dictionary, the outline's top two levels, whether the file is
encrypted, and whether pages' content streams show any text (`Tj`, `TJ`, `'`, `"`): a page that draws
none has no text layer (a scan). Every page is checked up to `TEXT_CHECKS` pages, beyond that
`TEXT_CHECKS` evenly spaced ones, and `PdfFacts.checked` says how many. When the cross-reference data
is missing or does not describe the file, the whole file (at most `SCAN_BYTES`) is scanned for objects
instead. Everything is bounded: bytes read (`SCAN_BYTES` in all), bytes inflated per stream
(`INFLATE_BYTES`), pages walked (`MAX_PAGES`), outline entries, cross-reference sections
(`XREF_SECTIONS`, a /Prev cycle ends the chain), bytes of one table or object. What cannot be read
within the bounds is None ("unknown"), never a guess; text extraction happens in the sandbox.
"""

from __future__ import annotations

import base64
import bisect
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

SCAN_BYTES = 64 * 2**20     # bytes read in all; a larger PDF without usable xref data is described from its size
INFLATE_BYTES = 4 * 2**20   # bytes one content or object stream may inflate to while scanning
A85_BYTES = 4096           # an ASCII85 stream longer than this is not decoded (unknown)
MAX_PAGES = 100_000         # pages walked in the page tree
MAX_OUTLINE = 200           # outline entries read
TEXT_CHECKS = 200           # pages inflated to find scans; ~4 ms per 200 text-heavy pages (docs/decisions)
XREF_SECTIONS = 256         # cross-reference sections followed through /Prev and /XRefStm
XREF_BYTES = 16 * 2**20     # bytes one classic cross-reference table may take
OBJECT_BYTES = 2**20        # bytes one object without a stream may take
XREF_RANGES = 100_000       # subsections in one cross-reference section

_OBJ_HEAD = re.compile(rb"(?<!\d)(\d{1,10})\s{1,32}\d{1,10}\s{1,32}obj\b")  # bounded runs: linear on any input
_ENDOBJ = re.compile(rb"\bendobj\b")
_HEAD = re.compile(rb"\s*(\d+)\s+\d+\s+obj\b")
_STREAM_EOL = re.compile(rb"\r?\n")
_REF = re.compile(rb"(?<!\d)(\d{1,10})\s{1,32}\d{1,10}\s{1,32}R\b")
_SHOWS_TEXT = re.compile(rb"T[jJ]\b|['\"]\s*$", re.M)  # the text-showing operators
_ENTRY = re.compile(rb"(\d{10}) \d{5} ([nf])(?: \r| \n|\r\n)")
_SUBSECTION = re.compile(rb"\s*(\d+)[ \t]+(\d+)[ \t]*(?:\r\n|\r|\n)")
_FREE = (-2, 0)
_NO_MORE = 2**63


@dataclass(frozen=True)
class PdfFacts:
    """What a bounded scan learned; `error` is why the file is not a readable PDF (else "").

    `textless` lists pages found without a text layer among the `checked` pages (all pages when
    `checked == pages`, else an even sample of them); None when not known.
    """

    pages: int | None = None
    encrypted: bool = False
    meta: dict[str, str] = field(default_factory=dict)
    outline: tuple[str, ...] = ()
    textless: tuple[int, ...] | None = None   # 1-based numbers of pages with no text layer
    error: str = ""
    checked: int | None = None                # pages whose content streams were checked for text


class _Broken(Exception):
    """The cross-reference data does not describe the file (or a bound was reached): scan it whole."""


def scan_pdf(path: str, size: int) -> PdfFacts:
    """The facts of the PDF at `path` (`size` bytes), read within the module's bounds."""
    with open(path, "rb") as f:
        head = f.read(1024)
        if b"%PDF-" not in head:
            return PdfFacts(error="it does not start like a PDF (no %PDF- header)")
        try:
            return _by_xref(f, size)
        except _Broken:
            pass
        if size > SCAN_BYTES:
            f.seek(max(0, size - 65536))
            tail = f.read()
            return PdfFacts(encrypted=b"/Encrypt" in tail)
        f.seek(0)
        data = f.read(SCAN_BYTES)
    return _by_scan(data)


def _by_xref(f: BinaryIO, size: int) -> PdfFacts:
    objects = _Objects(f, size)
    trailers = objects.load()
    if any(re.search(rb"/Encrypt\b", t) for t in trailers):
        return PdfFacts(encrypted=True)
    root = next((r for t in trailers if (r := _ref(t, b"Root")) is not None), None)
    catalog = objects.get(root) if root is not None else None
    if catalog is None:
        raise _Broken("no catalog")
    info = next((r for t in trailers if (r := _ref(t, b"Info")) is not None), None)
    try:
        return _facts(objects, catalog, info, by_count=True)
    except KeyError as e:  # an object the page tree needs is not in the xref data
        raise _Broken("page tree") from e


def _by_scan(data: bytes) -> PdfFacts:
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
    info_at = data.rfind(b"/Info")
    return _facts(objects, catalog, _ref(data[info_at:info_at + 40], b"Info") if info_at >= 0 else None)


def _facts(objects: Mapping[int, bytes], catalog: bytes, info_num: int | None, *, by_count: bool = False) -> PdfFacts:
    """The facts from the catalog on. `by_count`: the page count is the page tree's /Count (checked by
    walking the tree up to TEXT_CHECKS pages, by reaching the first and last page beyond) and only the
    sampled pages are looked up; else the whole tree is walked."""
    root = _ref(catalog, b"Pages")
    count = _int(objects.get(root if root is not None else -1, b""), b"Count") if by_count else None
    if root is not None and count is not None and TEXT_CHECKS < count <= MAX_PAGES:
        n = count
        picks: Sequence[int] = sorted({round(k * (n - 1) / (TEXT_CHECKS - 1)) for k in range(TEXT_CHECKS)})
        tree: dict[int, tuple[bytes, list[bytes] | None, int | None]] = {}
        pages = {i: _page_at(objects, tree, root, i) for i in picks}
    else:
        walked = _pages(objects, root)
        n, picks, pages = len(walked), range(len(walked)), dict(enumerate(walked))
        if by_count and n != count:  # a page the xref data does not reach, or a cycle: the scan decides
            raise _Broken("page count")
    info = objects.get(info_num if info_num is not None else -1, b"")
    meta = {k.lower(): v for k in ("Title", "Author", "Subject", "CreationDate", "ModDate")
            if (v := _string(info, k))}
    outline = _outline(objects, _ref(catalog, b"Outlines"))
    textless = tuple(i + 1 for i in picks if not _draws_text(objects, pages[i]))
    return PdfFacts(n, False, meta, outline, textless, checked=len(picks))


def _page_at(objects: Mapping[int, bytes], tree: dict[int, tuple[bytes, list[bytes] | None, int | None]], root: int,
             index: int) -> bytes:
    """The dictionary of page `index` (0-based), found by the /Count of the page tree's nodes.

    A node whose /Count equals its number of kids has a page in each kid (the usual flat tree), so
    page `index` is kid `index`; otherwise kids are read in order until their counts reach `index`.
    `tree` keeps each node read (its dictionary, kids and /Count) for the next lookup.
    """

    def node_of(num: int) -> tuple[bytes, list[bytes] | None, int | None]:
        if num not in tree:
            node = _dict_part(objects[num])
            tree[num] = (node, _kids(node), _int(node, b"Count"))
        return tree[num]

    num, seen = root, set[int]()
    while True:
        if num in seen or len(seen) > 64:
            raise _Broken("page tree cycle or depth")
        seen.add(num)
        node, kids, count = node_of(num)
        if kids is None:
            if index:
                raise _Broken("page tree /Count")
            return node
        if count == len(kids) and index < len(kids):
            leaf, leaf_kids, _ = node_of(int(kids[index]))
            if leaf_kids is None:
                return leaf
        for kid in map(int, kids):
            _, kid_kids, kid_count = node_of(kid)
            has = 1 if kid_kids is None else kid_count
            if has is None:
                raise _Broken("page tree node without /Count")
            if index < has:
                num = kid
                break
            index -= has
        else:
            raise _Broken("page tree /Count")


def _kids(node: bytes) -> list[bytes] | None:
    """The object numbers (digits, for int()) of a page tree node's kids (/Type /Pages with /Kids); None
    for a page."""
    kids = re.search(rb"/Kids\s*\[([^\[\]]*)\]", node)  # from one `[` to the next bracket: linear
    if kids is None or not re.search(rb"/Type\s*/Pages\b", node):
        return None
    return _REF.findall(kids.group(1))


@dataclass(frozen=True)
class _Section:
    """One cross-reference section: rows of `row` bytes in `data`, ranges of (first object, count, offset)."""

    data: bytes
    ranges: tuple[tuple[int, int, int], ...]
    row: int
    widths: tuple[int, ...] = ()  # an xref stream's /W; () for a classic table (20-byte text rows)

    def lookup(self, num: int) -> tuple[int, int] | None:
        """(-1, offset), (object stream, index) or _FREE for object `num`; None when not in this section."""
        k = bisect.bisect_right(self.ranges, (num, _NO_MORE, _NO_MORE)) - 1  # ranges are sorted by first
        if k < 0:
            return None
        first, count, at = self.ranges[k]
        if num >= first + count:
            return None
        return self._entry(self.data[at + self.row * (num - first):at + self.row * (num - first + 1)])

    def numbers(self) -> Iterator[int]:
        for first, count, _ in self.ranges:
            yield from range(first, first + count)

    def _entry(self, entry: bytes) -> tuple[int, int]:
        if not self.widths:
            m = _ENTRY.fullmatch(entry)
            if m is None:
                raise _Broken("xref table entry")
            return (-1, int(m.group(1))) if m.group(2) == b"n" else _FREE
        if len(entry) < self.row:
            raise _Broken("xref stream short")
        w, fields, at = self.widths, [], 0
        for width in w:
            fields.append(int.from_bytes(entry[at:at + width], "big"))
            at += width
        kind = fields[0] if w[0] else 1
        return (-1, fields[1]) if kind == 1 else (fields[1], fields[2]) if kind == 2 else _FREE


class _Objects(Mapping[int, bytes]):
    """The file's objects located through its cross-reference data, each read on first use."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f, self._size, self._read_in_all = f, size, 0
        self._sections: list[_Section] = []  # newest first: the first that has an object says where it is
        self._cache: dict[int, bytes] = {}
        self._members: dict[int, dict[int, bytes]] = {}

    def load(self) -> list[bytes]:
        """Reads every cross-reference section from `startxref` on; their trailer dictionaries, newest first."""
        tail = self._read(max(0, self._size - 2048), 2048)
        found = re.findall(rb"startxref\s+(\d+)", tail)
        if not found:
            raise _Broken("no startxref")
        trailers: list[bytes] = []
        queue, seen = [int(found[-1])], set[int]()
        while queue:
            at = queue.pop(0)
            if at in seen:
                continue  # a /Prev cycle: every section in it is read once
            if len(seen) >= XREF_SECTIONS or at >= self._size:
                raise _Broken("xref sections")
            seen.add(at)
            head = self._read(at, 32)
            trailer = self._table(at) if head.lstrip().startswith(b"xref") else self._xref_stream(at)
            trailers.append(trailer)
            queue.extend(n for key in (b"XRefStm", b"Prev") if (n := _int(trailer, key)) is not None)
        return trailers

    def where(self, num: int) -> tuple[int, int]:
        return next((w for section in self._sections if (w := section.lookup(num)) is not None), _FREE)

    def __getitem__(self, num: int) -> bytes:
        if num in self._cache:
            return self._cache[num]
        where = self.where(num)
        if where == _FREE:
            raise KeyError(num)
        stm, at = where
        if stm == -1:
            body = self._object_at(at, num)
        else:
            members = self._members.get(stm)
            if members is None:
                holder = self.where(stm)
                if holder[0] != -1:
                    raise _Broken("object stream not at an offset")
                members = self._members[stm] = _members(self._object_at(holder[1], stm))
            if num not in members:
                raise _Broken("object not in its object stream")
            body = members[num]
        self._cache[num] = body
        return body

    def __iter__(self) -> Iterator[int]:
        numbers = {n for section in self._sections for n in section.numbers()}
        return (n for n in sorted(numbers) if self.where(n) != _FREE)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _read(self, at: int, n: int) -> bytes:
        n = min(n, SCAN_BYTES - self._read_in_all)
        if n <= 0:
            raise _Broken("read budget")
        self._f.seek(at)
        data = self._f.read(n)
        self._read_in_all += len(data)
        return data

    def _object_at(self, at: int, num: int) -> bytes:
        """The body of object `num` at byte `at` (as between `obj` and `endobj`), its stream cut to /Length."""
        buf = self._read(at, 256)  # most dictionaries fit; a longer object is read on in growing steps
        m = _HEAD.match(buf)
        if m is None or int(m.group(1)) != num:
            raise _Broken("no such object at its offset")
        start = at + m.end()
        buf = buf[m.end():]
        while True:
            end = buf.find(b"endobj")
            data_at = _stream_start(buf, end)
            if data_at is not None:
                return self._with_stream(buf[:buf.rfind(b"stream", 0, data_at)], start + data_at)
            if end >= 0:
                return buf[:end]
            if len(buf) > OBJECT_BYTES or start + len(buf) >= self._size:
                raise _Broken("object without endobj")
            buf += self._read(start + len(buf), max(4096, len(buf)))

    def _with_stream(self, head: bytes, data_at: int) -> bytes:
        m = re.search(rb"/Length\s+(\d+)(\s+\d+\s+R\b)?", head)
        if m is None:
            raise _Broken("stream without /Length")
        length_of = self.get(int(m.group(1)), b"").strip() if m.group(2) else m.group(1)
        if not length_of.isdigit():
            raise _Broken("stream /Length unreadable")
        length = int(length_of)
        if length > INFLATE_BYTES:
            return head  # not read: its content is unknown
        data = self._read(data_at, length + 32)
        if b"endstream" not in data[length:]:
            raise _Broken("stream /Length wrong")
        return head + b"stream\n" + data[:length] + b"\nendstream"

    def _table(self, at: int) -> bytes:
        """Reads the classic table at `at` (its subsections located, entries read on lookup); its trailer."""
        buf, pos, ranges = b"", 0, []

        def have(n: int) -> None:
            nonlocal buf
            while len(buf) < n and at + len(buf) < self._size:
                if len(buf) >= XREF_BYTES:
                    raise _Broken("xref table too long")
                buf += self._read(at + len(buf), max(4096, len(buf), n - len(buf)))

        have(64)
        pos = buf.find(b"xref") + 4
        while True:
            have(pos + 64)
            m = _SUBSECTION.match(buf, pos)
            if m is None:
                break
            first, count = int(m.group(1)), int(m.group(2))
            if 20 * count > XREF_BYTES:
                raise _Broken("xref subsection too long")
            ranges.append((first, count, m.end()))
            pos = m.end() + 20 * count
            if len(ranges) > XREF_RANGES:
                raise _Broken("xref table with too many subsections")
        if not re.match(rb"\s*trailer\b", buf[pos:pos + 64]):
            raise _Broken("xref table without trailer")
        have(pos + 4096)
        rest = buf[pos:pos + 4096]
        self._sections.append(_Section(buf, tuple(sorted(ranges)), 20))
        return rest[:rest.find(b"startxref")] if b"startxref" in rest else rest

    def _xref_stream(self, at: int) -> bytes:
        m = _HEAD.match(self._read(at, 64))
        if m is None:
            raise _Broken("no xref at startxref")
        body = self._object_at(at, int(m.group(1)))
        d = _dict_part(body)
        widths = re.search(rb"/W\s*\[([\d\s]+)\]", d)
        raw = _stream(body)
        if not re.search(rb"/Type\s*/XRef\b", d) or widths is None or raw is None:
            raise _Broken("unreadable xref stream")
        raw = _unpredict(raw, d)
        w = tuple(int(x) for x in widths.group(1).split())
        if len(w) != 3 or sum(w) == 0:
            raise _Broken("xref stream /W")
        index = re.search(rb"/Index\s*\[([\d\s]+)\]", d)
        numbers = [int(x) for x in index.group(1).split()] if index else [0, _int(d, b"Size") or 0]
        ranges, at_row = [], 0
        if len(numbers) > 2 * XREF_RANGES:
            raise _Broken("xref stream with too many subsections")
        for first, count in zip(numbers[::2], numbers[1::2], strict=False):
            ranges.append((first, count, at_row * sum(w)))
            at_row += count
        self._sections.append(_Section(raw, tuple(sorted(ranges)), sum(w), w))
        return d


def _unpredict(raw: bytes, d: bytes) -> bytes:
    """Undoes a PNG predictor (/Predictor 10-15) on rows of /Columns bytes; TIFF predictors are not read."""
    predictor = _int(d, b"Predictor") or 1
    if predictor == 1:
        return raw
    if predictor < 10:
        raise _Broken("TIFF predictor")
    cols = _int(d, b"Columns") or 1
    out, prev = bytearray(), bytearray(cols)
    for r in range(0, len(raw) - cols, cols + 1):
        kind, line = raw[r], bytearray(raw[r + 1:r + 1 + cols])
        for i in range(cols):
            left = line[i - 1] if i else 0
            up, corner = prev[i], prev[i - 1] if i else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        out += line
        prev = line
    return bytes(out)


def _objects(data: bytes) -> dict[int, bytes]:
    """Every `N G obj ... endobj` of the data by number (a later one replaces an earlier), then the members of
    its object streams. Linear: heads and ends are found once each, and each head meets its end by bisection
    (a lazy `obj(.*?)endobj` pattern rescans to the end from every head that has none)."""
    ends = [(m.start(), m.end()) for m in _ENDOBJ.finditer(data)]
    starts = [start for start, _ in ends]
    objects: dict[int, bytes] = {}
    resume = 0
    for head in _OBJ_HEAD.finditer(data):
        if head.start() < resume:
            continue  # inside the object before
        i = bisect.bisect_left(starts, head.end())
        if i == len(ends):
            break  # no end after this head, so none after any later one
        objects[int(head.group(1))] = data[head.end():ends[i][0]]
        resume = ends[i][1]
    for body in [o for o in objects.values() if re.search(rb"/Type\s*/ObjStm\b", o)]:
        for num, member in _members(body).items():
            objects.setdefault(num, member)
    return objects


def _members(body: bytes) -> dict[int, bytes]:
    """The objects inside an object stream (/Type /ObjStm), by number; {} when it cannot be read."""
    raw = _stream(body)
    n, first = _int(body, b"N"), _int(body, b"First")
    if raw is None or n is None or first is None:
        return {}
    try:
        pairs = [int(x) for x in raw[:first].split()[: 2 * n]]
    except ValueError:
        return {}
    offsets = [(pairs[i], first + pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]
    members: dict[int, bytes] = {}
    for k, (num, start) in enumerate(offsets):
        end = offsets[k + 1][1] if k + 1 < len(offsets) else len(raw)
        members.setdefault(num, raw[start:end])
    return members


def _pages(objects: Mapping[int, bytes], root: int | None) -> list[bytes]:
    found: list[bytes] = []
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack and len(found) < MAX_PAGES:
        num = stack.pop()
        if num in seen or num not in objects:
            continue
        seen.add(num)
        node = _dict_part(objects[num])
        kids = _kids(node)
        if kids is not None:
            stack.extend(int(k) for k in reversed(kids))
        else:
            found.append(node)
    return found


def _outline(objects: Mapping[int, bytes], first_of: int | None) -> tuple[str, ...]:
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


def _draws_text(objects: Mapping[int, bytes], page: bytes) -> bool:
    """False only when every content stream of the page was read and none has a text operator."""
    contents = re.search(rb"/Contents\s*(\[[^\[\]]*\]|\d{1,10}\s+\d{1,10}\s+R)", page)
    if contents is None:
        return False
    for ref in _REF.findall(contents.group(1)):
        body = objects.get(int(ref))
        if body is None or _shows_text(body) is not False:
            return True
    return False


def _shows_text(body: bytes) -> bool | None:
    """Whether a content stream has a text operator; None when it cannot be read. A Flate stream is
    inflated in steps only up to its first text operator (at most INFLATE_BYTES)."""
    at = _stream_start(body)
    if at is None:
        return None
    if _filters(body) not in ([b"FlateDecode"], [b"Fl"]):
        raw = _stream(body)
        return None if raw is None else _SHOWS_TEXT.search(raw) is not None
    inflate, pending, tail, total, step = zlib.decompressobj(), body[at:body.rfind(b"endstream")], b"", 0, 1024
    try:
        while total < INFLATE_BYTES:
            limit = min(step, INFLATE_BYTES - total)
            out = inflate.decompress(pending, limit)
            step = min(2 * step, 2**20)
            pending, total = inflate.unconsumed_tail, total + len(out)
            final = inflate.eof or (not pending and len(out) < limit)  # else more output is held back
            if not out and not final:
                return None  # no progress: not a stream zlib can finish
            window = tail + out
            m = _SHOWS_TEXT.search(window)
            if m is not None and (m.end() < len(window) or final):  # `'` at a step's end may go on
                return True
            if final:
                return False
            tail = window[-64:]
    except zlib.error:
        return None
    return False


def _stream(body: bytes) -> bytes | None:
    """A stream's decoded bytes (ASCII85 and Flate only), at most INFLATE_BYTES; None when not readable."""
    at = _stream_start(body)
    if at is None:
        return None
    raw = body[at:body.rfind(b"endstream")]
    for name in _filters(body):
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


def _stream_start(body: bytes, end: int = -1) -> int | None:
    """Where the data of the body's stream starts (after `stream` and its end of line), before `end`."""
    at = body.find(b"stream", 0, end if end >= 0 else len(body))
    while at >= 0:
        if body[at - 3:at] != b"end" and (m := _STREAM_EOL.match(body, at + 6)) is not None:
            return m.end()
        at = body.find(b"stream", at + 6, end if end >= 0 else len(body))
    return None


def _filters(body: bytes) -> list[bytes]:
    return re.findall(rb"/(ASCII85Decode|FlateDecode|A85|Fl|[A-Za-z0-9]+Decode)", _dict_part(body))


def _dict_part(body: bytes) -> bytes:
    at = body.find(b"stream")
    return body if at < 0 else body[:at]


def _ref(body: bytes, key: bytes) -> int | None:
    m = re.search(rb"/" + key + rb"\s+(\d+)\s+\d+\s+R", _dict_part(body))
    return int(m.group(1)) if m else None


def _int(body: bytes, key: bytes) -> int | None:
    m = re.search(rb"/" + key + rb"\s+(\d+)", _dict_part(body))
    return int(m.group(1)) if m else None


_STRING = re.compile(rb"(\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>)", re.S)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f", b"(": b"(", b")": b")", b"\\": b"\\"}


def _string(body: bytes, key: str) -> str:
    """A string value of the dictionary (literal or hex), decoded; "" when absent."""
    part = _dict_part(body)
    at = re.search(rb"/" + key.encode() + rb"\s*[(<]", part)  # its first occurrence, then one match from there:
    m = _STRING.match(part, at.end() - 1) if at else None  # a pattern searched from each occurrence is quadratic
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


__all__ = ["A85_BYTES", "INFLATE_BYTES", "MAX_OUTLINE", "MAX_PAGES", "OBJECT_BYTES", "PdfFacts", "SCAN_BYTES",
           "TEXT_CHECKS", "XREF_BYTES", "XREF_RANGES", "XREF_SECTIONS", "scan_pdf"]
