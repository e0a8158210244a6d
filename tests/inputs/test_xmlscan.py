"""Bind-time probes of hostile documents finish in bounded time: DOCX, PPTX and XLSX parts are read as a
bounded prefix by expat (no backtracking pattern, no DTD, capped depth, a time budget); PDF structure scans
are linear. Each hostile file here took the previous probes from seconds to hours (quadratic or worse in
the repeats: 8,000 repeats of `<w:p ` took 2.0 s, 20,000 of `1 0 obj ` 24 s, 160 KB of digits 212 s)."""

from __future__ import annotations

import io
import os
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code

import rlmnb.inputs._families.documents as documents
from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._families import xmlscan
from rlmnb.testing import ScriptedLM
from rlmnb.testing import documents as make

pytestmark = pytest.mark.usefixtures("stop_the_spare")
BIND_SECONDS = 20.0   # a generous bound: each bind below takes well under a second here


def _with_parts(path: Path, parts: dict[str, bytes]) -> Path:
    """Rewrite an Office file with `parts` replaced or added, plus incompressible padding so the archive
    stays under the decompression-bomb ratio (as a crafted 69 KB file does)."""
    with zipfile.ZipFile(path) as z:
        kept = {i.filename: z.read(i) for i in z.infolist() if i.filename not in parts}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in {**kept, **parts}.items():
            out.writestr(name, data)
        out.writestr("customXml/padding.bin", os.urandom(96 * 2**10), compress_type=zipfile.ZIP_STORED)
    path.write_bytes(buf.getvalue())
    return path


def _bind_in_time(**values: Any) -> tuple[list[Any], Any]:
    """bind_inputs in a thread; fails when it has not finished within BIND_SECONDS."""
    out: list[Any] = []

    def bind() -> None:
        try:
            out.append(bind_inputs(values, RLMConfig()))
        except InputError as e:
            out.append(e)

    worker = threading.Thread(target=bind, daemon=True)
    worker.start()
    worker.join(BIND_SECONDS)
    assert not worker.is_alive(), f"binding took over {BIND_SECONDS} s"
    if isinstance(out[0], InputError):
        raise out[0]
    return out[0]  # type: ignore[no-any-return]


W = b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'


@pytest.mark.parametrize("body", [b"<w:p " * 2_500_000, b"<w:p>" * 2_500_000,
                                  b'<w:p><w:pStyle w:val="' + b"Heading" * 1_800_000,
                                  b"<w:p><w:r><w:t>x</w:t></w:r>" * 500_000])
def test_a_hostile_docx_binds_in_bounded_time(tmp_path: Path, body: bytes) -> None:
    path = _with_parts(make.docx(tmp_path / "contract.docx"), {
        "word/document.xml": W + body,
        "docProps/core.xml": b"<cp:coreProperties>" + b"<dc:title>" * 150_000})
    fields, summary = _bind_in_time(contract=path)
    assert fields[0].kind == "document" and "DOCX" in fields[0].info.detail
    assert fields[0].info.preview == ""  # no heading read from any of these


def test_a_hostile_docx_in_a_run_binds_and_the_run_goes_on(tmp_path: Path) -> None:
    path = _with_parts(make.docx(tmp_path / "contract.docx"), {"word/document.xml": W + b"<w:p " * 2_500_000})
    root = ScriptedLM([code("shown = repr(inputs['contract'])\nprint(shown)"), code("submit(shown)")])
    started = time.monotonic()
    result = RLM(root, sandbox="kernel").run("What is in the contract?", contract=path)
    assert result.answer == "<Document contract.docx (DOCX, not read yet)>", result.reason
    assert time.monotonic() - started < 3 * BIND_SECONDS


def test_a_docx_probe_out_of_time_says_its_headings_were_not_read(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = make.docx(tmp_path / "agreement.docx")
    fields, _ = bind_inputs({"doc": path}, RLMConfig())
    assert fields[0].info.preview and fields[0].info.rows is not None  # headings and sections when in time
    monkeypatch.setattr(xmlscan, "PROBE_SECONDS", -1.0)
    fields, _ = bind_inputs({"doc": path}, RLMConfig())
    assert fields[0].info.preview == "" and fields[0].info.rows is None
    assert fields[0].info.detail.startswith("DOCX") and "not read" in fields[0].info.detail


def test_hostile_workbook_parts_bind_in_bounded_time(tmp_path: Path) -> None:
    book = make.xlsx(tmp_path / "book.xlsx")
    with zipfile.ZipFile(book) as z:
        sheet = next(n for n in z.namelist() if n.startswith("xl/worksheets/sheet"))
    hostile = _with_parts(Path(str(book)), {
        "xl/sharedStrings.xml": b"<sst>" + b"<si><t>" * 150_000,
        sheet: b"<worksheet>" + b"<dimension " * 12_000 + b' r="A1"' * 1_500_000})
    fields, _ = _bind_in_time(book=hostile)
    assert fields[0].kind == "workbook"
    names = make.xlsx(tmp_path / "names.xlsx")
    hostile = _with_parts(names, {"xl/workbook.xml": b"<workbook>" + b"<sheet " * 1_000_000,
                                  "xl/_rels/workbook.xml.rels": b"<Relationships>" + b"<Relationship " * 300_000})
    fields, _ = _bind_in_time(book=hostile)
    assert fields[0].kind == "workbook" and fields[0].info.rows == 0  # no sheet could be listed


@pytest.mark.parametrize("body", [b"1 0 obj " * 400_000, b"1" * 3_000_000, b"/Root " + b"1 " * 1_000_000,
                                  b"1 0 obj << /Type /Catalog /Title (" + b"/Title (" * 300_000 + b" endobj"])
def test_a_hostile_pdf_binds_or_is_refused_in_bounded_time(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(b"%PDF-1.4\n" + body + b"\n%%EOF\n")
    try:
        fields, _ = _bind_in_time(scan=path)
    except InputError as e:
        assert "scan.pdf" in str(e)  # damaged: one sentence naming it
    else:
        assert fields[0].kind == "document"


def test_the_scan_refuses_entities_and_deep_nesting_and_keeps_to_its_budget() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "' + b"x" * 1000 + b'">'
              + b"".join(b'<!ENTITY %s "%s">' % (bytes([98 + i]), (b"&" + bytes([97 + i]) + b";") * 10)
                         for i in range(8))
              + b']><l>&i;</l>')
    seen: list[str] = []
    handler = xmlscan.Handler(text=seen.append)
    assert xmlscan.scan(laughs, handler, complete=True, deadline=time.monotonic() + 5) is xmlscan.Scan.CUT
    assert sum(map(len, seen)) == 0  # nothing declared, nothing expanded
    deep = b"<a>" * (xmlscan.MAX_DEPTH + 10)
    opened: list[str] = []
    assert xmlscan.scan(deep, xmlscan.Handler(start=lambda n, a: opened.append(n) and None), complete=False,
                        deadline=time.monotonic() + 5) is xmlscan.Scan.CUT
    assert len(opened) == xmlscan.MAX_DEPTH
    assert xmlscan.scan(b"<a/>", handler, complete=True, deadline=time.monotonic() - 1) is xmlscan.Scan.TIMED_OUT
    assert xmlscan.scan(b"<a>b</a>", handler, complete=True, deadline=time.monotonic() + 5) is xmlscan.Scan.WHOLE


def test_a_member_is_read_no_further_than_its_cap_whatever_it_declares() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.xml", b"<a>" + b"x" * 5_000_000 + b"</a>")
    with zipfile.ZipFile(buf) as z:
        assert xmlscan.member_prefix(z, "missing.xml", 100) is None
        assert xmlscan.member_prefix(z, "big.xml", 1000) == (b"<a>" + b"x" * 997, False)
        z.getinfo("big.xml").file_size = 10  # a directory that lies: damaged, read as nothing, no error
        assert xmlscan.member_prefix(z, "big.xml", 1000) == (b"", False)
    assert documents.DOCX_XML_BYTES <= 16 * 2**20
