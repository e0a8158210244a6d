"""The documents family: a PDF, DOCX, PPTX, XLSX, XLS, HTML, Markdown, EML or MBOX file, or a folder or glob of them.

Binding reads only what a bounded, safe read gives on the host (never a C parser on the user's file):
the PDF structure through `pdfscan` (pages, metadata, outline, pages without a text layer, encryption),
an Office file's zip directory and docProps (title, author, dates, pages, words, slides, sheets; the
headings of a DOCX from its XML: a bounded prefix, parsed in linear time within a time budget by `xmlscan`), an .xls's sheets from its records (`biff`), the headings of
HTML and Markdown from their text. A damaged,
encrypted or over-large file is an InputError naming it, at bind time. A folder or glob is described from
its listing alone (file count by format, bytes). The content is extracted in the sandbox by `docread`,
where the kernel reopens the same paths (`crossing` gives the path, `reopen` the lazy view).

`files` hands a path or glob here first (`for_file`, `for_folder`).
"""

from __future__ import annotations

import email.parser
import email.policy
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.text import clip
from rlmnb._ground.tokens import CHARS_PER_TOKEN
from rlmnb.inputs._families import biff, docread, pdfscan, sheets, xmlscan
from rlmnb.inputs._previews import human_count
from rlmnb.inputs._records import Field, FieldInfo
from rlmnb.inputs._registry import Family

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

TEXT_READ_BYTES = 4 * 2**20   # HTML/Markdown read at bind time for headings and words
DOCX_XML_BYTES = 16 * 2**20   # of word/document.xml inflated at bind time for headings and words
MAX_HEADINGS = 200            # DOCX headings kept at bind time
TOKENS_PER_PAGE = 500         # a PDF page's tokens when its words are not known
TOKENS_PER_SLIDE = 100        # a slide's
OUTLINE_SHOWN = 40            # outline entries in a FieldInfo preview (the summary may show fewer)
FOLDER_SHOWN = 5


@dataclass(frozen=True)
class Probe:
    """What binding learned of one document without extracting it."""

    format: str
    pages: int | None = None
    words: int | None = None
    meta: dict[str, str] = field(default_factory=dict)
    outline: tuple[str, ...] = ()
    textless: tuple[int, ...] = ()
    checked: int | None = None  # pages checked for a text layer when fewer than `pages` (an even sample)
    workbook: sheets.WorkbookFacts | None = None
    note: str = ""  # what the probe could not read (a DOCX's headings past its byte cap or time budget)


def probe(path: str, size: int, shown: str) -> Probe:
    """The bounded facts of one document. Raises InputError for a damaged, encrypted or bomb file."""
    fmt = docread.format_of(path)
    assert fmt is not None
    if size > docread.MAX_BYTES:
        raise InputError(f"{shown} is {size:,} bytes, over the {docread.MAX_BYTES:,}-byte limit for one document; "
                         "split it.")
    if fmt == "PDF":
        facts = pdfscan.scan_pdf(path, size)
        if facts.encrypted:
            raise InputError(f"{shown} is encrypted; pass a decrypted copy (qpdf --decrypt in.pdf out.pdf).")
        if facts.error:
            raise InputError(f"{shown} is not a readable PDF: {facts.error}.")
        if facts.pages is not None and facts.pages > docread.MAX_PAGES:
            raise InputError(f"{shown} has {facts.pages:,} pages, over the {docread.MAX_PAGES:,}-page limit; "
                             "split it.")
        sampled = facts.checked if facts.checked is not None and facts.checked != facts.pages else None
        return Probe(fmt, facts.pages, None, facts.meta, facts.outline, facts.textless or (), sampled)
    if fmt in ("DOCX", "PPTX", "XLSX"):
        return _office(path, fmt, shown)
    if fmt == "XLS":
        workbook = biff.probe_xls(path, shown)
        outline = tuple(s.name for s in workbook.sheets)
        return Probe(fmt, len(outline), None, {}, outline, workbook=workbook)
    if fmt in ("HTML", "Markdown"):
        return _text_document(path, fmt, size)
    if fmt == "EML":
        with open(path, "rb") as f:
            head = email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(f.read(65536))
        meta = {k: str(head[h]) for k, h in (("title", "Subject"), ("author", "From"), ("created", "Date"))
                if head[h] is not None}
        return Probe(fmt, 1, None, meta, (meta["title"],) if "title" in meta else ())
    return Probe(fmt, _count_messages(path))


def _office(path: str, fmt: str, shown: str) -> Probe:
    with docread.check_zip(path, shown) as z:
        meta = docread.core_properties(z)
        names = z.namelist()
        pages: int | None = None
        words: int | None = None
        outline: tuple[str, ...] = ()
        workbook = None
        note = ""
        if fmt == "PPTX":
            pages = sum(1 for n in names if re.fullmatch(r"ppt/slides/slide\d+\.xml", n))
        elif fmt == "XLSX":
            workbook = sheets.probe_workbook(z, shown)
            outline = tuple(s.name for s in workbook.sheets)
            pages = len(outline)
        else:
            outline, lead, words, note = _docx_outline(z)
            pages = None if note else len(outline) + (1 if lead or not outline else 0)
    return Probe(fmt, pages, words, {k: str(v) for k, v in meta.items()}, tuple(outline), workbook=workbook,
                 note=note)


@dataclass
class _Para:
    style: str | None = None
    texts: list[str] = field(default_factory=list)
    in_t: bool = False


def _docx_outline(z: Any) -> tuple[tuple[str, ...], bool, int | None, str]:
    """The headings of word/document.xml (indented by level, at most MAX_HEADINGS), whether text comes before
    the first, its word count (None unless read whole), and a note for the summary when it was not read whole.

    Linear in the part's first DOCX_XML_BYTES and within xmlscan.PROBE_SECONDS (see xmlscan)."""
    part = xmlscan.member_prefix(z, "word/document.xml", DOCX_XML_BYTES)
    if part is None:
        return (), False, None, ""
    found: list[str] = []
    lead = False
    words = 0
    paras: list[_Para] = []
    pending: list[str] = []

    def flush() -> None:  # a tag ends a run of text: count its words (tags separate words)
        nonlocal words
        if pending:
            words += len("".join(pending).split())
            pending.clear()

    def start(name: str, attrs: dict[str, str]) -> None:
        flush()
        if name == "w:p":
            paras.append(_Para())
        elif paras and name == "w:pStyle":
            paras[-1].style = attrs.get("w:val")
        elif paras and name == "w:t":
            paras[-1].in_t = True

    def end(name: str) -> None:
        nonlocal lead
        flush()
        if paras and name == "w:t":
            paras[-1].in_t = False
        elif paras and name == "w:p":
            para = paras.pop()
            style = para.style or ""
            if not (style.startswith("Heading") or style == "Title"):
                lead = lead or (not found and any(t.strip() for t in para.texts))
            elif len(found) < MAX_HEADINGS:
                level = style.removeprefix("Heading")
                indent = "  " * (int(level) - 1) if level.isdigit() and 1 < int(level) < 10 else ""
                found.append(indent + "".join(para.texts))

    def text(data: str) -> None:
        pending.append(data)
        if paras and paras[-1].in_t:
            paras[-1].texts.append(data)

    data, whole = part
    outcome = xmlscan.scan(data, xmlscan.Handler(start, end, text), complete=whole,
                           deadline=time.monotonic() + xmlscan.PROBE_SECONDS)
    flush()
    if outcome is xmlscan.Scan.TIMED_OUT:
        return (), False, None, f"headings not read (the document's XML took over {xmlscan.PROBE_SECONDS:g} s)"
    if outcome is xmlscan.Scan.CUT:
        cut = f"the first {DOCX_XML_BYTES // 2**20} MB" if not whole else "the part that parses"
        return tuple(found), lead, None, f"headings from {cut} of the document's XML only"
    return tuple(found), lead, words, ""


def _text_document(path: str, fmt: str, size: int) -> Probe:
    with open(path, "rb") as f:
        text = f.read(TEXT_READ_BYTES).decode("utf-8-sig", "replace")
    whole = size <= TEXT_READ_BYTES
    if fmt == "HTML":
        parsed = docread.html_text(text)
        outline = tuple(s["label"] for s in parsed.sections if s["label"])
        words = sum(len(s["text"].split()) for s in parsed.sections)
        meta = {"title": parsed.title.strip()} if parsed.title.strip() else {}
        sections = len(parsed.sections)
    else:
        heads = [m.group(2) for line in text.splitlines() if (m := docread.MD_HEADING.match(line))]
        outline = tuple(heads)
        words = len(text.split())
        meta = {"title": heads[0]} if heads else {}
        sections = len(heads) + (0 if text.lstrip().startswith("#") else 1)
    return Probe(fmt, sections if whole else None, words if whole else None, meta, outline[:200])


def _count_messages(path: str) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(2**20):
            count += (last + chunk).count(b"\nFrom ")
            last = chunk[-1:]
    return count


# ---- FieldInfo ----------------------------------------------------------------------------------------
def _detail(p: Probe, size: int) -> tuple[str, int]:
    word = docread.PAGE_WORD[p.format]
    parts = [p.format]
    if p.pages is not None:
        parts.append(f"{p.pages:,} {word}{'' if p.pages == 1 else 's'}")
    if p.words is not None:
        parts.append(f"~{human_count(p.words)} words")
    for key in ("title", "author", "created", "modified"):
        if p.meta.get(key):
            parts.append(f"{key} {clip(p.meta[key], 80)!r}")
    text = ", ".join(parts)
    if p.note:
        text += f"; {p.note}"
    sampled = p.checked is not None and p.pages is not None
    of = f" (of {p.checked:,} checked of {p.pages:,})" if sampled else ""
    if p.textless:
        nums = ", ".join(str(n) for n in p.textless[:20]) + (", ..." if len(p.textless) > 20 else "")
        text += (f"; no text layer on page{'s' if len(p.textless) > 1 else ''} {nums}{of} (scanned: send "
                 f".pages[i].image() to a vision sub-call, or read it with .pages[i].ocr() where tesseract is "
                 f"installed)")
    elif sampled:
        text += f"; a text layer on each of the {p.checked:,} pages checked of {p.pages:,}"
    if p.words is not None:
        tokens = round(p.words * 1.35)
    elif p.format in ("PDF", "PPTX") and p.pages is not None:
        tokens = p.pages * (TOKENS_PER_PAGE if p.format == "PDF" else TOKENS_PER_SLIDE)
    else:
        tokens = round(size / CHARS_PER_TOKEN)
    return text, tokens


OLD_WORKBOOKS = (".xlsb",)  # refused in one sentence: no bounded reading of its sheets (docs/decisions)
TEXT_FORMATS = ("Markdown", "HTML")  # plain text files: one alone binds as text, in a folder of documents as one


def for_file(name: str, where: str, size: int, source: Any) -> Field | None:
    """A document Field for a document file, or None for another file (a lone Markdown or HTML file
    included: it binds as text, a `str` the model's code slices directly). An XLSX or XLS workbook is kind
    "workbook": a Document whose sheets are also sql() relations, named in the summary."""
    if os.path.splitext(where)[1].lower() in OLD_WORKBOOKS:
        raise InputError(f"{os.path.basename(where)} is an Excel binary workbook (.xlsb) whose sheets cannot be "
                         "bounded before they are read; save it as .xlsx (File > Save As) and bind that.")
    if docread.format_of(where) in (None, *TEXT_FORMATS):
        return None
    p = probe(where, size, os.path.basename(where))
    detail, tokens = _detail(p, size)
    if p.workbook is not None:
        entries = sheets.plan_entries(name, [(os.path.basename(where), p.workbook)], folder=False)
        info = FieldInfo(name, "workbook", "Document", size_bytes=size, rows=p.pages, est_tokens=tokens,
                         path=where, detail=detail + "\n  " + sheets.describe_entries(entries, name, folder=False))
        return Field(name, source, info, lambda: docread.Document(where, name, sheets=entries), read_paths=(where,),
                     plan={"sheets": entries})
    hidden = len(p.outline) - OUTLINE_SHOWN
    more = [f"... {hidden:,} more (doc.outline lists them after reading)"] if hidden > 0 else []
    info = FieldInfo(name, "document", "Document", size_bytes=size, rows=p.pages, est_tokens=tokens,
                     preview="\n".join([*(clip(h, 100) for h in p.outline[:OUTLINE_SHOWN]), *more]),
                     truncated=len(p.outline) > OUTLINE_SHOWN, path=where, detail=detail)
    return Field(name, source, info, lambda: docread.Document(where, name), read_paths=(where,))


def for_folder(name: str, root: str, files: Sequence[tuple[str, int]], source: Any, *,
               read_paths: tuple[str, ...] = (), truncated: bool = False) -> Field | None:
    """A folder (or glob) whose files are all documents, as one lazy mapping; None otherwise.

    `files` are (path relative to `root`, size) pairs; `read_paths` default to the root folder. A folder
    of XLSX and XLS workbooks only is kind "workbooks": their sheets (of the first MAX_PROBED_WORKBOOKS) are
    sql() relations, each workbook probed at bind time (sheet names and shapes).
    """
    if not files or any(docread.format_of(rel) is None for rel, _ in files):
        return None
    by_format: dict[str, int] = {}
    for rel, _ in files:
        fmt = docread.format_of(rel) or "?"
        by_format[fmt] = by_format.get(fmt, 0) + 1
    total = sum(size for _, size in files)
    plus = "+" if truncated else ""
    detail = f"{len(files):,}{plus} documents: " + ", ".join(f"{n:,} {f}" for f, n in
                                                            sorted(by_format.items(), key=lambda kv: -kv[1]))
    detail += "; each is read on first access"
    keys = [rel for rel, _ in files]
    entries: list[dict[str, Any]] = []
    kind = "documents"
    if set(by_format) <= {"XLSX", "XLS"}:
        kind = "workbooks"
        probed = files[:sheets.MAX_PROBED_WORKBOOKS]
        books = [(rel, probe(os.path.join(root, *rel.split("/")), size, rel).workbook) for rel, size in probed]
        entries = sheets.plan_entries(name, [(rel, b) for rel, b in books if b is not None], folder=True)
        detail += "\n  " + sheets.describe_entries(entries, name, folder=True)
        if len(files) > len(probed):
            detail += (f"\n  the sheets of the first {len(probed):,} workbooks are relations; read the others "
                       f"with inputs[{name!r}][path].table(sheet)")
    elif by_format.keys() & {"XLSX", "XLS"}:
        detail += ("\n  its workbooks are documents here (sheets as pages, or .table(sheet)); bind them alone "
                   "(a glob of *.xlsx or *.xls) to query their sheets with sql()")
    info = FieldInfo(name, kind, "DocumentFolder", size_bytes=total, rows=len(files),
                     est_tokens=round(total / CHARS_PER_TOKEN), preview="\n".join(keys[:FOLDER_SHOWN]),
                     truncated=truncated, path=root, detail=detail)
    return Field(name, source, info, lambda: docread.DocumentFolder(root, keys, name, entries),
                 read_paths=read_paths or (root,), plan={"files": keys, "sheets": entries})


# ---- the family -----------------------------------------------------------------------------------------
def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    raise InputError(f"Input {name!r}: pass a document as pathlib.Path(...).")  # paths come through files


def _crossing(field: Field) -> dict[str, Any] | None:
    return {"how": "path", "path": field.info.path, "plan": field.plan}


def _reopen(name: str, spec: Mapping[str, Any]) -> Any:
    plan = spec.get("plan") or {}
    if spec["kind"] in ("document", "workbook"):
        return docread.Document(spec["path"], name, sheets=plan.get("sheets", ()))
    return docread.DocumentFolder(spec["path"], list(plan["files"]), name, plan.get("sheets", ()))


FAMILY = Family("documents", ("document", "documents", "workbook", "workbooks"), _describe, crossing=_crossing,
                reopen=_reopen, tables=("workbook", "workbooks"), sql=lambda value: sheets.catalogue(value.sheets),
                relations=lambda value: value.relations())


__all__ = ["DOCX_XML_BYTES", "FAMILY", "MAX_HEADINGS", "FOLDER_SHOWN", "OLD_WORKBOOKS", "OUTLINE_SHOWN", "TEXT_FORMATS", "TEXT_READ_BYTES", "TOKENS_PER_PAGE",
           "TOKENS_PER_SLIDE", "Probe", "for_file", "for_folder", "probe"]
