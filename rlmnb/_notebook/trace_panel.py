"""The live widget's trace panel: search, sort and filter every sub-call of the run, and its timeline.

The same controls, words and picture as the JupyterLab extension's trace panel (extension/src/trace.ts),
from ipywidgets core widgets. Nothing is computed per event: the list and the timeline are built when a
control changes (front-end messages are handled once the cell has finished) or when `refresh()` is called.
"""

from __future__ import annotations

from typing import Any

from rlmnb.views._actions import FRAME_CODE, insert_button
from rlmnb.views._html import call_html
from rlmnb.views._timeline import timeline_svg
from rlmnb.views._trace import FILTERS, SORTS, call_tags, search_scope, select_calls, slow_threshold

__all__ = ["TracePanel"]

SHOWN = 50  # calls listed at a time


class TracePanel:
    """Toolbar (search, sort, filter, timeline), the search's scope, the timeline and the matching calls."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.box = owner._vbox([])
        self._count = 0
        self._built = False  # the controls are made with the first sub-call: a run shows up sooner without them

    def _build(self) -> None:
        import ipywidgets as w

        owner = self.owner
        self._built = True
        small = w.Layout(width="auto")
        self.search = w.Text(placeholder="search the sub-calls", layout=w.Layout(width="260px"),
                             continuous_update=False)
        self.sort = w.Dropdown(options=[(label, key) for key, (label, _) in SORTS.items()], value="order",
                               layout=small)
        self.keep = w.Dropdown(options=[(label, key) for key, (label, _) in FILTERS.items()], value="all",
                               layout=small)
        self.timeline = w.ToggleButton(value=False, description="timeline", layout=w.Layout(width="auto",
                                                                                             height="28px"))
        self.scope = owner._html()
        self.picture = owner._html()
        self.results = owner._html()
        # a front-end button (views/actions.py): it inserts its cell while the run goes on
        self.frame = owner._html(insert_button("open as DataFrame", "insert a cell below with this run's sub-calls as "
                                               "a pandas DataFrame", FRAME_CODE))
        self.toolbar = w.HBox([self.search, self.sort, self.keep, self.timeline, self.frame], layout=owner._layout)
        for control in (self.search, self.sort, self.keep, self.timeline):
            control.observe(lambda _change: self.refresh(), names="value")

    def show(self, count: int) -> None:
        """While the run goes on: the toolbar as soon as there are sub-calls, with their count (cheap: no list
        is built; the live tree holds every prompt whole, so the search reads them all)."""
        if count == 0 or (self._built and self.box.children and self._count == count):
            return
        if not self._built:
            self._build()
        if not self.box.children:
            self.box.children = [self.toolbar, self.scope, self.picture, self.results]
        self._count = count
        self.search.placeholder = f"search the {count:,} sub-call{'' if count == 1 else 's'}"
        self.scope.value = (f'<div style="font-size:11px;opacity:0.72">searches the whole prompt, reply and error '
                            f'of each of the {count:,} sub-call{"" if count == 1 else "s"} · as a DataFrame: '
                            f'<code>_rlm.to_frame()</code></div>')

    def refresh(self) -> None:
        """Redraw from the tree as it is now (shown once the run has sub-calls)."""
        calls = self.owner.tree.all_call_views()
        if not calls:
            return
        if not self._built:
            self._build()
        if not self.box.children:
            self.box.children = [self.toolbar, self.scope, self.picture, self.results]
        self.search.placeholder = f"search the {len(calls):,} sub-call{'' if len(calls) == 1 else 's'}"
        self.scope.value = (f'<div style="font-size:11px;opacity:0.72">{search_scope(calls)} · as a DataFrame: '
                            f'<code>_rlm.to_frame()</code></div>')
        self.picture.value = timeline_svg(self.owner.tree.events) if self.timeline.value else ""
        query, sort, keep = self.search.value, self.sort.value, self.keep.value
        if not query.strip() and sort == "order" and keep == "all":
            self.results.value = ""
            return
        found = select_calls(calls, query=query, sort=sort, keep=keep)
        slow = slow_threshold(calls)
        rows = []
        for c in found[:SHOWN]:
            tags = call_tags(c, slow)
            row = call_html(c, actions=True)
            if "slow" in tags:
                row = row.replace("</summary>", ' <span style="color:#8e24aa">slow</span></summary>', 1)
            rows.append(row)
        noun = "matching sub-call" if query.strip() else "sub-call"
        head = f"{len(found):,} {noun}{'' if len(found) == 1 else 's'}"
        if keep != "all":
            head += f" ({FILTERS[keep][0]})"
        if len(found) > SHOWN:
            head += f", the first {SHOWN} shown"
        self.results.value = f'<div class="rlmnb-search-status" style="font-size:12px">{head}</div>{"".join(rows)}'

    def close(self) -> None:
        self.box.close()
        if not self._built:
            return
        for widget in (self.search, self.sort, self.keep, self.timeline, self.frame, self.scope, self.picture,
                       self.results, self.toolbar):
            widget.close()
