"""Spreadsheets as tables: each sheet of an XLSX workbook is one relation of the sandbox's DuckDB engine.

On the host (binding, standard library only, never calamine on the user's file): `probe_workbook`
reads the workbook's sheet list, each sheet's declared extent (the `<dimension ref>` at the head of its
XML, else a bounded scan of its cells) and its first row, so the summary can say names, shapes and
headers. `relations` names the relations: `<input>_<sheet>` for one workbook and
`<input>_<file>_<sheet>` for a folder or glob of them, each part lower-cased with every run of other
characters than letters and digits made one `_` (a clash gets `_2`, `_3`...). The input's own name is
the catalogue: one row per sheet (relation, file, sheet, rows, columns, header).

In the sandbox (the kernel process, confined, or the local sandbox): `read_rows` first streams the
sheet's XML and measures the rectangle from its first to its last cell with content (`sheet_extent`),
because calamine allocates that whole rectangle, so two cells far apart are a bomb; a rectangle over
`MAX_SHEET_CELLS` is an InputError naming the sheet. Then calamine reads the sheet and `to_arrow`
makes an Arrow table: the first row is the header when all its non-empty cells are text (empty
headers become the column's letter, repeated ones get `_2`), otherwise columns are named by letter;
each column gets one type (BIGINT when every number is whole, DOUBLE, BOOLEAN, DATE, TIMESTAMP, TIME,
INTERVAL, else VARCHAR holding every value as text).
"""

from __future__ import annotations

import datetime
import posixpath
import re
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlmnb._ground.errors import InputError
from rlmnb.inputs._families import xmlscan
from rlmnb.inputs._previews import plural

MAX_SHEET_CELLS = 10_000_000   # rows x columns of one sheet's used rectangle
HEAD_BYTES = 64 * 2**10        # of a sheet's XML read at bind time for its dimension and first row
SCAN_BYTES = 16 * 2**20        # of a sheet's XML scanned at bind time when it declares no dimension
SHARED_BYTES = 2**20           # of the shared strings read at bind time for headers
MEMBER_BYTES = 4 * 2**20       # of the workbook's sheet list and its relationships read
MAX_PROBED_WORKBOOKS = 1_000   # workbooks of a folder whose sheets become relations
HEADER_SHOWN = 12              # header names per sheet in the summary

_NS = r"(?:[A-Za-z_][\w.-]*:)?"
_ANY_REF = re.compile(rb" r=\"([A-Z]{1,3})(\d{1,7})\"")  # a cell's reference (a row's has no letters)
_CELL_TAG = re.compile(rb"<" + _NS.encode() + rb"c\b([^<>]*)>")  # a cell's start tag (from `<`: linear)
_CELL_OPEN = re.compile(rb"<" + _NS.encode() + rb"c[\s>/]")
_REF_RANGE = re.compile(r"([A-Z]{1,3})(\d{1,7})(?::([A-Z]{1,3})(\d{1,7}))?")
_TAG = re.compile(rb"<" + _NS.encode() + rb"(row|c)\b([^<>]*)>")
_REF_ATTR = re.compile(rb"\br=\"([A-Z]{0,3})(\d*)\"")


@dataclass(frozen=True)
class Extent:
    """A sheet's used rectangle, 1-based and inclusive; `rows` x `cols` cells."""

    first_row: int
    first_col: int
    last_row: int
    last_col: int

    @property
    def rows(self) -> int:
        return self.last_row - self.first_row + 1

    @property
    def cols(self) -> int:
        return self.last_col - self.first_col + 1


@dataclass(frozen=True)
class SheetFacts:
    """One sheet as binding saw it: its name, its XML member, extent (None: empty or not known) and first row."""

    name: str
    member: str
    extent: Extent | None
    first_row: tuple[str | None, ...] = ()   # text cells as text, other cells None
    known: bool = True                      # False when the extent was not measured within SCAN_BYTES


@dataclass(frozen=True)
class WorkbookFacts:
    sheets: tuple[SheetFacts, ...] = field(default_factory=tuple)


def column_letters(n: int) -> str:
    """1 -> "A", 27 -> "AA"."""
    out = ""
    while n > 0:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


def column_number(letters: bytes | str) -> int:
    n = 0
    for ch in letters if isinstance(letters, str) else letters.decode("ascii"):
        n = n * 26 + ord(ch) - 64
    return n


# ---- where the sheets are -------------------------------------------------------------------------------
def sheet_members(z: zipfile.ZipFile) -> list[tuple[str, str]]:
    """(sheet name, XML member) of each worksheet, in workbook order (chart sheets left out); the workbook's
    parts read in linear time (xmlscan), their first MEMBER_BYTES each."""
    targets: dict[str, str] = {}

    def relationship(name: str, attrs: dict[str, str]) -> None:
        if xmlscan.local(name) == "Relationship" and attrs.get("Type", "").endswith("/worksheet") \
                and "Id" in attrs and "Target" in attrs:
            target = attrs["Target"]
            targets[attrs["Id"]] = target.lstrip("/") if target.startswith("/") else posixpath.normpath(
                posixpath.join("xl", target))

    out: list[tuple[str, str]] = []

    def sheet(name: str, attrs: dict[str, str]) -> None:
        if xmlscan.local(name) == "sheet":
            rid = next((v for k, v in attrs.items() if ":" in k and xmlscan.local(k) == "id"), None)
            if "name" in attrs and rid in targets:
                out.append((attrs["name"], targets[rid]))

    _scan_member(z, "xl/_rels/workbook.xml.rels", xmlscan.Handler(start=relationship))
    _scan_member(z, "xl/workbook.xml", xmlscan.Handler(start=sheet))
    return out


def _scan_member(z: zipfile.ZipFile, name: str, handler: xmlscan.Handler, limit: int = MEMBER_BYTES) -> None:
    """Scan the first `limit` bytes of a member (if the archive has it) within the probe's time budget."""
    part = xmlscan.member_prefix(z, name, limit)
    if part is not None:
        xmlscan.scan(part[0], handler, complete=part[1], deadline=time.monotonic() + xmlscan.PROBE_SECONDS)


# ---- a sheet's extent ----------------------------------------------------------------------------------
def sheet_extent(z: zipfile.ZipFile, member: str, budget: int | None = None) -> tuple[Extent | None, bool]:
    """The rectangle of the cells with content, streamed from the sheet's XML; and whether it was read whole.

    With `budget`, at most that many inflated bytes are read; the extent is then (None, False) if the
    sheet is longer. Cells that all carry their reference (`r="B7"`, what Excel, LibreOffice and openpyxl
    write) are measured from the references (empty, self-closing cells left out when they would make the
    rectangle too large); a sheet with a cell without one is walked tag by tag.
    """
    how, found = _scan_refs(z, member, budget, with_empty=True)
    if how == "walk":
        return _walk_extent(z, member, budget)
    if found is not None and found.rows * found.cols > MAX_SHEET_CELLS:  # formatted empty cells far away?
        how, found = _scan_refs(z, member, budget, with_empty=False)
    return found, how == "whole"


class _OverBudget(Exception):
    pass


def _pieces(z: zipfile.ZipFile, member: str, budget: int | None) -> Iterator[bytes]:
    """The member's inflated XML in pieces cut before a `<`, so no tag is split; _OverBudget past `budget`."""
    with z.open(member) as f:
        carry, read = b"", 0
        while True:
            chunk = f.read(2**20)
            read += len(chunk)
            if budget is not None and read > budget:
                raise _OverBudget
            data = carry + chunk
            cut = data.rfind(b"<") if chunk else len(data)
            body, carry = (data[:cut], data[cut:]) if cut > 0 else (b"", data)
            if body:
                yield body
            if not chunk:
                return


def _scan_refs(z: zipfile.ZipFile, member: str, budget: int | None, with_empty: bool) -> tuple[str, Extent | None]:
    """("whole", the extent from cell references), ("budget", None) past the budget, ("walk", None) when a
    cell has no reference."""
    first_row = first_col = 10**9
    last_row = last_col = 0
    try:
        for body in _pieces(z, member, budget):
            refs = _ANY_REF.findall(body) if with_empty else _full_cell_refs(body)
            if with_empty and len(refs) != len(_CELL_OPEN.findall(body)):
                return "walk", None
            if refs:
                cols = {c for c, _ in refs}
                rows = {r for _, r in refs}
                first_col = min(first_col, min(column_number(c) for c in cols))
                last_col = max(last_col, max(column_number(c) for c in cols))
                first_row = min(first_row, min(int(r) for r in rows))
                last_row = max(last_row, max(int(r) for r in rows))
    except _OverBudget:
        return "budget", None
    return "whole", Extent(first_row, first_col, last_row, last_col) if last_row else None


def _full_cell_refs(body: bytes) -> list[tuple[bytes, bytes]]:
    """The references of the cells that are not self-closing (`<c r="B7" ...>`, not `<c r="B7"/>`). Linear:
    each tag is matched from its `<` to the next `<` or `>`, never again from inside it."""
    refs = []
    for m in _CELL_TAG.finditer(body):
        attrs = m.group(1)
        ref = _ANY_REF.search(attrs) if not attrs.endswith(b"/") else None
        if ref is not None:
            refs.append((ref.group(1), ref.group(2)))
    return refs


def _walk_extent(z: zipfile.ZipFile, member: str, budget: int | None) -> tuple[Extent | None, bool]:
    """The exact extent of a sheet whose cells may lack references: rows and cells counted in order."""
    first_row = first_col = 10**9
    last_row = last_col = 0
    row = col = 0
    try:
        for body in _pieces(z, member, budget):
            for m in _TAG.finditer(body):
                ref = _REF_ATTR.search(m.group(2))
                if m.group(1) == b"row":
                    row = int(ref.group(2)) if ref and ref.group(2) else row + 1
                    col = 0
                    continue
                col = column_number(ref.group(1)) if ref and ref.group(1) else col + 1
                if ref and ref.group(2):
                    row = int(ref.group(2))
                if not m.group(2).endswith(b"/"):
                    first_row, last_row = min(first_row, row), max(last_row, row)
                    first_col, last_col = min(first_col, col), max(last_col, col)
    except _OverBudget:
        return None, False
    return (Extent(first_row, first_col, last_row, last_col) if last_row else None), True


def check_extent(extent: Extent | None, shown: str, sheet: str) -> None:
    """InputError when the sheet's used rectangle is over MAX_SHEET_CELLS."""
    if extent is not None and extent.rows * extent.cols > MAX_SHEET_CELLS:
        span = f"{column_letters(extent.first_col)}{extent.first_row}:{column_letters(extent.last_col)}{extent.last_row}"
        raise InputError(f"{shown}: sheet {sheet!r} spans {span} ({extent.rows:,} rows x {extent.cols:,} columns), "
                         f"over the {MAX_SHEET_CELLS:,}-cell limit for one sheet; export the part you need as CSV.")


# ---- binding: the sheets of a workbook without reading them -------------------------------------------------
def probe_workbook(z: zipfile.ZipFile, shown: str) -> WorkbookFacts:
    """Sheet names, extents and first rows from a checked archive; InputError for a sheet over the cap."""
    shared: list[str] | None = None
    sheets = []
    for name, member in sheet_members(z):
        try:
            head = _head(z, member)
        except KeyError:
            raise InputError(f"{shown}: sheet {name!r} is listed but its part {member} is missing; the workbook "
                             "is damaged.") from None
        dim = _dimension(head)
        extent: Extent | None
        known = True
        if dim and dim.group(3) is not None and (dim.group(1), dim.group(2)) != (dim.group(3), dim.group(4)):
            extent = Extent(int(dim.group(2)), column_number(dim.group(1)), int(dim.group(4)),
                            column_number(dim.group(3)))
        else:  # no dimension, or one cell (what writers put for an empty sheet, or whatever the size): measure
            extent, known = sheet_extent(z, member, SCAN_BYTES)
        check_extent(extent, shown, name)
        if shared is None and b't="s"' in head:
            shared = _shared_strings(z)
        sheets.append(SheetFacts(name, member, extent, _first_row(head, shared or []), known))
    return WorkbookFacts(tuple(sheets))


def _head(z: zipfile.ZipFile, member: str) -> bytes:
    with z.open(member) as f:
        return f.read(HEAD_BYTES)


def _dimension(head: bytes) -> re.Match[str] | None:
    """The sheet's declared `<dimension ref="A1:C10">`, as a match of its four parts, from the head of its XML."""
    found: list[str] = []

    def start(name: str, attrs: dict[str, str]) -> bool:
        tag = xmlscan.local(name)
        if tag == "dimension":
            found.append(attrs.get("ref", ""))
        return tag in ("dimension", "sheetData")  # it comes before the cells, or not at all

    xmlscan.scan(head, xmlscan.Handler(start=start), complete=False, deadline=time.monotonic() + xmlscan.PROBE_SECONDS)
    return _REF_RANGE.fullmatch(found[0]) if found and len(found[0]) <= 24 else None


def _shared_strings(z: zipfile.ZipFile) -> list[str]:
    """The first SHARED_BYTES of the shared strings, each string's text (its `<t>` runs joined)."""
    out: list[str] = []
    item: list[str] | None = None  # the texts of the <si> being read
    in_t = False

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal item, in_t
        tag = xmlscan.local(name)
        if tag == "si":
            item = []
        in_t = tag == "t" and item is not None

    def end(name: str) -> None:
        nonlocal item, in_t
        in_t = False
        if xmlscan.local(name) == "si" and item is not None:
            out.append("".join(item))
            item = None

    def text(data: str) -> None:
        if in_t and item is not None:
            item.append(data)

    _scan_member(z, "xl/sharedStrings.xml", xmlscan.Handler(start, end, text), SHARED_BYTES)
    return out


@dataclass
class _Cell:
    kind: str | None
    value: str | None = None   # the <v> text; None when the cell has no <v>
    inline: list[str] = field(default_factory=list)


def _first_row(head: bytes, shared: Sequence[str]) -> tuple[str | None, ...]:
    """The first row with content, each cell its text if it is text, else None, from its first column on."""
    cells: list[str | None] = []
    cell: _Cell | None = None
    where = ""  # "v" or "t" while inside one in a cell
    found: list[tuple[str | None, ...]] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal cell, where
        tag = xmlscan.local(name)
        if tag == "row":
            cells.clear()
        elif tag == "c":
            cell = _Cell(attrs.get("t"))
        elif cell is not None and tag in ("v", "t"):
            where = tag
            if tag == "v":
                cell.value = ""

    def end(name: str) -> bool:
        nonlocal cell, where
        tag = xmlscan.local(name)
        where = ""
        if tag == "c" and cell is not None:
            cells.append(_cell_text(cell, shared))
            cell = None
        elif tag == "row" and any(c != "" for c in cells):
            while cells and cells[0] == "":
                cells.pop(0)
            while cells and cells[-1] == "":
                cells.pop()
            found.append(tuple(cells))
            return True
        return False

    def text(data: str) -> None:
        if cell is not None and where == "v":
            cell.value = (cell.value or "") + data
        elif cell is not None and where == "t":
            cell.inline.append(data)

    xmlscan.scan(head, xmlscan.Handler(start, end, text), complete=False,
                 deadline=time.monotonic() + xmlscan.PROBE_SECONDS)
    return found[0] if found else ()


def _cell_text(cell: _Cell, shared: Sequence[str]) -> str | None:
    """A first-row cell as the summary shows it: its text if it is text, None for another value, "" if empty."""
    if cell.kind == "s" and cell.value is not None and cell.value.strip().isdigit():
        i = int(cell.value)
        return shared[i] if i < len(shared) else "?"
    if cell.kind == "inlineStr":
        return "".join(cell.inline)
    if cell.kind == "str" and cell.value is not None:
        return cell.value
    return None if cell.value is not None else ""


# ---- naming ----------------------------------------------------------------------------------------------
def slug(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


def relations(input_name: str, sheets: Iterable[tuple[str, str]], folder: bool) -> list[str]:
    """The relation name of each (file, sheet), in order: `<input>_<sheet>` or `<input>_<file>_<sheet>`."""
    taken = {input_name.lower()}
    out = []
    for i, (file, sheet) in enumerate(sheets):
        parts = [input_name]
        if folder:
            parts.append(slug(posixpath.splitext(file)[0]) or f"file{i + 1}")
        parts.append(slug(sheet) or f"sheet{i + 1}")
        base = "_".join(parts)
        name, n = base, 1
        while name.lower() in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name.lower())
        out.append(name)
    return out


def header_names(first_row: Sequence[str | None], first_col: int, cols: int) -> list[str] | None:
    """Column names when the first row is a header (every non-empty cell text), else None."""
    cells = list(first_row)[:cols] + [""] * max(0, cols - len(first_row))
    if not cells or any(c is None for c in cells) or not any(cells):
        return None
    seen: dict[str, int] = {}
    names = []
    for i, c in enumerate(cells):
        base = str(c).strip() or column_letters(first_col + i)
        seen[base.lower()] = seen.get(base.lower(), 0) + 1
        names.append(base if seen[base.lower()] == 1 else f"{base}_{seen[base.lower()]}")
    return names


def plan_entries(input_name: str, workbooks: Sequence[tuple[str, WorkbookFacts]], folder: bool) -> list[dict[str, Any]]:
    """One JSON-able entry per sheet: relation, file, sheet, rows, columns, header (None: no header row)."""
    pairs = [(file, s) for file, facts in workbooks for s in facts.sheets]
    names = relations(input_name, [(file, s.name) for file, s in pairs], folder)
    out = []
    for name, (file, s) in zip(names, pairs, strict=True):
        e = s.extent
        header = header_names(s.first_row, e.first_col, e.cols) if e is not None else None
        rows = None if not s.known else 0 if e is None else e.rows - (1 if header is not None and e.rows > 1 else 0)
        if header is not None and e is not None and e.rows == 1:
            header = None  # one text row is data, not a header
        out.append({"relation": name, "file": file, "sheet": s.name, "rows": rows,
                    "columns": None if not s.known else 0 if e is None else e.cols, "header": header})
    return out


def describe_entries(entries: Sequence[Mapping[str, Any]], input_name: str, folder: bool, shown: int = 20) -> str:
    """The summary's lines for the sheets' relations (at most `shown` of them)."""
    lines = [f"sql() relations: {input_name} (one row per sheet: relation, file, sheet, rows, columns, header), "
             f"and one per sheet:"]
    for e in entries[:shown]:
        if e["rows"] is None:
            shape = "size known when read"
        else:
            shape = f"{plural(e['rows'], 'row')} x {plural(e['columns'], 'column')}"
        header = e["header"]
        cols = (": " + ", ".join(header[:HEADER_SHOWN]) + (", ..." if len(header) > HEADER_SHOWN else "")) if header else ""
        where = f"{e['file']} " if folder else ""
        lines.append(f"    {e['relation']}: {where}sheet {e['sheet']!r}, {shape}{cols}")
    if len(entries) > shown:
        lines.append(f"    ... {len(entries) - shown:,} more (SELECT * FROM {input_name} lists them)")
    return "\n".join(lines)


def catalogue(entries: Sequence[Mapping[str, Any]]) -> Any:
    """The input's own relation: one row per sheet (relation, file, sheet, rows, columns, header)."""
    import pyarrow as pa

    return pa.table({
        "relation": pa.array([e["relation"] for e in entries], pa.string()),
        "file": pa.array([e["file"] for e in entries], pa.string()),
        "sheet": pa.array([e["sheet"] for e in entries], pa.string()),
        "rows": pa.array([e["rows"] for e in entries], pa.int64()),
        "columns": pa.array([e["columns"] for e in entries], pa.int64()),
        "header": pa.array([list(e["header"]) if e["header"] else None for e in entries], pa.list_(pa.string())),
    })


# ---- the sandbox: a sheet as rows, then as Arrow ----------------------------------------------------------
def read_rows(path: str, shown: str, sheet: str, workbook: Any = None) -> tuple[list[list[Any]], Extent | None]:
    """The sheet's used rectangle as rows of Python values ("" for an empty cell), after the extent check."""
    with zipfile.ZipFile(path) as z:
        members = dict(sheet_members(z))
        if sheet not in members:
            raise InputError(f"{shown} has no sheet {sheet!r}; its sheets: {', '.join(members) or 'none'}.")
        extent, _ = sheet_extent(z, members[sheet])
    check_extent(extent, shown, sheet)
    if workbook is None:
        import python_calamine

        workbook = python_calamine.CalamineWorkbook.from_path(path)
    try:
        rows = workbook.get_sheet_by_name(sheet).to_python()
    except Exception as e:  # calamine's own errors for a damaged sheet
        raise InputError(f"{shown}: sheet {sheet!r} cannot be read ({e}).") from None
    return rows, extent


def to_arrow(rows: Sequence[Sequence[Any]], first_col: int = 1) -> Any:
    """A pyarrow Table of the sheet's rows (see the module docstring for the header and the types)."""
    import pyarrow as pa

    width = max((len(r) for r in rows), default=0)
    first = [c if isinstance(c, str) else None for c in rows[0]] if rows else []
    names = header_names(first, first_col, width) if len(rows) > 1 else None
    body = rows[1:] if names is not None else rows
    if names is None:
        names = [column_letters(first_col + i) for i in range(width)]
    columns = [_column([r[i] if i < len(r) else "" for r in body]) for i in range(width)]
    return pa.table(dict(zip(names, columns, strict=True))) if width else pa.table({})


def _column(values: list[Any]) -> Any:
    import pyarrow as pa

    vals = [None if isinstance(v, str) and v == "" else v for v in values]
    kinds = {type(v) for v in vals if v is not None}
    if kinds <= {str}:
        return pa.array(vals, pa.string())
    if kinds <= {int, float}:
        if all(v is None or (float(v).is_integer() and abs(v) < 2**53) for v in vals):
            return pa.array([None if v is None else int(v) for v in vals], pa.int64())
        return pa.array(vals, pa.float64())
    if kinds == {bool}:
        return pa.array(vals, pa.bool_())
    if kinds == {datetime.date}:
        return pa.array(vals, pa.date32())
    if kinds <= {datetime.date, datetime.datetime}:
        return pa.array([datetime.datetime(v.year, v.month, v.day) if type(v) is datetime.date else v
                         for v in vals], pa.timestamp("us"))
    if kinds == {datetime.time}:
        return pa.array(vals, pa.time64("us"))
    if kinds == {datetime.timedelta}:
        return pa.array(vals, pa.duration("us"))
    return pa.array([None if v is None else _as_text(v) for v in vals], pa.string())


def _as_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


__all__ = ["HEADER_SHOWN", "MAX_PROBED_WORKBOOKS", "MAX_SHEET_CELLS", "Extent", "SheetFacts", "WorkbookFacts",
           "catalogue", "check_extent", "column_letters", "column_number", "describe_entries", "header_names", "plan_entries",
           "probe_workbook", "read_rows", "relations", "sheet_extent", "sheet_members", "slug", "to_arrow"]
