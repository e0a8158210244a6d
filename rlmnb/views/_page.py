"""A run as one HTML file: the JupyterLab extension's viewer inlined, so the page works offline, with no kernel.

`viewer_page` writes the trajectories (whole: nothing clipped), the extension's viewer script and style sheet
(built with the extension: `viewer.js` and `viewer.css` beside its `package.json`, see
extension/viewer.build.js) and JupyterLab's theme colours, light or dark as the reader's system is, into one
page: meters, the trace panel (search, sort, filter, timeline), copy buttons and the tree, as in JupyterLab.
Under each viewer sits the script-free tree (`render_html`), which readers without scripts see and which
stays if the viewer cannot run. Where the viewer was not built, the page is that static tree alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlmnb.events import Trajectory
from rlmnb.views._answer import markdown_html
from rlmnb.views._format import clip
from rlmnb.views._html import html_page, render_html
from rlmnb.views._mime import compact_trajectory

__all__ = ["page_title", "viewer_assets", "viewer_page"]

_EXTENSION = "rlmnb-jupyterlab"
_LIMIT = 1 << 62  # "keep everything" for compact_trajectory


def viewer_assets() -> tuple[str, str] | None:
    """The viewer's script and style sheet, from this checkout's extension build or the installed extension
    (Jupyter's labextensions folders); None when neither has them."""
    folders = [Path(__file__).resolve().parents[1] / "labextension"]
    try:
        from jupyter_core.paths import jupyter_path

        folders += [Path(p) / _EXTENSION for p in jupyter_path("labextensions")]
    except ImportError:  # no Jupyter here: only the checkout's build can serve
        pass
    for folder in folders:
        script, style = folder / "viewer.js", folder / "viewer.css"
        if script.is_file() and style.is_file():
            return script.read_text(encoding="utf-8"), style.read_text(encoding="utf-8")
    return None


def _script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: no "<" can close it."""
    return json.dumps(value, ensure_ascii=False, default=str).replace("<", "\\u003c")


def _answers_markdown(trajectory: Trajectory) -> dict[str, str]:
    """Each text answer's HTML (raw HTML in the text escaped), which the viewer shows as the extension would."""
    out: dict[str, str] = {}
    for event in trajectory.events:
        answer = getattr(event, "answer", None)
        if event.kind in ("run_finished", "submitted") and isinstance(answer, str) and answer not in out:
            rendered = markdown_html(answer)
            if rendered is not None:
                out[answer] = rendered
    return out


def viewer_page(runs: Sequence[tuple[Trajectory, str]], title: str) -> str:
    """One standalone page of `runs` ((trajectory, heading) pairs, shown in order), with the extension's viewer
    inlined when it was built (see the module's docs), else the static tree.

    Args:
        runs: the trajectories and each one's heading ("RLM", "RLM run 2 of 3").
        title: the page's title.

    Returns:
        The page, `<!doctype html>` to `</html>`.
    """
    assets = viewer_assets()
    blocks, calls = [], []
    for i, (trajectory, heading) in enumerate(runs):
        static = render_html(trajectory, title=heading)
        if assets is None:
            blocks.append(static)
            continue
        blocks.append(f'<div class="rlmnb-Trajectory" id="rlmnb-run-{i}">{static}</div>'
                      f'<script type="application/json" id="rlmnb-data-{i}">'
                      f'{_script_json(compact_trajectory(trajectory, call_chars=_LIMIT, text_chars=_LIMIT))}</script>'
                      f'<script type="application/json" id="rlmnb-markdown-{i}">'
                      f'{_script_json(_answers_markdown(trajectory))}</script>')
        calls.append(i)
    body = '<hr style="margin:24px 0;opacity:0.3">'.join(blocks)
    if assets is None:
        return html_page(body, title)
    script, style = assets
    start = ("(function(){var read=function(id){return JSON.parse(document.getElementById(id).textContent)};"
             f"{_script_json(calls)}.forEach(function(i){{var root=document.getElementById('rlmnb-run-'+i);"
             "try{rlmnbViewer.render(read('rlmnb-data-'+i),root,read('rlmnb-markdown-'+i))}"
             "catch(e){root.insertAdjacentHTML('afterbegin','<p style=\"color:var(--jp-error-color1)\">'+"
             "'The interactive viewer could not start; the tree below is the static one.</p>')}})})();")
    inline = script.replace("</script", "<\\/script")  # nothing in it may close its element
    return html_page(body, title, style=style, script=f"{inline}\n{start}")


def page_title(trajectory: Trajectory, heading: str = "RLM") -> str:
    """"RLM: <the question's start>", a page's title for one run."""
    started = next((e for e in trajectory.events if e.kind == "run_started"), None)
    question = clip(str(getattr(started, "question", "") or ""), 80).replace("\n", " ")
    return f"{heading}: {question}"
