"""An answer shown as what it is: text as Markdown, a table as a table, anything else as pretty JSON.

The same three rules as the JupyterLab extension (extension/src/answer.ts), so a run's answer looks the
same in the live widget, the saved HTML and the extension. JSON keeps the key order the run produced.
Markdown is rendered with raw HTML turned off: an answer may quote hostile data, and it stays text.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["TABLE_ROWS", "answer_body_html", "answer_kind", "answer_json", "as_table", "markdown_html"]

TABLE_ROWS = 200  # rows of a table answer shown before "N more rows"
MAX_COLUMNS = 50

_md: Any = None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def as_table(answer: Any) -> tuple[list[str], list[list[Any]]] | None:
    """Columns and rows when the answer is a table (a list of flat records, or equal-length columns)."""
    if isinstance(answer, list) and answer and all(isinstance(row, dict) for row in answer):
        columns: list[str] = []
        for row in answer:
            columns.extend(str(key) for key in row if str(key) not in columns)
            if len(columns) > MAX_COLUMNS:
                return None
        if not all(_scalar(v) for row in answer for v in row.values()):
            return None  # nested records read better as JSON
        return columns, [[row.get(c) for c in columns] for row in answer]
    if isinstance(answer, dict) and 0 < len(answer) <= MAX_COLUMNS and all(isinstance(v, list) for v in answer.values()):
        lists = list(answer.values())
        length = len(lists[0])
        if length and all(len(v) == length and all(_scalar(x) for x in v) for v in lists):
            return [str(k) for k in answer], [list(row) for row in zip(*lists, strict=True)]
    return None


def answer_kind(answer: Any) -> str:
    """"markdown" for text, "table" for tables, "json" for anything else."""
    if isinstance(answer, str):
        return "markdown"
    return "table" if as_table(answer) is not None else "json"


def answer_json(answer: Any) -> str:
    """The answer as indented JSON, keys in the order the run produced them."""
    try:
        return json.dumps(answer, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(answer)


def markdown_html(text: str) -> str | None:
    """Markdown as HTML (raw HTML in the text is escaped, never passed through); None without markdown-it."""
    global _md
    try:
        if _md is None:
            from markdown_it import MarkdownIt

            _md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
        return str(_md.render(text))
    except Exception:  # markdown-it missing or failing: the caller shows plain text, still correct
        return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _table_html(columns: list[str], rows: list[list[Any]], limit: int, pre_style: str) -> str:
    border = "border:1px solid rgba(127,127,127,0.35);padding:2px 8px;text-align:left"
    head = "".join(f'<th style="{border};background:rgba(127,127,127,0.12)">{html.escape(c)}</th>' for c in columns)
    body = []
    for row in rows[:limit]:
        cells = []
        for value in row:
            align = ";text-align:right" if isinstance(value, int | float) and not isinstance(value, bool) else ""
            cells.append(f'<td style="{border}{align}">{html.escape(_cell(value))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (f'<div style="opacity:0.72;font-size:12px">{len(rows) - limit:,} more rows (the run\'s answer has '
            f"them all)</div>") if len(rows) > limit else ""
    return (f'<div style="overflow:auto;max-height:32em"><table style="border-collapse:collapse;font-size:12px;'
            f'margin:4px 0"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>{more}')


def answer_body_html(answer: Any, *, pre_style: str, rows: int = TABLE_ROWS) -> str:
    """The answer's body: rendered Markdown, a table, or JSON in a <pre> (`pre_style`: the views' code style)."""
    kind = answer_kind(answer)
    if kind == "markdown":
        rendered = markdown_html(answer)
        if rendered is not None:
            return f'<div data-kind="markdown" style="margin:2px 0">{rendered}</div>'
        return f'<pre data-kind="markdown" style="{pre_style}">{html.escape(answer)}</pre>'
    if kind == "table":
        table = as_table(answer)
        assert table is not None
        return f'<div data-kind="table">{_table_html(*table, rows, pre_style)}</div>'
    return f'<pre data-kind="json" style="{pre_style}">{html.escape(answer_json(answer))}</pre>'
