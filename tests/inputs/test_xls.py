""".xls workbooks (BIFF8) as tables: one sql() relation per sheet, bounded record by record; and workbooks
of both formats queried in both sandboxes.

Every workbook is made by the test with xlwt; damaged, encrypted and lying ones are real files with bytes changed.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb._sandbox.local import LazyInputs
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._families import biff, docread, sheets
from rlmnb.inputs._tables.duck import SQLEngine
from rlmnb.testing import ScriptedLM
from rlmnb.testing import documents as make

pytestmark = pytest.mark.usefixtures("stop_the_spare")

SALES: list[list[object]] = [["Region", "Units", "Price", "Day", "Paid"],
         ["north", 3, 2.5, datetime.date(2024, 1, 2), True],
         ["south", 5, 4.0, datetime.date(2024, 1, 3), False],
         ["north", 7, 1.25, datetime.date(2024, 2, 1), True]]
BOF = b"\x09\x08\x10\x00\x00\x06"      # a BIFF8 BOF record's head: type 0x0809, 16 bytes, version 0x0600
DIMENSIONS = b"\x00\x02\x0e\x00"       # a BIFF8 DIMENSIONS record's head: type 0x0200, 14 bytes


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMNB_DOCUMENT_CACHE", str(tmp_path / "cache"))


def xls(path: Path, book: Mapping[str, Sequence[Sequence[object]]] | None = None, at: tuple[int, int] = (0, 0)) -> Path:
    """An Excel 97-2003 workbook written by xlwt, each sheet's rows from cell `at` (0-based row, column)."""
    import xlwt

    book = book if book is not None else {"Totals": [["region", "total"], ["north", 120], ["south", 80]],
                                          "Items": [["item", "price"], ["pen", 2.5], ["book", 12]]}
    day = xlwt.easyxf(num_format_str="YYYY-MM-DD")
    wb = xlwt.Workbook()
    for name, rows in book.items():
        ws = wb.add_sheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if value is not None:
                    style = day if isinstance(value, datetime.date) else xlwt.Style.default_style
                    ws.write(at[0] + r, at[1] + c, value, style)
    wb.save(str(path))
    return path


def _patch(path: Path, find: bytes, nth: int, change: bytes, after: int = 0) -> Path:
    """The file with the bytes after the `nth` occurrence of `find` (+ `after`) replaced by `change`."""
    data = bytearray(path.read_bytes())
    at = -1
    for _ in range(nth + 1):
        at = data.index(find, at + 1)
    start = at + len(find) + after
    data[start:start + len(change)] = change
    path.write_bytes(bytes(data))
    return path


def _bind(**inputs: object) -> tuple[dict[str, object], str]:
    fields, summary = bind_inputs(inputs, RLMConfig())
    return {f.name: f for f in fields}, summary.text


def _sql(fields: dict[str, object]) -> SQLEngine:
    return SQLEngine({"inputs": LazyInputs(list(fields.values()))})  # type: ignore[arg-type]


def test_the_summary_names_each_sheet_of_an_xls_with_its_shape_and_header(tmp_path: Path) -> None:
    book = xls(tmp_path / "book.xls", {"Sales 2024": SALES, "Notes": [["free text only"]], "Empty": []})
    _, text = _bind(book=book)
    assert 'inputs["book"]: workbook (Document: .pages (one per sheet), .table(sheet), .sheets; read from book.xls)' in text
    assert "XLS, 3 sheets" in text
    assert "sql() relations: book (one row per sheet: relation, file, sheet, rows, columns, header)" in text
    assert "    book_sales_2024: sheet 'Sales 2024', 3 rows x 5 columns: Region, Units, Price, Day, Paid" in text
    assert "    book_notes: sheet 'Notes', 1 row x 1 column\n" in text
    assert "    book_empty: sheet 'Empty', 0 rows x 0 columns" in text
    offset = xls(tmp_path / "offset.xls", {"S": [["a", None, "c"], [1, 2, 3]]}, at=(4, 2))
    _, text = _bind(o=offset)
    assert "    o_s: sheet 'S', 1 row x 3 columns: a, D, c" in text  # an empty header cell takes its letter


def test_sql_reads_an_xls_sheet_with_its_header_and_types_only_when_named(tmp_path: Path) -> None:
    fields, _ = _bind(book=xls(tmp_path / "book.xls", {"Sales 2024": SALES, "Plain": [[1, "x"], [2, "y"]]}))
    sql = _sql(fields)
    assert sql("SELECT relation, sheet, rows, columns FROM book ORDER BY relation").values.tolist() == [
        ["book_plain", "Plain", 2, 2], ["book_sales_2024", "Sales 2024", 3, 5]]
    doc = fields["book"].load()  # type: ignore[attr-defined]
    assert doc._tables == {}
    totals = sql("SELECT Region, sum(Units) AS units, sum(Price) AS price FROM book_sales_2024 "
                 "WHERE Paid GROUP BY Region")
    assert totals.values.tolist() == [["north", 10, 3.75]]
    assert list(doc._tables) == ["Sales 2024"]
    types = sql("SELECT column_name, column_type FROM (DESCRIBE book_sales_2024)").values.tolist()
    assert types == [["Region", "VARCHAR"], ["Units", "BIGINT"], ["Price", "DOUBLE"], ["Day", "DATE"],
                     ["Paid", "BOOLEAN"]]
    assert sql("SELECT max(Day) FROM book_sales_2024").values.tolist() == [[datetime.date(2024, 2, 1)]]
    assert sql("SELECT * FROM book_plain").values.tolist() == [[1, "x"], [2, "y"]]
    assert doc.table(1).shape == (2, 2) and doc.table("Sales 2024")["Units"].tolist() == [3, 5, 7]
    assert [p.label for p in doc.pages] == ["Sales 2024", "Plain"] and "north\t3\t2.5" in doc.pages[0]
    with pytest.raises(InputError, match=r"^book.xls has no sheet 'Nope'; its sheets: Sales 2024, Plain\.$"):
        doc.table("Nope")


def test_a_folder_of_xls_and_xlsx_workbooks_names_relations_by_file_and_sheet(tmp_path: Path) -> None:
    folder = tmp_path / "books"
    folder.mkdir()
    xls(folder / "Q1 report.xls", {"Totals": [["region", "total"], ["north", 120], ["south", 80]]})
    make.xlsx(folder / "q2.xlsx", {"Totals": [["region", "total"], ["north", 30]]})
    fields, text = _bind(books=folder, picked=Path(str(folder / "*.xls")))
    assert 'inputs["books"]: workbooks (read-only mapping of relative path -> Document; from books)' in text
    assert "    books_q1_report_totals: Q1 report.xls sheet 'Totals', 2 rows x 2 columns: region, total" in text
    assert "    books_q2_totals: q2.xlsx sheet 'Totals', 1 row x 2 columns: region, total" in text
    assert "    picked_q1_report_totals: Q1 report.xls sheet 'Totals'" in text
    sql = _sql(fields)
    joined = sql("SELECT a.region, a.total + b.total AS both FROM books_q1_report_totals a "
                 "JOIN books_q2_totals b USING (region)")
    assert joined.values.tolist() == [["north", 150]]
    assert sql("SELECT sum(total) FROM picked_q1_report_totals").values.tolist() == [[200]]
    make.markdown(folder / "notes.md")
    _, text = _bind(mixed=folder)
    assert "its workbooks are documents here (sheets as pages, or .table(sheet))" in text


def test_a_damaged_encrypted_or_old_xls_is_one_sentence_naming_it_at_bind(tmp_path: Path) -> None:
    (tmp_path / "zeros.xls").write_bytes(biff.MAGIC + b"\0" * 100)
    with pytest.raises(InputError, match=r"^zeros.xls is not a readable .xls workbook \(.+\)\.$"):
        _bind(x=tmp_path / "zeros.xls")
    whole = xls(tmp_path / "whole.xls").read_bytes()
    (tmp_path / "cut.xls").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match=r"^cut.xls is not a readable .xls workbook \(.+\)\.$"):
        _bind(x=tmp_path / "cut.xls")
    (tmp_path / "text.xls").write_text("region,total\nnorth,1\n")
    with pytest.raises(InputError, match=r"^text.xls is not a readable .xls workbook \(it is not an OLE2 "
                                         r"compound file\)\.$"):
        _bind(x=tmp_path / "text.xls")
    locked = _patch(xls(tmp_path / "locked.xls"), BOF, 0, struct.pack("<H", 0x002F), after=14)  # a FILEPASS
    with pytest.raises(InputError, match=r"^locked.xls is encrypted; save an unencrypted copy \(File > Info > "
                                         r"Protect Workbook\) and bind that\.$"):
        _bind(x=locked)
    old = _patch(xls(tmp_path / "old.xls"), BOF[:4], 0, b"\x00\x05")  # BIFF5: Excel 5.0/95
    with pytest.raises(InputError, match=r"^old.xls is an Excel 5.0/95 workbook; save it as .xlsx"):
        _bind(x=old)


def test_an_xls_bomb_is_one_sentence_at_bind_or_before_calamine_reads_it(tmp_path: Path) -> None:
    far = {"Big": [[1]] + [[]] * 65534 + [[None] * 255 + [2]]}  # A1 and IV65536: 16.7 million cells
    with pytest.raises(InputError, match=r"^far.xls: sheet 'Big' spans A1:IV65536 \(65,536 rows x 256 columns\), "
                                         r"over the 10,000,000-cell limit for one sheet; export the part you need "
                                         r"as CSV\.$"):
        _bind(x=xls(tmp_path / "far.xls", far))
    lying = _patch(xls(tmp_path / "lying.xls", far), DIMENSIONS, 0, struct.pack("<IIHH", 0, 2, 0, 2))
    fields, text = _bind(x=lying)
    assert "x_big: sheet 'Big', 2 rows x 2 columns" in text  # what the file claims
    with pytest.raises(InputError, match=r"^lying.xls: sheet 'Big' spans A1:IV65536"):
        _sql(fields)("SELECT * FROM x_big")  # measured before calamine opens the file
    with pytest.raises(InputError, match=r"^lying.xls: sheet 'Big' spans A1:IV65536"):
        _ = docread.Document(str(lying)).pages
    reserving = _patch(xls(tmp_path / "reserving.xls", {"S": [[1]]}), DIMENSIONS, 0,
                       struct.pack("<IIHH", 7, 3, 0, 1))  # rows 8 to 2: calamine would reserve 2**32 - 4 rows
    for whole in (False, True):
        with pytest.raises(InputError, match=r"^reserving.xls: sheet 'S' declares 4,294,967,292 cells, over the "
                                             r"10,000,000-cell limit for one sheet; export the part you need as CSV\.$"):
            biff.scan_workbook(str(reserving), "reserving.xls", whole=whole)
    half = [[1]] + [[]] * 29_998 + [[None] * 199 + [2]]  # 30,000 x 200: 6 million cells each, 12 together
    two = xls(tmp_path / "two.xls", {"A": half, "B": half})
    fields, text = _bind(x=two)
    assert "x_a: sheet 'A', 30,000 rows x 200 columns" in text  # each under the cap alone
    with pytest.raises(InputError, match=r"^two.xls: its sheets up to 'B' would take over 10,000,000 cells once "
                                         r"read \(an .xls workbook is read whole\); export the part you need as "
                                         r"CSV\.$"):
        _sql(fields)("SELECT count(*) FROM x_a")


def test_the_record_walk_measures_what_calamine_reads(tmp_path: Path) -> None:
    book = xls(tmp_path / "m.xls", {"S": [["h1", "h2"], [1, None], [None, 3]], "E": []}, at=(2, 1))
    measured = biff.scan_workbook(str(book), "m.xls", whole=True)
    assert [(s.facts.name, s.facts.extent, s.facts.first_row) for s in measured] == [
        ("S", sheets.Extent(3, 2, 5, 3), ("h1", "h2")), ("E", None, ())]
    import python_calamine

    rows = python_calamine.CalamineWorkbook.from_path(str(book)).get_sheet_by_name("S").to_python()
    assert len(rows) == 3 and len(rows[0]) == 2


@pytest.mark.parametrize("suffix", [".xlsx", ".xls"])
def test_workbooks_in_both_sandboxes_and_the_confined_kernel_queries_them(kind: str, suffix: str,
                                                                          tmp_path: Path) -> None:
    write = make.xlsx if suffix == ".xlsx" else xls
    write(tmp_path / f"book{suffix}", {"Sales 2024": SALES})
    (tmp_path / "books").mkdir()
    write(tmp_path / "books" / f"q1{suffix}", None)
    root = ScriptedLM([code("print(sql('SELECT Region, sum(Units) AS u FROM book_sales_2024 GROUP BY Region "
                            "ORDER BY Region').to_string(index=False))\n"
                            "print(sql('SELECT relation FROM books').relation.tolist(), "
                            f"inputs['books']['q1{suffix}'].table('Items').price.sum())"),
                       code("submit(int(sql('SELECT sum(total) AS t FROM books_q1_totals').t[0]))")])
    confinement = "required" if kind == "kernel" else "auto"
    result = RLM(root, sandbox=kind, confinement=confinement).run("How much?", book=tmp_path / f"book{suffix}",
                                                                  books=tmp_path / "books")
    assert result.answer == 200, result.reason
    seen = observations(root)[0]
    assert "Region  u\n north 10\n south  5" in seen
    assert "['books_q1_totals', 'books_q1_items'] 14.5" in seen


def _record(kind: int, data: bytes = b"") -> bytes:
    return struct.pack("<HH", kind, len(data)) + data


def _tiny_workbook(names: Sequence[str] = ("S",)) -> bytes:
    """A BIFF8 Workbook stream holding 42 in B3 of one sheet, listed under each of `names` (one name: a
    well-formed workbook; more: sheets that overlap), far under the 4,096 bytes of a mini stream."""
    bof = struct.pack("<HHHH", 0x0600, 0x0005, 0, 0) + b"\0" * 8
    listing = len(_record(0x0809, bof)) + sum(len(_record(0x0085, b"\0" * 9)) for _ in names) + len(_record(0x000A))
    globals_ = (_record(0x0809, bof)
                + b"".join(_record(0x0085, struct.pack("<IBBBB", listing, 0, 0, 1, 0) + n.encode()) for n in names)
                + _record(0x000A))
    sheet = (_record(0x0809, struct.pack("<HHHH", 0x0600, 0x0010, 0, 0) + b"\0" * 8)
             + _record(0x0200, struct.pack("<IIHHH", 2, 3, 1, 2, 0))
             + _record(0x0203, struct.pack("<HHHd", 2, 1, 0, 42.0)) + _record(0x000A))
    return globals_ + sheet


def _compound(stream: bytes, *, loop: bool = False, difat_loop: bool = False) -> bytes:
    """An OLE2 compound file (512-byte sectors) whose Workbook `stream` lives in the root's mini stream.

    Sectors: 0 the FAT, 1 the directory, 2 the mini FAT, then the mini stream (and a looping DIFAT sector).
    `loop` makes the mini stream's chain point back at itself.
    """
    end, free = 0xFFFFFFFE, 0xFFFFFFFF
    minis = -(-len(stream) // 64)
    container = stream.ljust(minis * 64, b"\0")
    blocks = -(-len(container) // 512)
    fat = [0xFFFFFFFD, end, end] + [3 + i + 1 for i in range(blocks - 1)] + [end]
    if loop:
        fat[3 + blocks - 1] = 3
    difat_at = 3 + blocks
    fat += [0xFFFFFFFC] if difat_loop else []
    header = bytearray(512)
    struct.pack_into("<8s16sHHHHH6sIIIIIIIIII", header, 0, biff.MAGIC, b"", 0x3E, 3, 0xFFFE, 9, 6, b"", 0, 1, 1, 0,
                     4096, 2, 1, difat_at if difat_loop else end, 1 if difat_loop else 0, 0)
    struct.pack_into("<108I", header, 0x50, *[free] * 108)

    def entry(name: str, kind: int, start: int, size: int, child: int = free) -> bytes:
        e = bytearray(128)
        encoded = (name + "\0").encode("utf-16-le")
        e[:len(encoded)] = encoded
        struct.pack_into("<HBBIII", e, 0x40, len(encoded), kind, 1, free, free, child)
        struct.pack_into("<IQ", e, 0x74, start, size)
        return bytes(e)

    directory = (entry("Root Entry", 5, 3, len(container), child=1) + entry("Workbook", 2, 0, len(stream))
                 + bytes(256))
    minifat = struct.pack(f"<{minis}I", *[i + 1 for i in range(minis - 1)], end).ljust(512, b"\xff")
    out = bytes(header) + struct.pack(f"<{len(fat)}I", *fat).ljust(512, b"\xff") + directory + minifat
    out += container.ljust(blocks * 512, b"\0")
    if difat_loop:
        out += struct.pack("<127II", *[free] * 127, difat_at)
    return out


def test_a_small_workbook_stream_is_read_from_the_mini_stream_like_calamine_reads_it(tmp_path: Path) -> None:
    small = tmp_path / "small.xls"
    small.write_bytes(_compound(_tiny_workbook()))
    fields, text = _bind(s=small)
    assert "    s_s: sheet 'S', 1 row x 1 column" in text
    assert _sql(fields)("SELECT * FROM s_s").values.tolist() == [[42]]
    assert list(_sql(fields)("SELECT * FROM s_s").columns) == ["B"]


@pytest.mark.parametrize("damage", ["loop", "difat_loop"])
def test_a_looping_sector_chain_is_one_sentence(damage: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.xls"
    bad.write_bytes(_compound(_tiny_workbook(), **{damage: True}))
    with pytest.raises(InputError, match=r"^bad.xls is not a readable .xls workbook \(.*(chain is broken|"
                                         r"sector table loops)\)\.$"):
        _bind(x=bad)


def test_sheets_sharing_records_are_one_sentence_before_calamine_reads_them(tmp_path: Path) -> None:
    twice = tmp_path / "twice.xls"
    twice.write_bytes(_compound(_tiny_workbook(("S", "T"))))
    fields, text = _bind(x=twice)
    assert "    x_t: sheet 'T', 1 row x 1 column" in text
    with pytest.raises(InputError, match=r"^twice.xls is not a readable .xls workbook \(sheet 'T' overlaps the "
                                         r"sheet before it\)\.$"):
        _sql(fields)("SELECT * FROM x_s")
