"""Documents as the sandbox sees them: lazy, read-only `Document`s and `DocumentFolder`s.

This module runs where model code runs (the kernel process, or the local sandbox's process): it is
the only place a document's content is parsed. Nothing is read when a `Document` is made; the first
`.text`, `.pages`, `len()` or index extracts the whole document once, and the result is cached in
memory and on disk (`cache_dir()`), keyed by (absolute path, mtime, size), so a folder read again by
the next run costs a JSON read. A `DocumentFolder` is a mapping of relative path -> `Document`, each
made on first access.

Formats and what a page is:
    PDF (pypdfium2)        one page per PDF page; `.image(dpi)` renders it to PNG, `.ocr()` reads a scan
                           with tesseract (opt-in: the `ocr` extra and the tesseract program)
    PPTX (python-pptx)     one page per slide (title, text frames, tables)
    XLSX, XLS (python-calamine)
                           one page per sheet, as tab-separated rows; each sheet is also a table
                           (`.table(sheet)`, and a sql() relation named in `.sheets`: see `sheets`;
                           an .xls is measured record by record by `biff` before calamine opens it)
    DOCX (python-docx), HTML (html.parser), Markdown
                           one section per heading (text before the first heading is a section too)
    EML, MBOX (email, mailbox)
                           one message per page: its From/To/Date/Subject headers, then its body

Bounds against hostile files: `MAX_BYTES` per file, `MAX_PAGES` pages or messages, `MAX_ZIP_BYTES`
inflated bytes and `MAX_ZIP_RATIO` per OOXML archive, `MAX_CELLS` per workbook, `MAX_PIXELS` per
rendered page. Crossing one is an `InputError` naming the file, like a damaged or encrypted file.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import functools
import hashlib
import html
import html.parser
import io
import json
import mailbox
import os
import re
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar, overload

from rlmnb._ground import images
from rlmnb._ground.errors import InputError
from rlmnb.inputs._families import biff, xmlscan
from rlmnb.inputs._families import sheets as sheets_
from rlmnb.inputs._filesystem import within

FORMATS = {".pdf": "PDF", ".docx": "DOCX", ".pptx": "PPTX", ".xlsx": "XLSX", ".xlsm": "XLSX", ".xls": "XLS", ".html": "HTML",
           ".htm": "HTML", ".md": "Markdown", ".markdown": "Markdown", ".eml": "EML", ".mbox": "MBOX"}
PAGE_WORD = {"PDF": "page", "PPTX": "slide", "XLSX": "sheet", "XLS": "sheet", "DOCX": "section", "HTML": "section",
             "Markdown": "section", "EML": "message", "MBOX": "message"}
MAX_BYTES = 512 * 2**20
MAX_PAGES = 50_000
MAX_ZIP_BYTES = 1 * 2**30
MAX_ZIP_RATIO = 200
MAX_CELLS = 5_000_000
MAX_PIXELS = 40_000_000
CACHE_VERSION = 1
INSTALL = "pip install 'rlmnb[documents]'"

_Item = TypeVar("_Item")
extractions = {"count": 0, "ocr": 0}  # documents parsed, pages OCRed in this process (not from the disk cache)


def format_of(path: str) -> str | None:
    """"PDF", "DOCX"... for a document file name, else None."""
    return FORMATS.get(os.path.splitext(path)[1].lower())


def cache_dir() -> str:
    """Where extracted documents are cached: $RLMNB_DOCUMENT_CACHE, else a folder in the temp directory."""
    return os.environ.get("RLMNB_DOCUMENT_CACHE") or os.path.join(tempfile.gettempdir(), "rlmnb-documents")


class Page(str):
    """One page, slide, sheet, section or message: its text, with where it is.

    `number` is 1-based; `label` is the section's heading, the slide's title, the sheet's name or the
    message's subject ("" for a PDF page); `source` is the document's path as shown to the model;
    `headers` holds a message's headers. A page is a `str`, so `in`, `find` and slicing work on it, and
    `.text` gives the same text as a plain `str`, as a `Document`'s `.text` does.
    """

    number: int
    label: str
    source: str
    headers: Mapping[str, str]
    _doc: Document | None

    def __new__(cls, text: str, number: int, label: str = "", source: str = "",
                headers: Mapping[str, str] | None = None, doc: Document | None = None) -> Page:
        page = super().__new__(cls, text)
        page.number, page.label, page.source = number, label, source
        page.headers = MappingProxyType(dict(headers or {}))
        page._doc = doc
        return page

    @property
    def text(self) -> str:
        """This page's text as a plain `str` (what `str(page)` gives): `Document.text` joins these, so a
        model's `[p.text for p in doc.pages]` works as it does on the document."""
        return str.__str__(self)

    @property
    def has_text(self) -> bool:
        """False for a page with no text layer (a scan: send `.image()` to a vision sub-call)."""
        return bool(self.strip())

    def image(self, dpi: int = 150) -> bytes:
        """This PDF page rendered as PNG bytes (at most MAX_PIXELS pixels)."""
        if self._doc is None or self._doc.format != "PDF":
            raise InputError("Only PDF pages render to images; this page is not from a PDF.")
        return self._doc._render(self.number - 1, dpi)

    def ocr(self, lang: str = "eng", dpi: int = 300) -> str:
        """The text tesseract reads on this PDF page rendered at `dpi` (a scan's text), cached on disk like
        the document's. Opt-in: needs pytesseract and the tesseract program; an InputError says how to
        install them when they are missing."""
        if self._doc is None or self._doc.format != "PDF":
            raise InputError("Only PDF pages are read with OCR; an image of a folder input has its own .ocr().")
        return self._doc._ocr(self.number - 1, lang, dpi)

    def __repr__(self) -> str:
        where = f"{self.source} " if self.source else ""
        label = f" {self.label!r}" if self.label else ""
        return f"<Page {where}#{self.number}{label}, {len(self):,} chars>"


class Document(Sequence[Page]):
    """A read-only document: `.text`, `.pages` (a tuple of `Page`), `len()`, `doc[i]`, `doc[a:b]`, `.meta`.

    `.find(s)` gives the pages containing `s`. Extraction happens on first use (see the module docstring).
    """

    def __init__(self, path: str, name: str = "", shown: str = "", sheets: Sequence[Mapping[str, Any]] = ()) -> None:
        fmt = format_of(path)
        if fmt is None:
            raise InputError(f"{os.path.basename(path)} is not a document this sandbox reads "
                             f"({', '.join(sorted(set(FORMATS.values())))}).")
        self.path, self.format, self.name = path, fmt, name
        self.shown = shown or os.path.basename(path)
        self._lock = threading.Lock()
        self._pages: tuple[Page, ...] | None = None
        self._meta: Mapping[str, Any] | None = None
        self.sheets = tuple(MappingProxyType(dict(e)) for e in sheets)
        self._tables: dict[str, Any] = {}
        self._xls: tuple[tuple[biff.XlsSheet, ...], Any] | None = None  # measured sheets, calamine's workbook

    # -- content -----------------------------------------------------------------------------------------
    @property
    def pages(self) -> tuple[Page, ...]:
        return self._load_once()

    def _load_once(self) -> tuple[Page, ...]:
        if self._pages is None:
            with self._lock:
                if self._pages is None:
                    self._load()
        assert self._pages is not None
        return self._pages

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages)

    @property
    def meta(self) -> Mapping[str, Any]:
        """title, author, created, modified, pages, format (those the file has)."""
        self._load_once()
        assert self._meta is not None
        return self._meta

    @property
    def outline(self) -> tuple[str, ...]:
        """The labels of the pages that have one (headings, slide titles, sheet names, subjects)."""
        return tuple(p.label for p in self.pages if p.label)

    def find(self, needle: str) -> list[Page]:
        return [p for p in self.pages if needle in p]

    # -- a workbook's sheets as tables ----------------------------------------------------------------------
    def table(self, sheet: str | int = 0) -> Any:
        """One sheet of a workbook as a pandas DataFrame, with the header and types sql() gives it."""
        return self.sheet_table(sheet).to_pandas()

    def sheet_table(self, sheet: str | int = 0) -> Any:
        """One sheet of a workbook (by name or position) as a pyarrow Table, read on first use and kept.

        Raises InputError for another format, an unknown sheet, or a sheet over `sheets.MAX_SHEET_CELLS`
        (for an .xls, all its sheets together: calamine reads them all).
        """
        if self.format not in ("XLSX", "XLS"):
            raise InputError(f"{self.shown} is a {self.format} document, not a workbook; only XLSX and XLS sheets "
                             "are tables.")
        with self._lock:
            if isinstance(sheet, int):
                if self.format == "XLS":
                    names = [s.facts.name for s in biff.scan_workbook(self.path, self.shown)]
                else:
                    with check_zip(self.path, self.shown) as z:
                        names = [n for n, _ in sheets_.sheet_members(z)]
                if not -len(names) <= sheet < len(names):
                    raise InputError(f"{self.shown} has {len(names)} sheet(s); there is no sheet {sheet}.")
                sheet = names[sheet]
            if sheet not in self._tables and self.format == "XLS":
                self._xls = self._xls or _open_xls(self.path, self.shown)
                rows, extent = _xls_rows(self._xls, self.shown, sheet)
                self._tables[sheet] = sheets_.to_arrow(rows, extent.first_col if extent else 1)
            elif sheet not in self._tables:
                _office(self.path, self.shown, "python_calamine")  # the archive's bounds first
                rows, extent = sheets_.read_rows(self.path, self.shown, sheet)
                self._tables[sheet] = sheets_.to_arrow(rows, extent.first_col if extent else 1)
            return self._tables[sheet]

    def relations(self) -> dict[str, Callable[[], Any]]:
        """The workbook's sql() relations: name -> how its sheet's Arrow table is made."""
        return {e["relation"]: functools.partial(self.sheet_table, e["sheet"]) for e in self.sheets}

    def __len__(self) -> int:
        return len(self.pages)

    @overload
    def __getitem__(self, i: int) -> Page: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Page, ...]: ...
    def __getitem__(self, i: int | slice) -> Page | tuple[Page, ...]:
        return self.pages[i]

    def __iter__(self) -> Iterator[Page]:
        return iter(self.pages)

    def __repr__(self) -> str:
        if self._pages is None:
            return f"<Document {self.shown} ({self.format}, not read yet)>"
        return f"<Document {self.shown} ({self.format}, {len(self._pages):,} {PAGE_WORD[self.format]}s)>"

    # -- extraction ----------------------------------------------------------------------------------------
    def _cache_key(self, what: str = "") -> str:
        """The disk cache's key of this file as it is now (path, mtime, size), and of `what` in it."""
        try:
            st = os.stat(self.path)
        except OSError as e:
            raise InputError(f"{self.shown}: cannot read {self.path} ({e.strerror}).") from None
        if st.st_size > MAX_BYTES:
            raise InputError(f"{self.shown} is {st.st_size:,} bytes, over the {MAX_BYTES:,}-byte limit for one "
                             "document; split it.")
        return hashlib.sha256(f"{CACHE_VERSION}\0{os.path.abspath(self.path)}\0{st.st_mtime_ns}\0{st.st_size}"
                              f"{what}".encode()).hexdigest()

    def _load(self) -> None:
        key = self._cache_key()
        cached = _cache_read(key)
        if cached is None:
            extractions["count"] += 1
            pages, meta = _EXTRACTORS[self.format](self.path, self.shown)
            if len(pages) > MAX_PAGES:
                raise InputError(f"{self.shown} has over {MAX_PAGES:,} {PAGE_WORD[self.format]}s; split it.")
            cached = {"pages": pages, "meta": meta}
            _cache_write(key, cached)
        self._pages = tuple(Page(p["text"], i + 1, p.get("label", ""), self.shown, p.get("headers"), self)
                            for i, p in enumerate(cached["pages"]))
        meta = {k: v for k, v in cached["meta"].items() if v not in (None, "")}
        meta.update(format=self.format, pages=len(self._pages))
        self._meta = MappingProxyType(meta)

    def _ocr(self, index: int, lang: str, dpi: int) -> str:
        key = self._cache_key(f"\0ocr\0{index}\0{lang}\0{dpi}")
        cached = _cache_read(key)
        if cached is not None:
            return str(cached["text"])
        png = self._render(index, dpi)
        try:
            text = images.ocr(png, f"{self.shown} page {index + 1}", lang)
        except images.ImageError as e:
            raise InputError(str(e)) from None
        extractions["ocr"] += 1
        _cache_write(key, {"text": text})
        return text

    def _render(self, index: int, dpi: int) -> bytes:
        pdfium = _need("pypdfium2")
        pdf = _open_pdf(pdfium, self.path, self.shown)
        try:
            page = pdf[index]
            w, h = page.get_size()
            scale = dpi / 72
            if w * scale * h * scale > MAX_PIXELS:
                raise InputError(f"{self.shown} page {index + 1} at {dpi} dpi is over {MAX_PIXELS:,} pixels; "
                                 "use a lower dpi.")
            image = page.render(scale=scale).to_pil()
            out = io.BytesIO()
            image.save(out, format="PNG")
            return out.getvalue()
        finally:
            pdf.close()


class LazyFolder(Mapping[str, _Item]):
    """Relative path -> an item made by `_make(path, key)` on first access and kept; read-only."""

    def __init__(self, root: str, files: Sequence[str], name: str = "") -> None:
        self.root, self.name = root, name
        self._files = tuple(files)
        self._index = frozenset(self._files)
        self._made: dict[str, _Item] = {}

    def _make(self, path: str, key: str) -> _Item:
        raise NotImplementedError

    def __getitem__(self, key: str) -> _Item:
        if key not in self._index:
            raise KeyError(key)
        item = self._made.get(key)
        if item is None:
            path = key if os.path.isabs(key) else os.path.join(self.root, *key.split("/"))
            if not within(self.root, path):  # bound within the root; a link changed since is not followed
                raise InputError(f"{key} leads outside {self.root} through a symbolic link, so it is not read.")
            item = self._made.setdefault(key, self._make(path, key))
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


class DocumentFolder(LazyFolder[Document]):
    """Relative path -> `Document`, each made (and read) on first access; read-only.

    `sheets` are the sql() relations of the folder's workbooks (one entry per sheet, with its file).
    """

    def __init__(self, root: str, files: Sequence[str], name: str = "",
                 sheets: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(root, files, name)
        self.sheets = tuple(MappingProxyType(dict(e)) for e in sheets)

    def _make(self, path: str, key: str) -> Document:
        return Document(path, self.name, key, [e for e in self.sheets if e["file"] == key])

    def relations(self) -> dict[str, Callable[[], Any]]:
        """The workbooks' sql() relations: name -> how its sheet's Arrow table is made (on first query)."""
        return {e["relation"]: functools.partial(lambda f, sh: self[f].sheet_table(sh), e["file"], e["sheet"])
                for e in self.sheets}

    def __repr__(self) -> str:
        return f"<DocumentFolder {os.path.basename(self.root.rstrip('/')) or self.root}: {len(self):,} documents>"


# ---- the disk cache -------------------------------------------------------------------------------------
def _cache_read(key: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(cache_dir(), key + ".json"), encoding="utf-8") as f:
            found: dict[str, Any] = json.load(f)
            return found
    except (OSError, ValueError):
        return None


def _cache_write(key: str, value: Mapping[str, Any]) -> None:
    """Best effort: a sandbox that may not write there simply reads again next time."""
    folder = cache_dir()
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, os.path.join(folder, key + ".json"))


# ---- extractors: path, shown name -> (pages as {"text", "label", "headers"}, meta) ------------------------
Pages = list[dict[str, Any]]


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"Reading this document needs {module}, which is not installed; run {INSTALL}.") from None


def _open_pdf(pdfium: Any, path: str, shown: str) -> Any:
    try:
        return pdfium.PdfDocument(path)
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise InputError(f"{shown} is encrypted; pass a decrypted copy (qpdf --decrypt in.pdf out.pdf).") from None
        raise InputError(f"{shown} is not a readable PDF ({e}).") from None


def _pdf(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    pdfium = _need("pypdfium2")
    pdf = _open_pdf(pdfium, path, shown)
    try:
        n = len(pdf)
        if n > MAX_PAGES:
            raise InputError(f"{shown} has {n:,} pages, over the {MAX_PAGES:,}-page limit; split it.")
        pages: Pages = []
        for i in range(n):
            page = pdf[i]
            textpage = page.get_textpage()
            pages.append({"text": textpage.get_text_range().replace("\r\n", "\n")})
            textpage.close()
            page.close()
        info = pdf.get_metadata_dict(skip_empty=True)
        for item in pdf.get_toc(max_depth=2):  # a bookmark labels the page it points to
            dest = item.get_dest()
            at = dest.get_index() if dest is not None else None
            if at is not None and 0 <= at < n and not pages[at].get("label"):
                pages[at]["label"] = item.get_title()
    finally:
        pdf.close()
    return pages, {"title": info.get("Title"), "author": info.get("Author"), "created": info.get("CreationDate"),
                   "modified": info.get("ModDate")}


def check_zip(path: str, shown: str) -> zipfile.ZipFile:
    """The OOXML archive, after checking it is one and that it inflates within the bounds."""
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic.startswith(b"\xd0\xcf\x11\xe0"):
        raise InputError(f"{shown} is encrypted or in the old binary Office format; save it unencrypted as "
                         ".docx/.pptx/.xlsx.")
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"{shown} is not a valid Office file (not a zip archive: {e}).") from None
    infos = z.infolist()
    inflated = sum(i.file_size for i in infos)
    packed = max(1, sum(i.compress_size for i in infos))
    if len(infos) > 100_000 or inflated > MAX_ZIP_BYTES or inflated > MAX_ZIP_RATIO * packed + 2**20:
        z.close()
        raise InputError(f"{shown} inflates to {inflated:,} bytes from {packed:,} (a decompression bomb?); "
                         "it is not read.")
    return z


CORE_KEYS = {"dc:title": "title", "dc:creator": "author", "dcterms:created": "created",
             "dcterms:modified": "modified"}


def core_properties(z: zipfile.ZipFile) -> dict[str, Any]:
    """title, author, created, modified from docProps/core.xml, else {}: its first MiB parsed in linear time
    within a time budget (xmlscan), so a hostile part cannot hold the process."""
    part = xmlscan.member_prefix(z, "docProps/core.xml", 2**20)
    if part is None:
        return {}
    out: dict[str, Any] = {}
    inside: list[str] = []  # the property being read, and its text so far
    texts: list[str] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        if not inside and name in CORE_KEYS and CORE_KEYS[name] not in out:
            inside.append(name)
            texts.clear()

    def end(name: str) -> None:
        if inside and name == inside[0]:
            out[CORE_KEYS[inside.pop()]] = "".join(texts).strip()

    def text(data: str) -> None:
        if inside:
            texts.append(data)

    xmlscan.scan(part[0], xmlscan.Handler(start, end, text), complete=part[1],
                 deadline=time.monotonic() + xmlscan.PROBE_SECONDS)
    return {k: v for k, v in out.items() if v}


def _office(path: str, shown: str, module: str) -> tuple[dict[str, Any], Any]:
    """The checked archive's core properties, and the library that reads it."""
    with check_zip(path, shown) as z:
        meta = core_properties(z)
    return meta, _need(module)


def _docx(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    meta, docx = _office(path, shown, "docx")
    d = docx.Document(path)
    names: dict[str | None, str] = {None: ""}  # style id -> name, looked up once per id (paragraph.style is slow)

    def style_name(sid: str | None) -> str:
        if sid not in names:
            found = d.styles.element.get_by_id(sid)
            names[sid] = str(found.name_val or "") if found is not None else ""
        return names[sid]

    sections: Pages = []
    label, lines = "", list[str]()
    for block in d.iter_inner_content():
        if hasattr(block, "rows"):
            lines.extend("\t".join(c.text for c in row.cells) for row in block.rows)
            continue
        ppr = block._p.pPr
        style = style_name(ppr.style if ppr is not None else None).lower()  # "heading 1" in the XML
        if style.startswith("heading") or style == "title":
            if label or any(s.strip() for s in lines):
                sections.append({"text": "\n".join([label, *lines]).strip(), "label": label})
            label, lines = block.text.strip(), []
        else:
            lines.append(block.text)
    if label or any(s.strip() for s in lines):
        sections.append({"text": "\n".join([label, *lines]).strip(), "label": label})
    return sections, meta


def _pptx(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    meta, pptx = _office(path, shown, "pptx")
    deck = pptx.Presentation(path)
    slides: Pages = []
    for slide in deck.slides:
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        texts = []
        for shape in slide.shapes:
            if shape.has_text_frame:
                texts.append(shape.text_frame.text)
            elif getattr(shape, "has_table", False):
                texts.extend("\t".join(c.text for c in row.cells) for row in shape.table.rows)
        slides.append({"text": "\n".join(t for t in texts if t), "label": title})
    return slides, meta


def _xlsx(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    meta, calamine = _office(path, shown, "python_calamine")
    with check_zip(path, shown) as z:
        names = [n for n, _ in sheets_.sheet_members(z)]
    wb = calamine.CalamineWorkbook.from_path(path)
    pages: Pages = []
    cells = 0
    for name in names:
        rows, _ = sheets_.read_rows(path, shown, name, wb)
        cells += sum(len(r) for r in rows)
        if cells > MAX_CELLS:
            raise InputError(f"{shown} has over {MAX_CELLS:,} cells; export the sheets you need as CSV.")
        text = "\n".join("\t".join("" if v is None else str(v) for v in row) for row in rows)
        pages.append({"text": text, "label": name})
    return pages, meta


def _open_xls(path: str, shown: str) -> tuple[tuple[biff.XlsSheet, ...], Any]:
    """The sheets as `biff` measured them, then calamine's workbook (opened only within the bounds)."""
    _need("python_calamine")
    return biff.read_xls(path, shown)


def _xls_rows(book: tuple[tuple[biff.XlsSheet, ...], Any], shown: str,
              sheet: str) -> tuple[list[list[Any]], sheets_.Extent | None]:
    """One sheet's rows and measured extent from an opened .xls (see `_open_xls`)."""
    measured, wb = book
    found = {s.facts.name: s.facts.extent for s in measured}
    if sheet not in found:
        raise InputError(f"{shown} has no sheet {sheet!r}; its sheets: {', '.join(found) or 'none'}.")
    try:
        return wb.get_sheet_by_name(sheet).to_python(), found[sheet]
    except Exception as e:  # calamine's own errors for a damaged sheet
        raise InputError(f"{shown}: sheet {sheet!r} cannot be read ({e}).") from None


def _xls(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    book = _open_xls(path, shown)
    pages: Pages = []
    for s in book[0]:
        rows, _ = _xls_rows(book, shown, s.facts.name)
        text = "\n".join("\t".join("" if v is None else str(v) for v in row) for row in rows)
        pages.append({"text": text, "label": s.facts.name})
    return pages, {}


class _HTMLText(html.parser.HTMLParser):
    """Visible text of an HTML page, split at its h1-h6 headings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: Pages = []
        self.label, self.buf, self.title = "", list[str](), ""
        self._skip = 0
        self._heading: list[str] | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif re.fullmatch(r"h[1-6]", tag):
            self.flush()
            self._heading = []
        elif tag in ("p", "div", "br", "li", "tr", "section", "article"):
            self.buf.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.label = " ".join("".join(self._heading).split())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip:
            return
        elif self._heading is not None:
            self._heading.append(data)
        else:
            self.buf.append(data)

    def flush(self) -> None:
        body = re.sub(r"\n\s*\n+", "\n", "".join(self.buf)).strip()
        if self.label or body:
            self.sections.append({"text": "\n".join(s for s in (self.label, body) if s), "label": self.label})
        self.label, self.buf = "", list[str]()


def html_text(markup: str) -> _HTMLText:
    parser = _HTMLText()
    parser.feed(markup)
    parser.close()
    parser.flush()
    return parser


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        return f.read()


def _html(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    parsed = html_text(_read_text(path))
    return parsed.sections, {"title": parsed.title.strip()}


MD_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _markdown(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    sections: Pages = []
    label, lines, fence = "", list[str](), False
    for line in _read_text(path).splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else MD_HEADING.match(line)
        if m:
            if label or any(s.strip() for s in lines):
                sections.append({"text": "\n".join(lines).strip(), "label": label})
            label, lines = m.group(2), [line]
        else:
            lines.append(line)
    if label or any(s.strip() for s in lines):
        sections.append({"text": "\n".join(lines).strip(), "label": label})
    title = next((s["label"] for s in sections if s["label"]), "")
    return sections, {"title": title}


_HEADERS = ("From", "To", "Cc", "Date", "Subject")


def _message(msg: Any) -> dict[str, Any]:
    headers = {h: str(msg[h]) for h in _HEADERS if msg[h] is not None}
    body = ""
    part = msg.get_body(preferencelist=("plain", "html")) if hasattr(msg, "get_body") else None
    if part is not None:
        try:
            body = part.get_content()
        except (LookupError, ValueError):
            body = part.get_payload(decode=True).decode("utf-8", "replace") if part.get_payload(decode=True) else ""
        if part.get_content_type() == "text/html":
            body = "\n".join(s["text"] for s in html_text(body).sections)
    attachments = [a.get_filename() or "(unnamed)" for a in msg.iter_attachments()] if hasattr(
        msg, "iter_attachments") else []
    head = "\n".join(f"{k}: {v}" for k, v in headers.items())
    tail = f"\n[attachments: {', '.join(attachments)}]" if attachments else ""
    return {"text": f"{head}\n\n{body.strip()}{tail}", "label": headers.get("Subject", ""), "headers": headers}


def _eml(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    with open(path, "rb") as f:
        msg = email.message_from_binary_file(f, policy=email.policy.default)
    page = _message(msg)
    h = page["headers"]
    return [page], {"title": h.get("Subject"), "author": h.get("From"), "created": h.get("Date")}


def _mbox(path: str, shown: str) -> tuple[Pages, dict[str, Any]]:
    def parse(f: Any) -> Any:
        return email.message_from_binary_file(f, policy=email.policy.default)

    box = mailbox.mbox(path, factory=parse, create=False)
    pages: Pages = []
    try:
        for msg in box:
            if len(pages) >= MAX_PAGES:
                raise InputError(f"{shown} has over {MAX_PAGES:,} messages; split it.")
            pages.append(_message(msg))
    finally:
        box.close()
    dates = [p["headers"]["Date"] for p in pages if "Date" in p["headers"]]
    return pages, {"created": dates[0] if dates else None, "modified": dates[-1] if dates else None}


_EXTRACTORS = {"PDF": _pdf, "DOCX": _docx, "PPTX": _pptx, "XLSX": _xlsx, "XLS": _xls, "HTML": _html, "Markdown": _markdown,
               "EML": _eml, "MBOX": _mbox}


__all__ = ["CACHE_VERSION", "Document", "DocumentFolder", "FORMATS", "INSTALL", "LazyFolder", "MAX_BYTES",
           "MAX_CELLS", "MAX_PAGES", "MAX_PIXELS", "MAX_ZIP_BYTES", "MAX_ZIP_RATIO", "MD_HEADING", "PAGE_WORD",
           "Page", "Pages", "cache_dir", "check_zip", "core_properties", "extractions", "format_of", "html_text"]
