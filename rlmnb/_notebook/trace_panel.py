"""The live widget's trace panel: search, sort and filter every sub-call of the run, and its timeline.

The same controls, words and picture as the JupyterLab extension's trace panel (extension/src/trace.ts).
Two toolbars, one shown:

- with rlmnb's JupyterLab extension, an HTML toolbar with the extension's own elements and classes (so it looks
  and measures the same as the finished view's), drawn once and never redrawn (a redraw would drop what the
  user typed). The extension (live.ts) keeps the search, sort, filter and timeline chosen while the run goes on
  and its finished view opens with them (the kernel reads no front-end message until the cell ends, so the
  list itself waits for the end, and says so);
- without it, ipywidgets controls, disabled with the reason until the run ends, then acting through the kernel.

Nothing is computed per event: the list and the timeline are built when a control changes or when
`refresh()` is called.
"""

from __future__ import annotations

import html
from typing import Any

from rlmnb.views._actions import FRAME_CODE, insert_button
from rlmnb.views._html import call_html
from rlmnb.views._timeline import timeline_svg
from rlmnb.views._trace import FILTERS, SORTS, call_tags, search_scope, select_calls, slow_threshold

__all__ = ["CHOICE_REASON", "WAIT_REASON", "TracePanel", "live_toolbar_html"]

SHOWN = 50  # calls listed at a time


# why the live toolbar waits: the kernel runs the cell and reads the controls' messages only after it
WAIT_REASON = "search, sort, filter and timeline work once the run has ended (the kernel is busy with it)"
# what the extension's live toolbar says under a choice made while the run goes on (extension/src/live.ts)
CHOICE_REASON = "kept: the list shows when the run ends (the kernel is busy with it)"

FRAME_TITLE = "insert a cell below with this run's sub-calls as a pandas DataFrame"


def _select(options: dict[str, Any], cls: str, choice: str, label: str) -> str:
    items = "".join(f'<option value="{html.escape(key)}">{html.escape(text)}</option>'
                    for key, (text, _) in options.items())
    return (f'<select class="rlmnb-select {cls}" data-rlmnb-choice="{choice}" aria-label="{label}">{items}'
            f'</select>')


def live_toolbar_html(run_id: str) -> str:
    """The extension's trace toolbar (extension/src/trace.ts: the same elements, classes and words), for the run
    `run_id` while it goes on. Hidden unless rlmnb's extension is there to act on it (its style sheet shows it);
    the extension keeps each choice for the finished view of that run."""
    search = ('<input type="search" class="rlmnb-search-input" data-rlmnb-choice="search" '
              'placeholder="search the sub-calls" aria-label="search sub-calls" data-lm-suppress-shortcuts="true">')
    return (f'<div class="rlmnb-toolbar rlmnb-live-toolbar" data-rlmnb-run="{html.escape(run_id)}" '
            f'style="display:none">{search}{_select(SORTS, "rlmnb-sort", "sort", "sort sub-calls")}'
            f'{_select(FILTERS, "rlmnb-filter", "filter", "filter sub-calls")}'
            f'<button type="button" class="rlmnb-button rlmnb-timeline-toggle" data-rlmnb-choice="timeline">timeline'
            f'</button>{insert_button("open as DataFrame", FRAME_TITLE, FRAME_CODE, cls="rlmnb-button rlmnb-insert")}'
            f'<span class="rlmnb-search-status rlmnb-muted"></span></div>')


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
        # a cell's kernel reads no front-end message until the cell ends: the controls cannot act during the
        # run, so they are made disabled, saying why (enable() at the end)
        wait: dict[str, Any] = {"disabled": True, "tooltip": WAIT_REASON}
        self.search = w.Text(placeholder="search the sub-calls", layout=w.Layout(width="260px"),
                             continuous_update=False, **wait)
        self.sort = w.Dropdown(options=[(label, key) for key, (label, _) in SORTS.items()], value="order",
                               layout=small, **wait)
        self.keep = w.Dropdown(options=[(label, key) for key, (label, _) in FILTERS.items()], value="all",
                               layout=small, **wait)
        self.timeline = w.ToggleButton(value=False, description="timeline", layout=w.Layout(width="auto",
                                                                                             height="28px"), **wait)
        self.scope = owner._html()
        self.picture = owner._html()
        self.results = owner._html()
        # the extension's toolbar, drawn once (see the module's docs); the kernel's controls beside it, one shown
        self.front = owner._html(live_toolbar_html(owner.tree.root_id or ""))
        self.toolbar = w.HBox([self.search, self.sort, self.keep, self.timeline], layout=owner._layout)
        self.toolbar.add_class("rlmnb-kernel-toolbar")
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
            self.box.children = [self.front, self.toolbar, self.scope, self.picture, self.results]
        self._count = count
        self.search.placeholder = f"search the {count:,} sub-call{'' if count == 1 else 's'}"
        self.scope.value = (f'<div style="font-size:11px;line-height:1.45;opacity:0.72;margin:2px 0">searches the whole prompt, reply and error '
                            f'of each of the {count:,} sub-call{"" if count == 1 else "s"} · as a DataFrame: '
                            f'<code>_rlm.to_frame()</code> · <span class="rlmnb-live-wait">{WAIT_REASON}</span>'
                            f'</div>')

    def enable(self) -> None:
        """The run has ended: search, sort, filter and the timeline act from now on."""
        if self._built:
            for control in (self.search, self.sort, self.keep, self.timeline):
                with control.hold_sync():  # one message per control
                    control.disabled = False
                    control.tooltip = None

    def refresh(self) -> None:
        """Redraw from the tree as it is now (shown once the run has sub-calls)."""
        calls = self.owner.tree.all_call_views()
        if not calls:
            return
        if not self._built:
            self._build()
        if not self.box.children:
            self.box.children = [self.front, self.toolbar, self.scope, self.picture, self.results]
        self.search.placeholder = f"search the {len(calls):,} sub-call{'' if len(calls) == 1 else 's'}"
        self.scope.value = (f'<div style="font-size:11px;line-height:1.45;opacity:0.72;margin:2px 0">{search_scope(calls)} · as a DataFrame: '
                            f'<code>_rlm.to_frame()</code></div>')
        query, sort, keep = self.search.value, self.sort.value, self.keep.value
        found = select_calls(calls, query=query, sort=sort, keep=keep)
        shown = {c["call_id"] for c in found} if query.strip() or keep != "all" else None  # the rest faded
        self.picture.value = timeline_svg(self.owner.tree.events, shown) if self.timeline.value else ""
        if not query.strip() and sort == "order" and keep == "all":
            self.results.value = ""
            return
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
            head += f" · {FILTERS[keep][0]}"
        if len(found) > SHOWN:
            head += f", the first {SHOWN} shown"
        self.results.value = f'<div class="rlmnb-search-status" style="font-size:12px">{head}</div>{"".join(rows)}'

    def close(self) -> None:
        self.box.close()
        if not self._built:
            return
        for widget in (self.search, self.sort, self.keep, self.timeline, self.front, self.scope, self.picture,
                       self.results, self.toolbar):
            widget.close()
