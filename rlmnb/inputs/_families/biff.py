""".xls workbooks (BIFF8 in an OLE2 compound file) read as records, with the standard library only.

Binding (on the host) and the sandbox (before python-calamine opens the file) both read the workbook
here, never with a spreadsheet library: `scan_workbook` follows the compound file's FAT to the
"Workbook" stream (every sector chain checked for range and cycles), walks its BIFF records, and
gives each sheet's name, its declared extent (the DIMENSIONS record) and its first row's text.

With `whole=True` it also walks every cell record of every sheet and measures what calamine will
allocate when it opens the file, which it does for all sheets at once: the rectangle from the first
to the last cell with a value (BLANK and MULBLANK cells are not kept by calamine, cells of embedded
charts are skipped like calamine skips them), and the capacity the sheet's DIMENSIONS records make
it reserve while it reads the sheet. Each of these, and the sum of the rectangles over the sheets
(calamine keeps them all), must stay within `MAX_SHEET_CELLS`, else an InputError names the sheet.
Sheets are walked in stream order and may not overlap, so each record is read once.

A damaged, encrypted (FILEPASS) or pre-BIFF8 (Excel 5.0/95) file, or one of over `MAX_SHEETS` sheets,
is an InputError naming it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from rlmnb._ground.errors import InputError
from rlmnb.inputs._families.sheets import MAX_SHEET_CELLS, Extent, SheetFacts, WorkbookFacts, check_extent

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
HEAD_BYTES = 16 * 2**10         # of a sheet's records read at bind time for its DIMENSIONS and first row
MAX_SHEETS = 4_096              # sheets of one workbook
GLOBALS_BYTES = 16 * 2**20      # of the workbook globals (sheet list, shared strings) read at bind time
SHARED_STRINGS = 100_000        # shared strings decoded for headers

_END, _FREE = 0xFFFFFFFE, 0xFFFFFFFF
_CELLS = {0x0203, 0x0204, 0x00D6, 0x0205, 0x027E, 0x00FD, 0x0006}  # a value (or formula) at row, col
_BOF, _EOF, _CONTINUE, _DIMENSIONS, _MULRK = 0x0809, 0x000A, 0x003C, 0x0200, 0x00BD


class _Damaged(Exception):
    """The file is not a well-formed compound file with a BIFF8 workbook; the message says why."""


class _Encrypted(Exception):
    pass


class _Old(Exception):
    pass


@dataclass(frozen=True)
class XlsSheet:
    """A sheet's stream position with what binding needs, and (whole scans) what calamine will allocate."""

    facts: SheetFacts
    offset: int
    cells: int = 0   # the cells of calamine's rectangle (whole scans only)


# ---- the compound file ------------------------------------------------------------------------------------
class _Stream:
    """One stream of a compound file, read by offset through its checked sector chain."""

    def __init__(self, f: BinaryIO, sectors: Sequence[int], size: int, shift: int, base: int) -> None:
        self.f, self.sectors, self.size, self.shift, self.base = f, sectors, size, shift, base

    def read(self, offset: int, n: int) -> bytes:
        out = bytearray()
        step = 1 << self.shift
        end = min(self.size, offset + n)
        while offset < end:
            i, within = divmod(offset, step)
            take = min(step - within, end - offset)
            self.f.seek(self.base + (self.sectors[i] << self.shift) + within)
            got = self.f.read(take)
            if len(got) != take:
                raise _Damaged("a sector lies past the end of the file")
            out += got
            offset += take
        return bytes(out)


def _chain(table: Sequence[int], start: int, limit: int) -> list[int]:
    out: list[int] = []
    seen: set[int] = set()
    at = start
    while at != _END:
        if at >= limit or at >= len(table) or at in seen:
            raise _Damaged("a sector chain is broken")
        seen.add(at)
        out.append(at)
        at = table[at]
    return out


def _u32s(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}I", data[: len(data) // 4 * 4]))


def _workbook_stream(f: BinaryIO, size: int) -> _Stream:
    head = f.read(512)
    if len(head) < 512 or head[:8] != MAGIC:
        raise _Damaged("it is not an OLE2 compound file")
    shift, mini_shift = struct.unpack_from("<HH", head, 0x1E)
    if shift not in (9, 12) or mini_shift != 6:
        raise _Damaged("its sector size is invalid")
    step = 1 << shift
    base = step  # sector 0 starts after the header's sector
    limit = max(0, (size - base + step - 1) // step)
    dir_start, = struct.unpack_from("<I", head, 0x30)
    cutoff, mini_start, mini_count, difat_start, difat_count = struct.unpack_from("<IIIII", head, 0x38)
    fat_sectors = [s for s in _u32s(head[0x4C:512]) if s < limit]
    raw = _Stream(f, range(limit), limit * step, shift, base)
    seen: set[int] = set()
    at = difat_start
    while at < limit and len(seen) <= difat_count:  # DIFAT sectors: more FAT sector numbers, then the next
        if at in seen:
            raise _Damaged("its sector table loops")
        seen.add(at)
        ids = _u32s(raw.read(at << shift, step))
        fat_sectors += [s for s in ids[:-1] if s < limit]
        at = ids[-1]
    if len(fat_sectors) * (step // 4) < limit or len(set(fat_sectors)) != len(fat_sectors):
        raise _Damaged("its sector table is incomplete")
    fat: list[int] = []
    for s in fat_sectors[: (limit * 4 + step - 1) // step]:
        fat += _u32s(raw.read(s << shift, step))
    directory = _Stream(f, _chain(fat, dir_start, limit), 1 << 40, shift, base)
    entries = []
    for i in range(min(len(directory.sectors) * step // 128, 100_000)):
        e = directory.read(i * 128, 128)
        length, kind = struct.unpack_from("<HB", e, 0x40)
        name = e[: max(0, min(length, 64) - 2)].decode("utf-16-le", "replace")
        start, stream_size = struct.unpack_from("<IQ", e, 0x74)
        if shift == 9:
            stream_size &= 0xFFFFFFFF
        entries.append((name, kind, start, stream_size))
    names = {name.lower(): (kind, start, n) for name, kind, start, n in entries if kind in (2, 5)}
    if "encryptedpackage" in names:
        raise _Encrypted
    if "workbook" not in names:
        raise _Old if "book" in names else _Damaged("it has no Workbook stream")
    _, start, stream_size = names["workbook"]
    if stream_size > size:
        raise _Damaged("its Workbook stream is longer than the file")
    if stream_size >= cutoff:
        sectors = _chain(fat, start, limit)
        if len(sectors) * step < stream_size:
            raise _Damaged("its Workbook stream is truncated")
        return _Stream(f, sectors, stream_size, shift, base)
    root = entries[0] if entries else ("", 0, _END, 0)  # a small stream lives in the root's mini stream
    container = _Stream(f, _chain(fat, root[2], limit), root[3], shift, base)
    minifat = _u32s(_Stream(f, _chain(fat, mini_start, limit), mini_count * step, shift, base).read(0, mini_count * step))
    blob = container.read(0, root[3])
    mini = _chain(minifat, start, len(blob) // 64)
    if len(mini) * 64 < stream_size:
        raise _Damaged("its Workbook stream is truncated")
    data = b"".join(blob[s * 64:(s + 1) * 64] for s in mini)[:stream_size]
    return _Bytes(data)


class _Bytes(_Stream):
    def __init__(self, data: bytes) -> None:
        self.data, self.size = data, len(data)

    def read(self, offset: int, n: int) -> bytes:
        return self.data[offset:offset + n]


# ---- BIFF records ------------------------------------------------------------------------------------------
def _records(data: bytes, at: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """(position, type, data) of each whole record in `data` from `at` (a cut last record is left out)."""
    n = len(data)
    while at + 4 <= n:
        kind, length = struct.unpack_from("<HH", data, at)
        if at + 4 + length > n:
            return
        yield at, kind, data[at + 4:at + 4 + length]
        at += 4 + length


def _unicode(data: bytes, at: int, count: int, wide: bool) -> tuple[str, int]:
    size = count * (2 if wide else 1)
    return data[at:at + size].decode("utf-16-le" if wide else "latin-1", "replace"), at + size


def _shared_strings(parts: list[bytes]) -> list[str]:
    """The SST record's strings (its data, then each CONTINUE's), at most SHARED_STRINGS of them."""
    if not parts or len(parts[0]) < 8:
        return []
    total, = struct.unpack_from("<I", parts[0], 4)
    part, at = 0, 8
    out: list[str] = []

    def take(n: int) -> bytes:
        nonlocal part, at
        got = b""
        while len(got) < n and part < len(parts):
            piece = parts[part][at:at + n - len(got)]
            got += piece
            at += len(piece)
            if at >= len(parts[part]):
                part, at = part + 1, 0
        return got

    while len(out) < min(total, SHARED_STRINGS) and part < len(parts):
        head = take(3)
        if len(head) < 3:
            break
        count, flags = struct.unpack("<HB", head)
        runs = struct.unpack("<H", take(2))[0] if flags & 0x08 else 0
        ext = struct.unpack("<I", take(4))[0] if flags & 0x04 else 0
        wide, text = bool(flags & 0x01), ""
        while len(text) < count and part < len(parts):
            room = (len(parts[part]) - at) // (2 if wide else 1)
            piece = take(min(count - len(text), max(room, 1)) * (2 if wide else 1))
            text += piece.decode("utf-16-le" if wide else "latin-1", "replace")
            if len(text) < count and part < len(parts) and at == 0:  # a CONTINUE restarts with its own flags
                wide = bool(take(1)[:1] == b"\x01")
        take(4 * runs + ext)
        out.append(text)
    return out


def _label(kind: int, data: bytes, shared: Sequence[str]) -> str | None:
    """The text of a LABELSST, LABEL or RSTRING cell; None for a cell of another kind."""
    if kind == 0x00FD and len(data) >= 10:
        i, = struct.unpack_from("<I", data, 6)
        return shared[i] if i < len(shared) else "?"
    if kind in (0x0204, 0x00D6) and len(data) >= 9:
        count, flags = struct.unpack_from("<HB", data, 6)
        return _unicode(data, 9, count, bool(flags & 1))[0]
    return None


# ---- the workbook --------------------------------------------------------------------------------------------
def scan_workbook(path: str, shown: str, whole: bool = False) -> tuple[XlsSheet, ...]:
    """Every sheet of the .xls file at `path`, in workbook order (see the module docstring).

    Raises InputError (one sentence naming `shown`) for a damaged, encrypted or Excel 5/95 file, a sheet
    whose declared extent is over MAX_SHEET_CELLS and, with `whole`, a workbook whose cells as calamine
    would allocate them are over it.
    """
    import os

    try:
        with open(path, "rb") as f:
            stream = _workbook_stream(f, os.fstat(f.fileno()).st_size)
            return _sheets(stream, shown, whole)
    except _Encrypted:
        raise InputError(f"{shown} is encrypted; save an unencrypted copy (File > Info > Protect Workbook) "
                         "and bind that.") from None
    except _Old:
        raise InputError(f"{shown} is an Excel 5.0/95 workbook; save it as .xlsx (File > Save As) and "
                         "bind that.") from None
    except _Damaged as e:
        raise InputError(f"{shown} is not a readable .xls workbook ({e}).") from None
    except (OSError, struct.error, IndexError, ValueError) as e:
        raise InputError(f"{shown} is not a readable .xls workbook ({e}).") from None


def _sheets(stream: _Stream, shown: str, whole: bool) -> tuple[XlsSheet, ...]:
    globals_ = stream.read(0, stream.size if whole else GLOBALS_BYTES)
    listed: list[tuple[str, int]] = []
    sst: list[bytes] = []
    collecting = False
    for i, (_, kind, data) in enumerate(_records(globals_)):
        if i == 0 and (kind != _BOF or len(data) < 4 or struct.unpack_from("<H", data)[0] != 0x0600):
            if kind == _BOF and data[:2] in (b"\x00\x05", b"\x00\x04"):
                raise _Old
            raise _Damaged("its Workbook stream does not start with a BIFF8 BOF record")
        collecting = collecting and kind == _CONTINUE
        if kind == 0x002F:
            raise _Encrypted
        if kind == 0x0085 and len(data) >= 8:
            offset, = struct.unpack_from("<I", data)
            count, flags = data[6], data[7]
            listed.append((_unicode(data, 8, count, bool(flags & 1))[0].replace("\0", ""), offset))
        elif kind == 0x00FC:
            sst, collecting = [data], True
        elif kind == _CONTINUE and collecting:
            sst.append(data)
        elif kind == _EOF:
            break
    if len(listed) > MAX_SHEETS:
        raise InputError(f"{shown} has {len(listed):,} sheets, over the {MAX_SHEETS:,}-sheet limit; save the sheets "
                         "you need in a new workbook.")
    shared = _shared_strings(sst)
    for name, offset in listed:
        if offset >= stream.size:
            raise _Damaged(f"sheet {name!r} starts past the end of its stream")
    if not whole:
        return tuple(_head_sheet(stream.read(offset, HEAD_BYTES), offset, name, shared, shown)
                     for name, offset in listed)
    measured: dict[int, XlsSheet] = {}
    total = end = 0
    for i in sorted(range(len(listed)), key=lambda i: listed[i][1]):  # in stream order, each record walked once
        name, offset = listed[i]
        if offset < end:
            raise _Damaged(f"sheet {name!r} overlaps the sheet before it")
        measured[i], end = _whole_sheet(globals_, offset, name, shared, shown)
        total += measured[i].cells
        if total > MAX_SHEET_CELLS:
            raise InputError(f"{shown}: its sheets up to {name!r} would take over {MAX_SHEET_CELLS:,} cells "
                             "once read (an .xls workbook is read whole); export the part you need as CSV.")
    return tuple(measured[i] for i in range(len(listed)))


def _dimensions(data: bytes) -> tuple[Extent | None, int]:
    """The declared extent (None: empty) and the cells calamine reserves for it (its own arithmetic)."""
    if len(data) == 14:
        rf, rl, cf, cl = struct.unpack_from("<IIHH", data)
    elif len(data) == 10:
        rf, rl, cf, cl = struct.unpack_from("<HHHH", data)
    else:
        raise _Damaged("a DIMENSIONS record has the wrong length")
    if cf > 0xFF or cl < cf:
        cf = 0
    if rl < 1 or cl < 1:
        return None, 1
    rows = (rl - 1 - rf + 1) % 2**32
    cols = (cl - 1 - cf + 1) % 2**32
    extent = Extent(rf + 1, cf + 1, rl, cl) if rl > rf and cl > cf else None
    return extent, rows * cols


def _check_reserved(cells: int, shown: str, name: str) -> None:
    if cells > MAX_SHEET_CELLS:
        raise InputError(f"{shown}: sheet {name!r} declares {cells:,} cells, over the {MAX_SHEET_CELLS:,}-cell "
                         "limit for one sheet; export the part you need as CSV.")


def _first_row(cells: list[tuple[int, int, str | None]], first_col: int) -> tuple[str | None, ...]:
    """The first row's cells from `first_col` (1-based) on: text as text, other values None, gaps ""."""
    if not cells:
        return ()
    row = min(r for r, _, _ in cells)
    by_col = {c: v for r, c, v in cells if r == row}
    return tuple(by_col.get(c, "") for c in range(first_col - 1, max(by_col) + 1))


def _head_sheet(data: bytes, offset: int, name: str, shared: Sequence[str], shown: str) -> XlsSheet:
    extent: Extent | None = None
    cells: list[tuple[int, int, str | None]] = []
    for i, (_, kind, body) in enumerate(_records(data)):
        if i == 0 and kind != _BOF:
            raise _Damaged(f"sheet {name!r} does not start with a BOF record")
        if kind == _DIMENSIONS:
            extent, reserve = _dimensions(body)
            check_extent(extent, shown, name)
            _check_reserved(reserve, shown, name)
        elif kind in _CELLS and len(body) >= 4:
            row, col = struct.unpack_from("<HH", body)
            if cells and row != cells[0][0]:
                break
            cells.append((row, col, _label(kind, body, shared)))
        elif kind == _EOF or (kind == _BOF and i > 0):
            break
    first = _first_row(cells, extent.first_col if extent else 1)
    return XlsSheet(SheetFacts(name, str(offset), extent, first), offset)


def _whole_sheet(data: bytes, offset: int, name: str, shared: Sequence[str], shown: str) -> tuple[XlsSheet, int]:
    """The sheet's extent measured from its cell records, after its DIMENSIONS reservations are checked;
    and where its records end.

    One pass over the records without copying them (a sheet may hold millions): only a cell's row and
    columns are read, and the first row's cells for the header.
    """
    unpack, n, at = struct.unpack_from, len(data), offset
    top = left = 2**32
    bottom = right = -1
    reserved = depth = 0
    cells: list[tuple[int, int, str | None]] = []
    first = True
    while at + 4 <= n:
        kind, length = unpack("<HH", data, at)
        body, at = at + 4, at + 4 + length
        if at > n:
            break
        if first and kind != _BOF:
            raise _Damaged(f"sheet {name!r} does not start with a BOF record")
        if depth:
            depth += 1 if kind == _BOF else -1 if kind == _EOF else 0
        elif kind in _CELLS or kind == _MULRK:
            if length < 6:
                raise _Damaged(f"sheet {name!r} has a cut cell record")
            row, col = unpack("<HH", data, body)
            last = unpack("<H", data, at - 2)[0] if kind == _MULRK else col
            if row < top:
                top = row
            if row > bottom:
                bottom = row
            if col < left:
                left = col
            if last > right:
                right = last
            if len(cells) < 1_000 and (not cells or row == cells[0][0]):
                cells.append((row, col, _label(kind, data[body:at], shared)))
        elif kind == _DIMENSIONS:
            reserved += _dimensions(data[body:at])[1]
            _check_reserved(reserved, shown, name)
        elif kind == _BOF and not first:
            depth = 1  # an embedded chart's records, skipped as calamine skips them
        elif kind == _EOF:
            break
        first = False
    extent = Extent(top + 1, left + 1, bottom + 1, right + 1) if bottom >= 0 else None
    check_extent(extent, shown, name)
    size = extent.rows * extent.cols if extent else 0
    return XlsSheet(SheetFacts(name, str(offset), extent, _first_row(cells, extent.first_col if extent else 1)),
                    offset, size), at


def probe_xls(path: str, shown: str) -> WorkbookFacts:
    """Sheet names, declared extents and first rows, for binding."""
    return WorkbookFacts(tuple(s.facts for s in scan_workbook(path, shown)))


def read_xls(path: str, shown: str) -> tuple[tuple[XlsSheet, ...], Any]:
    """The sheets measured whole, then the python-calamine workbook (which reads every sheet on opening).

    Raises InputError as `scan_workbook` does, and for a file calamine cannot read.
    """
    measured = scan_workbook(path, shown, whole=True)
    import python_calamine

    try:
        return measured, python_calamine.CalamineWorkbook.from_path(path)
    except Exception as e:  # calamine's own errors for what the scan let through
        raise InputError(f"{shown} is not a readable .xls workbook ({e}).") from None


__all__ = ["GLOBALS_BYTES", "HEAD_BYTES", "MAGIC", "MAX_SHEETS", "SHARED_STRINGS", "XlsSheet", "probe_xls", "read_xls",
           "scan_workbook"]
