"""Binding a run's inputs and rendering the InputsSummary the root model reads.

Entry points: `bind_inputs(values, config)` describes every value by its family and renders the
summary; `render_summary(infos, config)` renders FieldInfos. Invariant: the summary stays under
`config.summary_max_tokens`, shrinking previews, then column lists, then details to fit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import InputError
from rlmnb._ground.prompts import load, render
from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens
from rlmnb.inputs._previews import NAME_CHARS, human_bytes, human_count, plural
from rlmnb.inputs._records import Field, FieldInfo, InputsSummary, type_name
from rlmnb.inputs._registry import describe, sql_kinds

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig


_TEXT_KINDS = frozenset({"text", "bytes", "text_file", "binary_file", "scalar"})
_VIEW_KINDS = frozenset({"list", "dict", "array", "directory"})

# --------------------------------------------------------------------------------------------
# rendering


@dataclass(frozen=True)
class _Plan:
    """How much of each field to render: preview scale (None: no previews), columns listed, detail line."""

    scale: float | None
    max_cols: int
    detail: bool


def render_summary(infos: Sequence[FieldInfo], config: RLMConfig) -> InputsSummary:
    """The text the root model sees, kept at or under `config.summary_max_tokens` tokens.

    It degrades in steps until it fits: shrink previews, drop them, clip column lists, then describe
    only the first fields and name the rest on one line.
    """
    infos = tuple(infos)
    cap = config.summary_max_tokens
    c = config.max_columns_shown
    has_preview = any(i.preview for i in infos)
    plans = [_Plan(s, c, True) for s in ((1.0, 0.5, 0.25, 0.125) if has_preview else ())]
    plans += [_Plan(None, c, True), _Plan(None, min(c, 8), True), _Plan(None, min(c, 3), True),
              _Plan(None, 0, False)]
    for plan in plans:
        intro = _intro(infos, previews=plan.scale is not None)
        text = _fit(intro, (_render_block(i, plan) for i in infos), cap)
        if text is not None:
            return InputsSummary(infos, text, count_tokens(text))
    return _collapsed(infos, plans[-1], cap)


def _fit(intro: str, blocks: Iterator[str], cap: int) -> str | None:
    parts = [intro]
    used = count_tokens(intro)
    for block in blocks:
        used += count_tokens(block) + 1
        if used > cap:
            return None
        parts.append(block)
    text = "\n".join(parts)
    return text if count_tokens(text) <= cap else None


def _collapsed(infos: tuple[FieldInfo, ...], plan: _Plan, cap: int) -> InputsSummary:
    intro = _intro(infos, previews=False)
    room = cap - count_tokens(intro)
    blocks: list[str] = []
    used = 0
    for info in infos:  # the longest prefix of fully described fields that fits on its own
        block = _render_block(info, plan)
        used += count_tokens(block) + 1
        if used > room:
            break
        blocks.append(block)
    for k in range(len(blocks), -1, -1):
        text = "\n".join([intro, *blocks[:k], _more_line(infos[k:])])
        tokens = count_tokens(text)
        if tokens <= cap:
            return InputsSummary(infos, text, tokens)
    return _hard_clip(infos, "\n".join([intro, _more_line(infos)]), cap)


def _more_line(rest: Sequence[FieldInfo], max_chars: int = 400) -> str:
    names: list[str] = []
    used = 0
    for info in rest:
        entry = f"{clip(info.name, NAME_CHARS)} ({info.kind})"
        if used + len(entry) > max_chars:
            names.append(f"and {len(rest) - len(names):,} others (list(inputs) names them all)")
            break
        names.append(entry)
        used += len(entry) + 2
    return f"... and {len(rest):,} more inputs: " + ", ".join(names)


def _hard_clip(infos: tuple[FieldInfo, ...], text: str, cap: int) -> InputsSummary:
    """Last resort for a tiny cap: the longest prefix of the text that fits."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    clipped = text[:lo]
    return InputsSummary(infos, clipped, count_tokens(clipped))


def _intro(infos: Sequence[FieldInfo], previews: bool) -> str:
    n = len(infos)
    if n == 0:
        return "No inputs are bound; inputs is empty."
    head = "1 input is bound" if n == 1 else f"{n:,} inputs are bound"
    shown = " except the short previews" if previews and any(i.preview for i in infos) else ""
    text = (f"{head} in the sandbox as inputs[name]; {'its' if n == 1 else 'their'} contents are not shown "
            f"here{shown}.")
    if any(i.kind in _VIEW_KINDS for i in infos):
        text += " Lists, dicts, arrays and directories are read-only views: copy before changing them."
    return text + _sql_sentence(infos) + _reading_sentence(infos)


def _reading_sentence(infos: Sequence[FieldInfo]) -> str:
    """The reading primitives (prompts/reading_summary.md), when a text input is longer than a preview shows."""
    long_text = any(i.kind in ("text", "text_file") and (i.size_chars or 0) > 2_000 for i in infos)
    return " " + load("reading_summary").strip() if long_text else ""


def _sql_sentence(infos: Sequence[FieldInfo]) -> str:
    """Which inputs sql() sees (model-facing text in prompts/sql_summary.md, and sql_sheets.md when a
    workbook offers its sheets); "" when none."""
    kinds = sql_kinds()
    names = [i.name for i in infos if i.kind in kinds]
    if not names:
        return ""
    shown: list[str] = []
    used = 0
    for n in names:
        if used + len(n) > 300:
            shown.append(f"and {len(names) - len(shown):,} more")
            break
        shown.append(clip(n, NAME_CHARS))
        used += len(n) + 2
    listed = ", ".join(f"`{n}`" if not n.startswith("and ") else n for n in shown)
    text = " " + render("sql_summary", tables=("the table " if len(names) == 1 else "the tables ") + listed)
    if any(i.kind in ("workbook", "workbooks") for i in infos):
        text += " " + render("sql_sheets")
    return text


def _table_like(info: FieldInfo) -> bool:
    return info.kind in ("table", "arrow") or (info.columns is not None and info.kind != "array")


def _render_block(info: FieldInfo, plan: _Plan) -> str:
    lines = [_header(info)]
    if plan.detail and info.detail:
        lines.append(f"  {info.detail}")
    if _table_like(info) and plan.max_cols > 0 and (info.dtypes or info.more_columns):
        lines.append(_columns_line(info, plan.max_cols))
    if plan.scale is not None and info.preview:
        lines.extend(_preview_lines(info, plan.scale))
    return "\n".join(lines)


def _shown_path(info: FieldInfo) -> str:
    """Only the file or folder name: the provider never learns the user's directory layout, and a
    recorded run replays wherever its files are."""
    return os.path.basename(str(info.path or "").rstrip("/\\")) or "?"


def _header(info: FieldInfo) -> str:
    kind = info.kind
    tokens = f"~{human_count(info.est_tokens)} token{'' if info.est_tokens == 1 else 's'}"
    size = human_bytes(info.size_bytes) if info.size_bytes is not None else None
    if kind == "text":
        what, sizes = info.python_type, [f"{info.size_chars or 0:,} chars", tokens]
    elif kind in ("bytes", "text_file", "binary_file"):
        what = info.python_type if kind == "bytes" else f"{info.python_type}, read from {_shown_path(info)}"
        sizes = [size or "", tokens] if kind != "binary_file" else [size or ""]
    elif kind == "directory":
        what = f"read-only mapping of relative path -> str, or bytes for binary files; from {_shown_path(info)}"
        files = f"{info.rows or 0:,}{'+' if info.truncated else ''} file{'' if info.rows == 1 else 's'}"
        sizes = [files, size or "", f"{tokens} if all read"]
    elif kind == "images":
        what = f"read-only mapping of relative path -> ImageFile (.width, .height, .data); from {_shown_path(info)}"
        sizes = [size or "", f"~{human_count(info.est_tokens)} tokens if all sent as images"]
    elif kind in ("document", "documents", "workbook", "workbooks"):
        what = (f"{info.python_type}: .text, .pages, .meta, len(), slicing; read from {_shown_path(info)}"
                if kind == "document" else
                f"{info.python_type}: .pages (one per sheet), .table(sheet), .sheets; read from {_shown_path(info)}"
                if kind == "workbook" else
                f"read-only mapping of relative path -> Document; from {_shown_path(info)}")
        sizes = [size or "", f"~{human_count(info.est_tokens)} tokens if all read"]
    elif kind in ("table", "arrow"):
        what, sizes = info.python_type, [f"{plural(info.rows or 0, 'row')} x {plural(info.columns or 0, 'column')}",
                                         f"~{size}", tokens]
    elif kind == "series":
        dtype = info.dtypes[0][1] if info.dtypes else "?"
        label = f"name {info.dtypes[0][0]!r}, " if info.dtypes and info.dtypes[0][0] else ""
        what, sizes = info.python_type, [plural(info.rows or 0, "row"), f"{label}dtype {dtype}", f"~{size}", tokens]
    elif kind == "array":
        what, sizes = info.python_type, [size or "", tokens]
    elif kind in ("list", "dict"):
        unit = "item" if kind == "list" else "key"
        what, sizes = f"read-only view of a {info.python_type}", [plural(info.rows or 0, unit), tokens]
    elif _table_like(info):
        what, sizes = info.python_type + (f" over {_shown_path(info)}" if info.path else ""), _lazy_sizes(info)
    else:
        what, sizes = info.python_type, []
    return f'inputs["{info.name}"]: {kind} ({what})' + "".join(f", {s}" for s in sizes if s)


def _lazy_sizes(info: FieldInfo) -> list[str]:
    """Sizes of a table that is not in memory: rows (exact, estimated or unknown), bytes on disk, tokens."""
    if info.rows is None:
        rows = "rows unknown"
    elif info.estimated:
        rows = f"~{human_count(info.rows)} rows (estimated)"
    else:
        rows = plural(info.rows, "row")
    size = human_bytes(info.size_bytes) if info.size_bytes is not None else ""
    where = f"{size} on disk" if size and info.path else (f"~{size}" if size else "")
    tokens = f"~{human_count(info.est_tokens)} token{'' if info.est_tokens == 1 else 's'}"
    tokens = "" if info.rows is None and not info.est_tokens else tokens + (" if all read" if info.path else "")
    return [f"{rows} x {plural(info.columns or 0, 'column')}", where, tokens]


def _columns_line(info: FieldInfo, max_cols: int) -> str:
    total = len(info.dtypes) + info.more_columns
    shown = info.dtypes[:max_cols]
    text = "  columns: " + ", ".join(f"{clip(name, NAME_CHARS)} {dtype}" for name, dtype in shown)
    if total > len(shown):
        text += f", ... {total - len(shown):,} more"
    return text


def _preview_lines(info: FieldInfo, scale: float) -> list[str]:
    lines = info.preview.split("\n")

    def cap_of(line: str) -> int:
        return len(line) if scale >= 1 else max(48, int(len(line) * scale))

    if info.kind in _TEXT_KINDS:
        if len(lines) >= 2:
            return [f"  head: {clip(lines[0], cap_of(lines[0]))}",
                    f"  tail: {clip(lines[1], cap_of(lines[1]), keep='tail')}"]
        return [f"  value: {clip(lines[0], cap_of(lines[0]), keep='both')}"]
    if info.kind in ("directory", "documents", "workbooks", "images"):
        keep = lines[: max(1, math.ceil(len(lines) * scale))]
        more = ", ..." if len(keep) < (info.rows or 0) else ""
        return ["  files: " + ", ".join(keep) + more]
    header: list[str] = []
    if _table_like(info):
        header, lines = lines[:1], lines[1:]
    keep = lines[: max(1, math.ceil(len(lines) * scale))]
    width = max((len(line) for line in header + keep), default=0)
    limit = width if scale >= 1 else max(60, int(width * scale))
    label = "row" if _table_like(info) else {"series": "row", "list": "item", "dict": "key",
                                             "document": "heading"}.get(info.kind)
    title = f"  first {plural(len(keep), label)}:" if label else "  preview:"
    return [title] + [f"    {clip(line, limit)}" for line in header + keep]


def bind_inputs(values: Mapping[str, Any], config: RLMConfig) -> tuple[tuple[Field, ...], InputsSummary]:
    """Describe every input (cheaply, by sampling) and render the summary the root model sees."""
    if not isinstance(values, Mapping):
        raise InputError(f"inputs must be a mapping of name -> value (e.g. a dict), got {type_name(values)}.")
    fields = tuple(describe(name, value, config) for name, value in values.items())
    return fields, render_summary([f.info for f in fields], config)


__all__ = ["bind_inputs"]
