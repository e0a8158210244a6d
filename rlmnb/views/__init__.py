"""Views of a run: one view model (the fold of its events) and the small renderers that read it.

`fold.RunTree` folds a trajectory's events into a run tree (runs > turns > sub-call groups > calls,
child runs under their turn); `html`, `text` and `mime` draw it; the live widget (`rlmnb._notebook.widget`)
and the JupyterLab extension show the same structure. Nothing here needs a kernel or a widget
library, so the CLI, saved notebooks and exported pages share it.

Modules: `format` (numbers, times, clipping), `fold` (RunTree: its nodes, folding and readings),
`html` (the HTML pieces and `render_html`), `frames` (DataFrames the code printed, as tables), `text` (`summary_line`, `render_text`), `mime`
(`mime_bundle`, `compact_trajectory`, `TrajectoryView`).
"""

from __future__ import annotations

from rlmnb.views._fold import RunTree
from rlmnb.views._format import clip, percentile
from rlmnb.views._html import render_html
from rlmnb.views._mime import MIME_TYPE, TrajectoryView, compact_trajectory, mime_bundle
from rlmnb.views._text import render_text, summary_line

__all__ = ["MIME_TYPE", "RunTree", "TrajectoryView", "clip", "compact_trajectory", "mime_bundle", "percentile",
           "render_html", "render_text", "summary_line"]
