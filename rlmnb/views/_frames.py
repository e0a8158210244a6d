"""DataFrames in a turn's output: drawn as the notebook draws a DataFrame, where the model read text.

The sandbox notes each pandas DataFrame or Series that the model's code prints (`sql()` results among
them) beside the exact text it wrote (`CodeExecuted.tables`, made by `rlmnb._sandbox.runner.table_record`).
`output_parts` cuts a turn's stdout where those texts are; `frame_html` draws one record as a styled,
scrollable table with its shape, and keeps the text the model read one click away. A text that is not
found in the output (clipped away) stays text. The JupyterLab extension has the twin (extension/src/frames.ts).
Inline styles only, no scripts: the pieces go into saved notebooks and exported pages.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["frame_html", "output_parts", "shape_text"]

WRAP = "overflow:auto;max-height:28em;margin:3px 0;max-width:100%"
TABLE = ("border-collapse:collapse;border:none;font-size:12px;font-variant-numeric:tabular-nums;"
         "color:var(--jp-ui-font-color1,inherit);table-layout:auto")
CELL = "padding:3px 10px;text-align:right;vertical-align:top;white-space:pre;border:none"
HEAD = f"{CELL};font-weight:bold;vertical-align:bottom;border-bottom:1px solid var(--jp-border-color1,rgba(127,127,127,0.5))"
STRIPE = "background:var(--jp-rendermime-table-row-background,rgba(127,127,127,0.08))"


def output_parts(stdout: str, tables: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """`stdout` as ("text", str) and ("table", record) parts in order: each record replaces the first place,
    after the previous one, where its text was written. Blank text between parts is dropped."""
    parts: list[tuple[str, Any]] = []
    at = 0
    for table in tables:
        text = table.get("text") or ""
        found = stdout.find(text, at) if text else -1
        if found < 0:
            continue
        if stdout[at:found].strip():
            parts.append(("text", stdout[at:found]))
        parts.append(("table", table))
        at = found + len(text)
    if stdout[at:].strip() or not parts:
        parts.append(("text", stdout[at:]))
    return parts


def shape_text(table: dict[str, Any]) -> str:
    """"1,000 rows × 3 columns (the first 50 rows shown)", as pandas says a frame's shape."""
    rows, cols = (int(n) for n in table.get("shape") or (len(table["rows"]), len(table["columns"])))
    text = f"{rows:,} row{'' if rows == 1 else 's'} × {cols:,} column{'' if cols == 1 else 's'}"
    cut = [f"the first {len(table['rows']):,} rows" if len(table["rows"]) < rows else "",
           f"the first {len(table['columns']):,} columns" if len(table["columns"]) < cols else ""]
    shown = " and ".join(c for c in cut if c)
    return text + (f" ({shown} shown)" if shown else "")


def frame_html(table: dict[str, Any], *, pre_style: str, muted: str) -> str:
    """One recorded DataFrame: its table (header row, index in bold, striped rows, scrolls when large), its
    shape, and the text the model read in a closed <details> (`pre_style`, `muted`: the views' styles)."""
    esc = html.escape
    head = "".join(f'<th style="{HEAD}">{esc(str(c))}</th>' for c in table["columns"])
    body = []
    for n, (index, row) in enumerate(zip(table["index"], table["rows"], strict=False)):
        stripe = f' style="{STRIPE}"' if n % 2 == 0 else ""
        cells = "".join(f'<td style="{CELL}">{esc(str(v))}</td>' for v in row)
        body.append(f'<tr{stripe}><th style="{CELL};font-weight:bold">{esc(str(index))}</th>{cells}</tr>')
    return (f'<div class="rlmnb-frame" data-shape="{esc("x".join(str(n) for n in table.get("shape") or []))}">'
            f'<div style="{WRAP}"><table style="{TABLE}"><thead><tr><th style="{HEAD}"></th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>'
            f'<details><summary style="cursor:pointer;{muted};font-size:11px">{esc(shape_text(table))} · '
            f'as text (what the model read)</summary><pre style="{pre_style}">{esc(table["text"])}</pre></details>'
            f'</div>')
