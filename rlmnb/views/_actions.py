"""The live widget's buttons: copy a prompt, a reply or a turn's code, insert a code cell below the output.

ipywidgets core has no clipboard or notebook access, and a button click sent to the kernel waits until
the cell has finished. So these buttons are plain HTML inside the widget's HTML pieces, carrying data
attributes that rlmnb's JupyterLab extension acts on from one document-level click handler
(extension/src/live.ts), through the same code path as the buttons of its own view: the clipboard, and
a cell inserted below the output, while the run is still going.

Where the extension is not installed (classic Notebook, VS Code), nothing acts on the attributes:
a copy button then copies through the browser's clipboard API from an inline handler (which steps aside
when the extension has handled the click), and the insert buttons stay hidden (the extension's style
sheet is what shows them), so no button pretends. Only the live widget uses these; the static HTML
(exports, saved notebooks) stays free of handlers and buttons.
"""

from __future__ import annotations

import html

__all__ = ["ACTION", "BLOCK", "FRAME_CODE", "block", "copy_button", "insert_button"]

ACTION = "data-rlmnb-action"  # "copy" or "insert"; the extension's delegated handler looks for it
BLOCK = "data-rlmnb-block"    # a label line and the <pre> its buttons copy or insert
FRAME_CODE = "{run}.to_frame()  # one row per sub-call"  # "{run}": the cell's -o NAME, else _rlm

BUTTON = ("font-size:11px;margin-left:6px;padding:0 5px;cursor:pointer;border-radius:3px;line-height:1.5;"
          "color:var(--jp-ui-font-color1,inherit);background:var(--jp-layout-color1,transparent);"
          "border:1px solid var(--jp-border-color1,rgba(127,127,127,0.5))")

# No extension: copy the block's <pre> with the clipboard API (secure pages: https, localhost), say how it
# went for a moment. Fixed text, no data inside: the copied text is read from the page when clicked.
_COPY_FALLBACK = (
    "if(event.defaultPrevented)return;var b=this,l=b.textContent,"
    "p=b.closest('[data-rlmnb-block]').querySelector('pre'),c=navigator.clipboard;"
    "(c&&p?c.writeText(p.textContent):Promise.reject()).then("
    "function(){b.textContent='copied'},function(){b.textContent='copy failed'}).then("
    "function(){setTimeout(function(){b.textContent=l},1500)})"
)


def copy_button(label: str, title: str = "copy to the clipboard") -> str:
    """A button that copies the text of the <pre> in its block."""
    return (f'<button type="button" class="rlmnb-live-copy" {ACTION}="copy" title="{html.escape(title)}" '
            f'style="{BUTTON}" onclick="{html.escape(_COPY_FALLBACK)}">{html.escape(label)}</button>')


def insert_button(label: str, title: str, code: str | None = None, *, cls: str = "") -> str:
    """A button that inserts a code cell below the output: `code` ("{run}" is the run's variable), or the
    text of the <pre> in its block. Hidden unless rlmnb's JupyterLab extension is there to insert it.
    `cls`: the extension's own classes instead of the inline look (in a toolbar that must match its view's)."""
    data = "" if code is None else f' data-rlmnb-code="{html.escape(code)}"'
    look = f'class="rlmnb-live-insert {cls}"' if cls else f'class="rlmnb-live-insert" style="{BUTTON};display:none"'
    hidden = ' style="display:none"' if cls else ""
    return (f'<button type="button" {look}{hidden} {ACTION}="insert"{data} title="{html.escape(title)}">'
            f'{html.escape(label)}</button>')


def block(label_html: str, pre_html: str) -> str:
    """A label line (with its buttons) and the <pre> they act on, kept together."""
    return f"<div {BLOCK}>{label_html}{pre_html}</div>"
