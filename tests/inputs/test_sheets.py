"""XLSX workbooks as tables: one sql() relation per sheet, named in the summary, in both sandboxes.

Every workbook is made by the test with openpyxl (some then rewritten to carry a lying or no dimension).
"""

from __future__ import annotations

import datetime
import re
import zipfile
from pathlib import Path

import pytest

from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb._sandbox.local import LazyInputs
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._families import docread, sheets
from rlmnb.inputs._tables.duck import SQLEngine
from rlmnb.testing import documents as make

pytestmark = pytest.mark.usefixtures("stop_the_spare")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMNB_DOCUMENT_CACHE", str(tmp_path / "cache"))


SALES = [["Region", "Units", "Price", "Day", "Paid"],
         ["north", 3, 2.5, datetime.date(2024, 1, 2), True],
         ["south", 5, 4.0, datetime.date(2024, 1, 3), False],
         ["north", 7, 1.25, datetime.date(2024, 2, 1), True]]


def _bind(**inputs: object) -> tuple[dict[str, object], str]:
    fields, summary = bind_inputs(inputs, RLMConfig())
    return {f.name: f for f in fields}, summary.text


def _sql(fields: dict[str, object]) -> SQLEngine:
    return SQLEngine({"inputs": LazyInputs(list(fields.values()))})  # type: ignore[arg-type]


def _rewrite(path: Path, member: str, change: object) -> Path:
    """The workbook with one member's XML passed through `change` (a function of bytes)."""
    with zipfile.ZipFile(path) as z:
        parts = {i.filename: z.read(i) for i in z.infolist()}
    parts[member] = change(parts[member])  # type: ignore[operator]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return path


def test_the_summary_names_each_sheet_relation_with_its_shape_and_header(tmp_path: Path) -> None:
    book = make.xlsx(tmp_path / "book.xlsx", {"Sales 2024": SALES, "Notes": [["free text only"]], "Empty": []})
    _, text = _bind(book=book)
    assert 'inputs["book"]: workbook (Document: .pages (one per sheet), .table(sheet), .sheets; read from book.xlsx)' in text
    assert "sql() relations: book (one row per sheet: relation, file, sheet, rows, columns, header)" in text
    assert "    book_sales_2024: sheet 'Sales 2024', 3 rows x 5 columns: Region, Units, Price, Day, Paid" in text
    assert "    book_notes: sheet 'Notes', 1 row x 1 column\n" in text  # one text row is data, not a header
    assert "    book_empty: sheet 'Empty', 0 rows x 0 columns" in text
    assert "over the table `book` (by input name)" in text and "each sheet is a relation of its own" in text


def test_sql_reads_each_sheet_with_its_header_and_types_only_when_named(tmp_path: Path) -> None:
    book = make.xlsx(tmp_path / "book.xlsx", {"Sales 2024": SALES, "Plain": [[1, "x"], [2, "y"]],
                                              "Mixed": [["code"], [7], ["A7"], [None], [datetime.date(2024, 5, 6)]]})
    fields, _ = _bind(book=book)
    sql = _sql(fields)
    catalogue = sql("SELECT relation, sheet, rows, columns FROM book ORDER BY relation")
    assert catalogue.values.tolist() == [["book_mixed", "Mixed", 4, 1], ["book_plain", "Plain", 2, 2],
                                         ["book_sales_2024", "Sales 2024", 3, 5]]
    doc = fields["book"].load()  # type: ignore[attr-defined]
    assert doc._tables == {}  # nothing read for the catalogue
    totals = sql("SELECT Region, sum(Units) AS units, sum(Price) AS price FROM BOOK_SALES_2024 "
                 "WHERE Paid GROUP BY Region")
    assert totals.values.tolist() == [["north", 10, 3.75]]
    assert list(doc._tables) == ["Sales 2024"]  # only the sheet the query named
    types = sql("SELECT column_name, column_type FROM (DESCRIBE book_sales_2024)").values.tolist()
    assert types == [["Region", "VARCHAR"], ["Units", "BIGINT"], ["Price", "DOUBLE"], ["Day", "DATE"],
                     ["Paid", "BOOLEAN"]]
    assert sql('SELECT * FROM "book_plain"').values.tolist() == [[1, "x"], [2, "y"]]  # no header: A, B
    assert list(sql("SELECT * FROM book_plain").columns) == ["A", "B"]
    assert sql("SELECT coalesce(code, '-') FROM book_mixed").values.tolist() == [["7"], ["A7"], ["-"], ["2024-05-06"]]
    assert doc.table("Plain").shape == (2, 2) and doc.table(0)["Units"].tolist() == [3, 5, 7]
    assert "book_mixed" in sql.tables()
    clash = {**fields, "book_plain": _bind(book_plain=make.xlsx(tmp_path / "other.xlsx"))[0]["book_plain"]}
    got = _sql(clash)("SELECT relation, file FROM book_plain")  # the input of that name, not book's sheet
    assert got.values.tolist() == [["book_plain_totals", "other.xlsx"], ["book_plain_items", "other.xlsx"]]
    with pytest.raises(InputError, match=r"^book.xlsx has no sheet 'Nope'; its sheets: Sales 2024, Plain, Mixed\.$"):
        doc.table("Nope")


def test_a_folder_and_a_glob_of_workbooks_name_relations_by_file_and_sheet(tmp_path: Path) -> None:
    folder = tmp_path / "books"
    (folder / "2024").mkdir(parents=True)
    make.xlsx(folder / "Q1 report.xlsx", {"Totals": [["region", "total"], ["north", 120], ["south", 80]]})
    make.xlsx(folder / "2024" / "q2.xlsx", {"Totals": [["region", "total"], ["north", 30]],
                                          "totals!": [["x"], [1], [2]]})
    fields, text = _bind(books=folder, picked=Path(str(folder / "*.xlsx")))
    assert 'inputs["books"]: workbooks (read-only mapping of relative path -> Document; from books)' in text
    assert "    books_2024_q2_totals: 2024/q2.xlsx sheet 'Totals', 1 row x 2 columns: region, total" in text
    assert "    books_2024_q2_totals_2: 2024/q2.xlsx sheet 'totals!', 2 rows x 1 column: x" in text  # a clash
    assert "    books_q1_report_totals: Q1 report.xlsx sheet 'Totals', 2 rows x 2 columns: region, total" in text
    assert "    picked_q1_report_totals: Q1 report.xlsx sheet 'Totals'" in text
    sql = _sql(fields)
    joined = sql("SELECT a.region, a.total + b.total AS both FROM books_q1_report_totals a "
                 "JOIN books_2024_q2_totals b USING (region)")
    assert joined.values.tolist() == [["north", 150]]
    assert sql("SELECT count(*) FROM picked").values.tolist() == [[1]]
    assert sql("SELECT sum(x) FROM books_2024_q2_totals_2").values.tolist() == [[3]]


def test_a_mixed_folder_says_how_to_query_its_workbooks(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    make.xlsx(folder / "book.xlsx")
    make.markdown(folder / "notes.md")
    fields, text = _bind(mixed=folder)
    assert 'inputs["mixed"]: documents' in text
    assert "its workbooks are documents here (sheets as pages, or .table(sheet)); bind them alone" in text
    assert fields["mixed"].load()["book.xlsx"].table("Totals")["total"].tolist() == [120, 80]  # type: ignore[attr-defined]


def test_a_sheet_bomb_is_one_sentence_at_bind_or_when_read(tmp_path: Path) -> None:
    def far(path: Path) -> Path:
        from openpyxl import Workbook

        wb = Workbook()
        ws = wb.active
        assert ws is not None
        ws.title = "Big"
        ws["A1"], ws["XFD1048576"] = 1, 2  # two cells: 17 billion in calamine's rectangle
        wb.save(str(path))
        return path

    declared = far(tmp_path / "declared.xlsx")
    with pytest.raises(InputError, match=r"^declared.xlsx: sheet 'Big' spans A1:XFD1048576 \(1,048,576 rows x "
                                         r"16,384 columns\), over the 10,000,000-cell limit for one sheet; "
                                         r"export the part you need as CSV\.$"):
        _bind(x=declared)
    member = "xl/worksheets/sheet1.xml"
    silent = _rewrite(far(tmp_path / "silent.xlsx"), member, lambda xml: re.sub(rb"<dimension [^>]*/>", b"", xml))
    with pytest.raises(InputError, match=r"^silent.xlsx: sheet 'Big' spans A1:XFD1048576"):
        _bind(x=silent)  # no dimension: measured at bind
    lying = _rewrite(far(tmp_path / "lying.xlsx"), member,
                     lambda xml: re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:B2"', xml))
    fields, text = _bind(x=lying)
    assert "x_big: sheet 'Big', 2 rows x 2 columns" in text  # what the file claims
    with pytest.raises(InputError, match=r"^lying.xlsx: sheet 'Big' spans A1:XFD1048576"):
        _sql(fields)("SELECT * FROM x_big")  # measured before calamine reads it
    with pytest.raises(InputError, match=r"^lying.xlsx: sheet 'Big' spans A1:XFD1048576"):
        _ = docread.Document(str(lying)).pages
    no_refs = _rewrite(make.xlsx(tmp_path / "norefs.xlsx", {"S": [["a", "b"], [1, 2]]}), member,
                       lambda xml: re.sub(rb' r="[A-Z]+\d+"', b"", xml))
    with zipfile.ZipFile(no_refs) as z:
        assert sheets.sheet_extent(z, member) == (sheets.Extent(1, 1, 2, 2), True)  # walked cell by cell


def test_a_binary_workbook_is_refused_in_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "book.xlsb").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(InputError, match=r"^book.xlsb is an Excel binary workbook \(.xlsb\) whose sheets cannot be "
                                         r"bounded before they are read; save it as .xlsx \(File > Save As\) and "
                                         r"bind that\.$"):
        _bind(x=tmp_path / "book.xlsb")


def test_styled_empty_cells_far_away_do_not_count_as_a_bomb(tmp_path: Path) -> None:
    member = "xl/worksheets/sheet1.xml"
    book = _rewrite(make.xlsx(tmp_path / "styled.xlsx", {"S": [["a"], [1]]}), member,
                    lambda xml: xml.replace(b"</sheetData>", b'<row r="1048576"><c r="XFD1048576" s="0"/></row>'
                                                            b"</sheetData>"))
    with zipfile.ZipFile(book) as z:
        assert sheets.sheet_extent(z, member) == (sheets.Extent(1, 1, 2, 1), True)


def test_relation_names_are_predictable() -> None:
    assert sheets.relations("book", [("b.xlsx", "Sales 2024"), ("b.xlsx", "sales-2024"), ("b.xlsx", "Ü")],
                            folder=False) == ["book_sales_2024", "book_sales_2024_2", "book_sheet3"]
    assert sheets.relations("Book", [("a/B c.xlsx", "S")], folder=True) == ["Book_a_b_c_s"]
    assert sheets.relations("x", [("f.xlsx", "X")], folder=False) == ["x_x"]


# both sandboxes, the confined kernel included, query XLSX and XLS workbooks alike: tests/inputs/test_xls.py
