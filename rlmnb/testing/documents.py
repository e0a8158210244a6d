"""Generated documents for tests, notebooks and benchmarks: PDF, DOCX, PPTX, XLSX, HTML, Markdown, mail.

Every file is written by a library's own writer (reportlab, python-docx, python-pptx, openpyxl) or the
standard library, from seeded text, so nothing binary is committed. Page `i` (0-based) of a generated
PDF says "This is page {i+1} of {title}." and its section headings are "Section {k}".
These writers are in the `documents` and `dev` extras.
"""

from __future__ import annotations

import email.message
import email.utils
import mailbox
import os
from collections.abc import Sequence
from pathlib import Path

from rlmnb.testing.generators import GENERATED_AT, WORDS


def _sentence(seed: int, n: int = 12) -> str:
    words = [WORDS[(seed * 7919 + k * 104729) % len(WORDS)] for k in range(n)]
    return " ".join(words).capitalize() + "."


def _stamp(path: Path) -> Path:
    os.utime(path, (GENERATED_AT, GENERATED_AT))
    return path


def pdf(path: str | Path, pages: int = 3, *, title: str = "Sample", author: str = "rlmnb tests",
        lines: int = 6, scanned: Sequence[int] = (), extra: dict[int, str] | None = None) -> Path:
    """A PDF of `pages` pages with a text layer, except pages in `scanned` (a drawn shape only).

    `extra` maps a page index to one more line written on that page (a clause to find).
    """
    from reportlab import rl_config
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    rl_config.useA85 = 0  # Flate-compressed streams, as most PDF writers make them
    path = Path(path)
    c = canvas.Canvas(str(path), pagesize=A4, invariant=True)
    c.setTitle(title)
    c.setAuthor(author)
    for i in range(pages):
        if i in scanned:
            c.rect(100, 400, 300, 200, fill=1)
        else:
            c.drawString(72, 800, f"This is page {i + 1} of {title}.")
            if i % 10 == 0:
                c.bookmarkPage(f"s{i}")
                c.addOutlineEntry(f"Section {i // 10 + 1}", f"s{i}", level=0)
            for k in range(lines):
                c.drawString(72, 780 - 14 * k, _sentence(i * 100 + k))
            if extra and i in extra:
                c.drawString(72, 780 - 14 * lines, extra[i])
        c.showPage()
    c.save()
    return _stamp(path)


def scanned_pdf(path: str | Path, lines: Sequence[str], *, dpi: int = 200) -> Path:
    """A one-page PDF whose only content is a picture of `lines` (a scan: no text layer).

    The lines are typeset by reportlab, rendered to pixels by pypdfium2 at `dpi`, and that picture is the
    page of a new PDF, so only OCR (or a vision model) reads them.
    """
    import io

    import pypdfium2
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    typeset = io.BytesIO()
    c = canvas.Canvas(typeset, pagesize=A4, invariant=True)
    c.setFont("Helvetica", 16)
    for k, line in enumerate(lines):
        c.drawString(72, 760 - 28 * k, line)
    c.showPage()
    c.save()
    doc = pypdfium2.PdfDocument(typeset.getvalue())
    picture = doc[0].render(scale=dpi / 72).to_pil().convert("L")
    doc.close()
    path = Path(path)
    c = canvas.Canvas(str(path), pagesize=A4, invariant=True)
    c.drawImage(ImageReader(picture), 0, 0, width=A4[0], height=A4[1])
    c.showPage()
    c.save()
    return _stamp(path)


def encrypted_pdf(path: str | Path, password: str = "secret") -> Path:
    """A one-page PDF that opens only with `password`."""
    from pypdf import PdfReader, PdfWriter

    path = Path(path)
    plain = pdf(path.with_suffix(".plain.pdf"), 1)
    writer = PdfWriter()
    for page in PdfReader(plain).pages:
        writer.add_page(page)
    writer.encrypt(password)
    with open(path, "wb") as f:
        writer.write(f)
    plain.unlink()
    return _stamp(path)


def docx(path: str | Path, sections: Sequence[str] = ("Introduction", "Terms", "Termination"), *,
         title: str = "Agreement", author: str = "rlmnb tests", extra: dict[int, str] | None = None) -> Path:
    """A Word document: a title, then one Heading 1 per section with two paragraphs each."""
    import docx as python_docx

    path = Path(path)
    d = python_docx.Document()
    d.core_properties.title = title
    d.core_properties.author = author
    d.add_heading(title, level=0)
    for i, heading in enumerate(sections):
        d.add_heading(heading, level=1)
        d.add_paragraph(_sentence(i))
        d.add_paragraph(extra[i] if extra and i in extra else _sentence(i + 50))
    d.save(str(path))
    return _stamp(path)


def pptx(path: str | Path, slides: int = 3, *, title: str = "Deck") -> Path:
    """A slide deck: slide i has the title "Slide {i+1}" and one sentence."""
    from pptx import Presentation

    path = Path(path)
    deck = Presentation()
    deck.core_properties.title = title
    for i in range(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {i + 1}"
        slide.placeholders[1].text = _sentence(i)
    deck.save(str(path))
    return _stamp(path)


def xlsx(path: str | Path, sheets: dict[str, list[list[object]]] | None = None) -> Path:
    """A workbook; the default has sheets "Totals" and "Items"."""
    from openpyxl import Workbook

    path = Path(path)
    sheets = sheets or {"Totals": [["region", "total"], ["north", 120], ["south", 80]],
                        "Items": [["item", "price"], ["pen", 2.5], ["book", 12]]}
    wb = Workbook()
    first = True
    for name, rows in sheets.items():
        ws = wb.active if first else wb.create_sheet()
        assert ws is not None
        ws.title = name
        first = False
        for row in rows:
            ws.append(row)
    wb.save(str(path))
    return _stamp(path)


def html(path: str | Path, sections: Sequence[str] = ("Overview", "Details"), *, title: str = "Page") -> Path:
    body = "".join(f"<h2>{h}</h2><p>{_sentence(i)}</p>" for i, h in enumerate(sections))
    path = Path(path)
    path.write_text(f"<html><head><title>{title}</title><script>var x = 1;</script></head>"
                    f"<body><h1>{title}</h1><p>Intro text.</p>{body}</body></html>", encoding="utf-8")
    return _stamp(path)


def markdown(path: str | Path, sections: Sequence[str] = ("Setup", "Usage"), *, title: str = "Notes") -> Path:
    path = Path(path)
    parts = [f"# {title}", "", "Intro text.", ""]
    for i, h in enumerate(sections):
        parts += [f"## {h}", "", _sentence(i), ""]
    path.write_text("\n".join(parts), encoding="utf-8")
    return _stamp(path)


def _message(i: int, subject: str) -> email.message.EmailMessage:
    m = email.message.EmailMessage()
    m["From"] = f"sender{i}@example.com"
    m["To"] = "team@example.com"
    m["Subject"] = subject
    m["Date"] = email.utils.formatdate(GENERATED_AT + 3600 * i, usegmt=True)
    m.set_content(_sentence(i) + "\n")
    return m


def eml(path: str | Path, subject: str = "Quarterly report") -> Path:
    path = Path(path)
    path.write_bytes(bytes(_message(0, subject)))
    return _stamp(path)


def mbox(path: str | Path, subjects: Sequence[str] = ("Kick-off", "Budget", "Follow-up")) -> Path:
    path = Path(path)
    box = mailbox.mbox(str(path))
    try:
        for i, s in enumerate(subjects):
            box.add(_message(i, s))
        box.flush()
    finally:
        box.close()
    return _stamp(path)


NOTICE_CLAUSE = "Either party may terminate this agreement with {days} days' written notice."


def invoice_image(path: str | Path, total: str, *, number: int = 1, size: tuple[int, int] = (800, 1000)) -> Path:
    """A PNG 'scanned invoice' that shows `total` in drawn text, and says so in its PNG text ("shows").

    Vision models read the pixels; the scripted sub-model (fake_behaviours.image_text_responder) reads
    the "shows" text instead, so tests and tutorials stay deterministic and offline.
    """
    from PIL import Image, ImageDraw, PngImagePlugin

    path = Path(path)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    draw.text((60, 60), f"INVOICE No. {number:04d}", fill="black")
    for k in range(6):
        draw.text((60, 140 + 30 * k), _sentence(number * 10 + k, 6), fill="gray")
    draw.rectangle((50, size[1] - 160, size[0] - 50, size[1] - 90), outline="black")
    draw.text((70, size[1] - 135), f"TOTAL DUE: {total}", fill="black")
    meta = PngImagePlugin.PngInfo()
    meta.add_text("shows", total)
    image.save(path, format="PNG", pnginfo=meta)
    return _stamp(path)


def contracts_folder(root: str | Path) -> dict[str, object]:
    """Contracts (3 PDFs, 2 DOCX) in root/contracts, three of them with a notice clause, and invoice
    images in root/invoices. Returns the truth: {"notice": {file: (page, sentence)}, "totals": {file: total}}."""
    root = Path(root)
    contracts, invoices = root / "contracts", root / "invoices"
    contracts.mkdir(parents=True, exist_ok=True)
    invoices.mkdir(parents=True, exist_ok=True)
    notice: dict[str, tuple[int, str]] = {}
    for name, pages, at, days in (("lease-harbour.pdf", 9, 6, 90), ("supply-northwind.pdf", 6, None, 0),
                                  ("services-acme.pdf", 12, 10, 60)):
        clause = NOTICE_CLAUSE.format(days=days)
        pdf(contracts / name, pages, title=name.removesuffix(".pdf").replace("-", " ").title(),
            extra={at: clause} if at is not None else None)
        if at is not None:
            notice[name] = (at + 1, clause)
    sections = ("Introduction", "Terms", "Termination", "Signatures")
    clause = NOTICE_CLAUSE.format(days=30)
    docx(contracts / "nda-bluebird.docx", sections, title="NDA Bluebird", extra={2: clause})
    notice["nda-bluebird.docx"] = (4, clause)  # section 1 is the text before the first heading (the title)
    docx(contracts / "licence-kestrel.docx", sections, title="Licence Kestrel")
    totals = {"invoice-0001.png": "1,250.00 EUR", "invoice-0002.png": "980.40 EUR", "invoice-0003.png": "77.10 EUR"}
    for i, (name, total) in enumerate(totals.items()):
        invoice_image(invoices / name, total, number=i + 1)
    return {"notice": notice, "totals": totals}


__all__ = ["NOTICE_CLAUSE", "contracts_folder", "docx", "encrypted_pdf", "eml", "html", "invoice_image", "markdown",
           "mbox", "pdf", "pptx", "scanned_pdf", "xlsx"]
