"""The host's bounded PDF reading (pdfscan): objects found through the cross-reference data, the full
scan when that data is broken, bounded chains, and scans found on every page or an even sample.

PDFs are made by the test: reportlab (classic xref tables), pypdf (incremental updates) and a small
writer here for xref streams with object streams, which neither library writes. Where pypdfium2 can
tell (page count, metadata, outline, pages without text), the facts agree with its reading.
"""

from __future__ import annotations

import builtins
import re
import zlib
from pathlib import Path
from typing import Any

import pypdfium2
import pytest

from rlmnb._ground.config import RLMConfig
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._families import pdfscan
from rlmnb.testing import documents as make


def _scan(path: Path) -> pdfscan.PdfFacts:
    return pdfscan.scan_pdf(str(path), path.stat().st_size)


def _decoy(path: Path) -> Path:
    """Appends, after the last %%EOF, a catalog with the root's number and no pages, in no xref section:
    the cross-reference data never reaches it, the full scan (the last definition wins) would."""
    data = path.read_bytes()
    root = int(re.findall(rb"/Root\s+(\d+)\s+0\s+R", data)[-1])
    path.write_bytes(data + b"%d 0 obj\n<< /Type /Catalog /Pages 999999 0 R >>\nendobj\n" % root)
    return path


def _pdfium(path: Path) -> dict[str, Any]:
    """What pypdfium2 reads: page count, title and author, outline (indented as pdfscan), pages without text."""
    doc = pypdfium2.PdfDocument(str(path))
    try:
        meta = doc.get_metadata_dict()
        return {"pages": len(doc), "title": meta.get("Title", ""), "author": meta.get("Author", ""),
                "outline": tuple("  " * b.level + b.get_title() for b in doc.get_toc() if b.level < 2),
                "textless": tuple(i + 1 for i in range(len(doc))
                                  if not doc[i].get_textpage().get_text_bounded().strip())}
    finally:
        doc.close()


def _agrees(facts: pdfscan.PdfFacts, path: Path) -> None:
    them = _pdfium(path)
    assert facts.error == "" and not facts.encrypted
    assert facts.pages == them["pages"]
    assert (facts.meta.get("title", ""), facts.meta.get("author", "")) == (them["title"], them["author"])
    assert facts.outline == them["outline"]
    assert facts.checked == facts.pages and facts.textless == them["textless"]


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the bytes pdfscan reads from files."""
    seen = {"bytes": 0}

    class Counting:
        def __init__(self, f: Any) -> None:
            self._f = f

        def read(self, n: int = -1) -> bytes:
            data: bytes = self._f.read(n)
            seen["bytes"] += len(data)
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

    monkeypatch.setattr(pdfscan, "open", lambda *a, **k: Counting(builtins.open(*a, **k)),  # noqa: SIM115
                        raising=False)
    return seen


# ---- a writer of xref streams and object streams ------------------------------------------------
def _png_up(rows: list[bytes]) -> bytes:
    out, prev = bytearray(), bytes(len(rows[0]))
    for row in rows:
        out += b"\x02" + bytes((a - b) & 255 for a, b in zip(row, prev, strict=True))
        prev = row
    return bytes(out)


def _write(path: Path, objects: dict[int, bytes], *, root: int, info: int | None, packed: set[int],
           xref: str = "stream") -> Path:
    """A PDF of `objects` (number -> body between `obj` and `endobj`); those in `packed` go in one object
    stream (only with an xref stream: a classic table cannot point into one); the cross-reference data is
    an xref stream (PNG Up predictor) or a classic table."""
    packed = packed if xref == "stream" else set()
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    where: dict[int, tuple[int, int, int]] = {}
    stm = max(objects) + 1
    for num, body in objects.items():
        if num not in packed:
            where[num] = (1, len(out), 0)
            out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
    if packed:
        members = sorted(packed)
        parts, header = [], []
        for num in members:
            header.append(b"%d %d" % (num, sum(len(p) for p in parts)))
            parts.append(objects[num] + b"\n")
        head = b" ".join(header) + b"\n"
        data = zlib.compress(head + b"".join(parts))
        where[stm] = (1, len(out), 0)
        out += (b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n"
                % (stm, len(members), len(head), len(data)) + data + b"\nendstream\nendobj\n")
        for k, num in enumerate(members):
            where[num] = (2, stm, k)
    trailer = b"/Root %d 0 R" % root + (b" /Info %d 0 R" % info if info else b"")
    at = len(out)
    if xref == "table":
        size = max(where) + 1
        out += b"xref\n0 %d\n0000000000 65535 f \n" % size
        for num in range(1, size):
            kind, off, _ = where.get(num, (0, 0, 0))
            out += b"%010d 00000 n \n" % off if kind == 1 else b"0000000000 65535 f \n"
        out += b"trailer\n<< /Size %d %s >>\n" % (size, trailer)
    else:
        xnum = max(where) + 1
        where[xnum] = (1, at, 0)
        rows = [bytes([0, 0, 0, 0, 0, 255, 255])] + [
            bytes([where[n][0]]) + where[n][1].to_bytes(4, "big") + where[n][2].to_bytes(2, "big")
            if n in where else bytes(7) for n in range(1, xnum + 1)]
        data = zlib.compress(_png_up(rows))
        out += (b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Index [0 %d] %s /Filter /FlateDecode "
                b"/DecodeParms << /Predictor 12 /Columns 7 >> /Length %d >>\nstream\n"
                % (xnum, xnum + 1, xnum + 1, trailer, len(data)) + data + b"\nendstream\nendobj\n")
    out += b"startxref\n%d\n%%%%EOF\n" % at
    path.write_bytes(bytes(out))
    return path


def _content(text: str | None) -> bytes:
    ops = (b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode()) if text else b"0 0 m 200 200 l S\n" * 2000
    data = zlib.compress(ops)
    return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"


# a scanned page's drawing inflates to 36 KB: past the first inflate steps, then zlib's end with a byte after it
def _document(pages: int, *, scanned: set[int] = frozenset(), kids: list[int] | None = None,  # type: ignore[assignment]
              count: int | None = None) -> tuple[dict[int, bytes], set[int]]:
    """Objects of a document: catalog 1, pages 2, outline 3-5, font 6, info 7, then page and content pairs.
    `kids`/`count` replace the page tree root's (to make a cycle). The second value: objects to pack."""
    first = 8
    page_nums = [first + 2 * i for i in range(pages)]
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R /Outlines 3 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % n for n in (kids or page_nums)),
                                                       pages if count is None else count),
        3: b"<< /Type /Outlines /First 4 0 R /Last 5 0 R /Count 2 >>",
        4: b"<< /Title (Part One) /Parent 3 0 R /Next 5 0 R /Dest [%d 0 R /Fit] >>" % page_nums[0],
        5: b"<< /Title <FEFF0050006100720074002000540077006F> /Parent 3 0 R /Prev 4 0 R /Dest [%d 0 R /Fit] >>"
           % page_nums[-1],
        6: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        7: b"<< /Title (Packed \\(objects\\)) /Author (h6) >>",
    }
    for i, num in enumerate(page_nums):
        objects[num] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 6 0 R >> >> "
                        b"/Contents %d 0 R >>" % (num + 1))
        objects[num + 1] = _content(None if i in scanned else f"Page {i + 1}")
    return objects, {n for n in objects if not objects[n].rstrip().endswith(b"endstream")}


# ---- tests ------------------------------------------------------------------------------------------
def test_a_classic_xref_pdf_agrees_with_pdfium(tmp_path: Path) -> None:
    pdf = _decoy(make.pdf(tmp_path / "c.pdf", 150, title="Classic", lines=20, scanned=[4, 99]))
    facts = _scan(pdf)
    _agrees(facts, pdf)
    assert facts.textless == (5, 100) and facts.outline[:2] == ("Section 1", "Section 2")


def test_a_long_classic_pdf_is_read_in_small_part(tmp_path: Path, bytes_read: dict[str, int]) -> None:
    pdf = _decoy(make.pdf(tmp_path / "long.pdf", 1000, title="Long", scanned=[0, 502]))
    facts = _scan(pdf)
    assert (facts.pages, facts.checked, facts.textless) == (1000, pdfscan.TEXT_CHECKS, (1, 503))
    assert facts.meta["title"] == "Long" and facts.outline == _pdfium(pdf)["outline"] and len(facts.outline) == 99
    assert bytes_read["bytes"] < pdf.stat().st_size / 2  # seeks to what it needs, no whole-file scan


def test_an_xref_stream_with_object_streams_agrees_with_pdfium(tmp_path: Path) -> None:
    objects, packed = _document(6, scanned={2})
    pdf = _decoy(_write(tmp_path / "s.pdf", objects, root=1, info=7, packed=packed))
    assert b"/ObjStm" in pdf.read_bytes() and b"/Type /Page " not in pdf.read_bytes()  # pages are packed
    facts = _scan(pdf)
    _agrees(facts, pdf)
    assert facts.pages == 6 and facts.textless == (3,) and facts.meta["title"] == "Packed (objects)"
    assert facts.outline == ("Part One", "Part Two")


def test_many_pages_in_object_streams_are_sampled_evenly(tmp_path: Path) -> None:
    objects, packed = _document(1000, scanned={0, 502, 3})
    pdf = _decoy(_write(tmp_path / "many.pdf", objects, root=1, info=7, packed=packed))
    facts = _scan(pdf)
    assert facts.pages == 1000 == len(pypdfium2.PdfDocument(str(pdf)))
    assert facts.checked == pdfscan.TEXT_CHECKS
    assert facts.textless == (1, 503)  # page 4 is not in the sample; the first and last page always are


def test_the_summary_says_when_it_sampled(tmp_path: Path) -> None:
    objects, packed = _document(1000, scanned={0, 502})
    pdf = _write(tmp_path / "many.pdf", objects, root=1, info=7, packed=packed)
    whole = make.pdf(tmp_path / "whole.pdf", 1000, lines=1)
    small = make.pdf(tmp_path / "small.pdf", 12, scanned=[2])
    text = bind_inputs({"many": pdf, "whole": whole, "small": small}, RLMConfig())[1].text
    assert "no text layer on pages 1, 503 (of 200 checked of 1,000) (scanned: send .pages[i].image()" in text
    assert "; a text layer on each of the 200 pages checked of 1,000" in text
    assert "no text layer on page 3 (scanned:" in text  # every page checked: no sample to mention


def test_an_incremental_update_is_read_through_prev(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    base = make.pdf(tmp_path / "base.pdf", 5, title="Draft")
    writer = PdfWriter(str(base), incremental=True)
    writer.add_metadata({"/Title": "Amended"})
    writer.add_blank_page()
    updated = tmp_path / "updated.pdf"
    with open(updated, "wb") as f:
        writer.write(f)
    data = updated.read_bytes()
    assert data.startswith(base.read_bytes()) and b"/Prev" in data[len(base.read_bytes()):]
    facts = _scan(_decoy(updated))
    _agrees(facts, updated)
    assert facts.pages == 6 and facts.meta["title"] == "Amended" and facts.textless == (6,)


@pytest.mark.parametrize("damage", ["startxref", "shifted", "no xref"])
def test_a_broken_xref_falls_back_to_the_full_scan(tmp_path: Path, damage: str) -> None:
    good = make.pdf(tmp_path / "good.pdf", 30, title="Mended", scanned=[7])
    data = good.read_bytes()
    if damage == "startxref":  # points into the middle of an object
        data = re.sub(rb"startxref\s+\d+", b"startxref\n1234", data)
    elif damage == "shifted":  # every offset is 40 bytes off
        data = data.replace(b"\n", b"\n% forty bytes of a comment, inserted here\n", 1)
    else:
        data = data[:data.rindex(b"\nxref")]
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(data)
    facts = _scan(bad)
    assert (facts.pages, facts.outline, facts.textless) == (30, _scan(good).outline, (8,))
    if damage != "no xref":  # without a trailer there is no /Info to name; pdfium repairs the others too
        assert facts.meta == _scan(good).meta
        _agrees(facts, bad)


def test_a_prev_cycle_ends(tmp_path: Path) -> None:
    objects, _ = _document(300)
    pdf = _write(tmp_path / "t.pdf", objects, root=1, info=7, packed=set(), xref="table")
    data = pdf.read_bytes()
    table = data[data.rindex(b"\nxref") + 1:data.rindex(b"trailer")]

    def trailer(prev: int) -> bytes:
        return b"trailer\n<< /Size %d /Root 1 0 R /Info 7 0 R /Prev %010d >>\n" % (len(objects) + 1, prev)

    first = len(data)  # two sections that name each other as /Prev, each a copy of the table
    second = first + len(table) + len(trailer(0))
    for at, prev in ((first, second), (second, first)):
        assert len(data) == at
        data += table + trailer(prev)
    data += b"startxref\n%d\n%%%%EOF\n" % second
    data += b"7 0 obj\n<< /Title (Unlisted) >>\nendobj\n"  # in no xref section: only the full scan sees it
    pdf.write_bytes(data)
    facts = _scan(pdf)
    assert facts.pages == 300 and facts.meta["title"] == "Packed (objects)"  # the xref data was used


@pytest.mark.parametrize("pages", [3, 300])
def test_a_page_tree_cycle_ends(tmp_path: Path, pages: int) -> None:
    objects, packed = _document(pages)
    objects[2] = objects[2].replace(b"/Kids [", b"/Kids [2 0 R ")  # the root is its own kid
    for xref in ("table", "stream"):
        pdf = _write(tmp_path / f"{xref}.pdf", objects, root=1, info=7, packed=packed, xref=xref)
        facts = _scan(pdf)
        assert facts.pages == pages and facts.textless == ()  # each node once; every page still found


def test_files_pdfium_reads_agree_on_the_summary(tmp_path: Path) -> None:
    objects, packed = _document(4, scanned={1})
    pdf = _write(tmp_path / "s.pdf", objects, root=1, info=7, packed=packed, xref="table")
    _agrees(_scan(pdf), pdf)
    text = bind_inputs({"s": pdf}, RLMConfig())[1].text
    assert "PDF, 4 pages, title 'Packed (objects)', author 'h6'; no text layer on page 2 (scanned" in text
    assert "Part One" in text and "Part Two" in text


def test_a_pdf_over_the_scan_bytes_is_read_through_its_xref_data(tmp_path: Path) -> None:
    objects, packed = _document(3, scanned={1})
    filler = pdfscan.SCAN_BYTES + 2**20
    objects[99] = b"<< /Length %d >>\nstream\n" % filler + b"\0" * filler + b"\nendstream"  # named by no page
    pdf = _write(tmp_path / "big.pdf", objects, root=1, info=7, packed=packed, xref="table")
    assert pdf.stat().st_size > pdfscan.SCAN_BYTES
    facts = _scan(pdf)
    assert (facts.pages, facts.textless, facts.meta["author"]) == (3, (2,), "h6")
    data = pdf.read_bytes()
    pdf.write_bytes(re.sub(rb"startxref\s+\d+", b"startxref\n5", data[-200:]).join([data[:-200], b""]))
    assert _scan(pdf) == pdfscan.PdfFacts()  # no usable xref data: described from its size alone
