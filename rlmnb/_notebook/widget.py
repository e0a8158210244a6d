"""The live trajectory widget: header, budget meters and a tree of turns, sub-call groups and child runs.

Built from ipywidgets 8 core widgets only, so it works in JupyterLab 4, Notebook 7 and VS Code
without installing an extension. Events arrive on the run's thread through `on_event`, which only
folds them into a `RunTree` (O(1)); a pusher thread redraws what changed at most every `interval`
seconds (4 times a second by default) and `finish()` flushes the final state. A sub-call group is
one row and its first page of calls, HTML the browser expands by itself (clicks the kernel must handle
wait until the cell has finished); the rest come a page at a time on request, so a run of 10,000 calls
stays light. The buttons to copy a prompt, a reply or a turn's code, insert it in a new cell or open
the run as a DataFrame are HTML too (`rlmnb.views._actions`), handled by rlmnb's JupyterLab extension.
When displayed, the output also carries the static HTML tree, a stable `text/plain` line and the
trajectory JSON, refreshed through the display id when the run ends, so a saved notebook shows the final
state even where widgets cannot render. While the run goes on, those saved parts are refreshed too (each
new turn, and every `snapshot_interval` seconds while events come), with a note saying where the run's
journal is and the line that continues it (`views._snapshot`): a notebook saved, or a kernel lost, mid-run
keeps the tree so far and the way on. rlmnb's JupyterLab extension keeps showing the live widget over such
a refresh, and shows the saved tree where the widget is gone. The widget tree, its pusher thread and its final refresh share
one lock and one RunTree; the trace panel is `trace_panel.py`.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlmnb.events import Event, Trajectory
from rlmnb.views._fold import RunTree
from rlmnb.views._format import more_label, replayed_turn
from rlmnb.views._html import (
    FONT,
    MATH_SAFE,
    MUTED,
    SUMMARY,
    answer_html,
    call_html,
    group_summary_html,
    header_html,
    meters_html,
    render_html,
    resumed_html,
    running_batch,
    turn_html,
)
from rlmnb.views._mime import compact_trajectory
from rlmnb.views._snapshot import Snapshot, snapshot_html, snapshot_text
from rlmnb.views._text import summary_line


def confinement_html(run: dict[str, Any]) -> str:
    """A muted line saying, every run, whether the run's kernel sandbox is confined and what is not enforced."""
    conf = run.get("confinement") or {}
    if not conf or run.get("sandbox") != "kernel":
        return ""
    from rlmnb._sandbox.confinement.policy import Confinement

    found = Confinement.from_dict(conf)
    if found.on:
        allowed = [*found.allow_paths, *found.allow_network]
        text = "sandbox confined (" + found.active + ")" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        text += f"; {found.shortfall()}" if not found.complete else ""
    else:
        text = "sandbox not confined: " + (found.reason or "off")
    return f'<div style="{MUTED};font-size:90%">{html.escape(text)}</div>'


__all__ = ["RunWidget"]

PAGE_SIZE = 50  # calls listed per page of a group
SNAPSHOT_S = 5.0  # a running run's saved output is refreshed at least this often while events come
SNAPSHOT_SHARE = 0.05  # and never takes more than this share of the time (a large run's JSON is megabytes)


class _RunPanel:
    """Header, turns and answer of one run (the root run's parts sit directly in the widget)."""

    def __init__(self, header: Any, body: Any, answer: Any, box: Any) -> None:
        self.header, self.body, self.answer, self.box = header, body, answer, box
        self.turns: list[int] = []


class _TurnPanel:
    def __init__(self, owner: RunWidget) -> None:
        self.html = owner._html()
        self.box = owner._vbox([self.html], owner._turn_layout)
        self.items: list[tuple[str, str]] = []
        self.marked = False  # the resumed run's mark is drawn in this turn


class _GroupPanel:
    """One row per sub-call group, and its calls in a <details> that opens in the browser alone.

    A click that the kernel must handle waits until the cell has finished, so the first page of calls is
    plain HTML the front end expands by itself, with the copy buttons, while the run goes on; it is redrawn
    only while its own calls change (rlmnb's extension keeps what was open open across a redraw, by the
    `data-rlmnb-key` of each <details>). "show N more" (a kernel button) lists the rest, a page at a time.
    """

    def __init__(self, owner: RunWidget, key: str) -> None:
        self.owner, self.key = owner, key
        self.summary = owner._html()
        self.page = owner._html()  # <details>: the first `shown` calls
        self.box = owner._vbox([self.summary])
        self.more: Any = None  # created when there is more than a page
        self.shown = owner.page_size
        self.opened = False  # after a "more" click the list is drawn open
        self._drawn: tuple[int, int, int] | None = None  # (shown, listed, done) of the drawn page

    def draw(self, view: dict[str, Any]) -> None:
        """Keep the page and the "more" button current (cheap when the page's calls have not changed)."""
        owner, total = self.owner, view["started"]
        listed = min(total, self.shown)
        if self._drawn is None or self._drawn[:2] != (self.shown, listed) or self._drawn[2] < listed:
            calls = owner.tree.call_views(self.key, 0, listed)
            done = sum(1 for c in calls if c["done"])
            if self._drawn != (self.shown, listed, done):
                self._drawn = (self.shown, listed, done)
                what = f"{listed:,} call{'' if listed == 1 else 's'}" if listed == total else \
                    f"the first {listed:,} of {total:,} calls"
                self.page.value = (f'<details data-rlmnb-key="calls"{" open" if self.opened else ""} '
                                   f'style="{FONT};margin-left:24px">'
                                   f'<summary style="{SUMMARY};{MUTED}">{what}</summary>'
                                   f'{"".join(call_html(c, actions=True) for c in calls)}</details>')
        children = [self.summary, self.page] if listed else [self.summary]
        if total > self.shown:
            if self.more is None:
                self.more = owner._w.Button(layout=owner._button_layout, tooltip="the kernel lists them once the "
                                            "cell has finished")
                self.more.on_click(lambda _button: self.show_more())
            self.more.description = more_label(owner.page_size, total - self.shown)
            children.append(self.more)
        if tuple(children) != tuple(self.box.children):
            self.box.children = children

    def show_more(self) -> None:
        self.shown += self.owner.page_size
        self.opened = True
        self.draw(self.owner.tree.group_view(self.key))

    def close(self) -> None:
        for widget in (self.summary, self.page, self.box, self.more):
            if widget is not None:
                widget.close()


class RunWidget:
    """A live view of one run tree.

    Use: `view = RunWidget(); view.display(); view.start(); RLM(..., on_event=view.on_event).run(...);
    view.finish()`. `on_event` only folds the event into `view.tree` (O(1), safe from any thread);
    `start()` runs the throttled pusher that draws; `finish()` stops it, draws the final state and
    refreshes the displayed output (widget, static HTML and trajectory JSON).

    Args:
        interval: seconds between redraws while the run goes on (default 0.25: at most 4 per second).
        page_size: calls shown per page when a sub-call group is expanded (default 50).
        embed_trajectory: put the trajectory JSON in the displayed output (default True); it is what
            the JupyterLab extension renders, and for thousands of sub-calls it is megabytes.
        snapshot_interval: seconds between refreshes of the saved output while the run goes on (default 5);
            they happen only when `resume` is set (the magic sets it): it says where the run's journal is.
    """

    def __init__(self, *, interval: float = 0.25, page_size: int = PAGE_SIZE, embed_trajectory: bool = True,
                 snapshot_interval: float = SNAPSHOT_S) -> None:
        opened = time.time()  # the user's wait starts here, before ipywidgets (or litellm) has loaded
        import ipywidgets as w
        from ipywidgets.widgets.widget_string import HTMLStyle

        from rlmnb._notebook.trace_panel import TracePanel

        self._w = w
        self.interval = interval
        self.page_size = page_size
        self.embed_trajectory = embed_trajectory
        self.tree = RunTree()
        self.tree.opened = opened
        self.on_event = self.tree.add  # the subscriber: O(1), no drawing (see the class docs)
        self.pushes = 0
        self.push_seconds = 0.0  # CPU time spent drawing (for benchmarks)
        self.errors: list[str] = []
        # layouts and styles are widgets too: share them so each row costs one message, not three
        self._layout = w.Layout()
        self._html_style = HTMLStyle()
        self._button_layout = w.Layout(width="auto", height="24px", flex="0 0 auto", align_self="flex-start",
                                       margin="2px 0 2px 24px")
        self._turn_layout = w.Layout(border_left="3px solid rgba(127,127,127,0.35)", padding="0 0 0 10px",
                                     margin="6px 0")
        self._child_layout = w.Layout(border_left="3px solid rgba(25,118,210,0.45)", padding="0 0 0 8px",
                                      margin="4px 0 4px 4px")
        self._shared = (self._layout, self._html_style, self._button_layout, self._turn_layout,
                        self._child_layout)
        # the same pieces, in the same order, as the static HTML and the JupyterLab extension: header and
        # question, meters, the trace panel, turns, answer; so nothing moves when the run ends
        self.header = self._html(header_html(self.tree.run_view()))
        self.meters = self._html(_spaced(meters_html(self.tree.meters_view())))
        self.trace = TracePanel(self)
        self.body = self._vbox()
        self.answer = self._html()
        self.box = self._vbox([self.header, self.meters, self.trace.box, self.body, self.answer])
        self.box.add_class("rlmnb-widget")
        for name in MATH_SAFE.split():  # the notebook's math renderer leaves "$0.25 ... $2" alone in here
            self.box.add_class(name)
        self._root_panel = _RunPanel(self.header, self.body, self.answer, self.box)
        self._runs: dict[str, _RunPanel] = {}
        self._turns: dict[tuple[str, int], _TurnPanel] = {}
        self._groups: dict[str, _GroupPanel] = {}
        self._mark: Any = None  # a resumed run's mark (one HTML row), placed where RunTree.resumed_view says
        self._hint: Any = None  # "resuming from ..." above the turns of a resumed run until its mark comes
        self._notices: list[Any] = []  # muted lines under the run (notice())
        self._push_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self.finished = False
        # the running run's saved output (see the module docs): `resume(run_id)` says where its journal is
        self.snapshot_interval = snapshot_interval
        self.resume: Callable[[str], Snapshot | None] | None = None
        self.snapshots = 0
        self._note: Snapshot | None = None  # set while a snapshot is being displayed
        self._snapped: tuple[float, int, int, float] = (0.0, -1, 0, 0.0)  # when, turns, events, its cost

    def _html(self, value: str = "") -> Any:
        return self._w.HTML(value, layout=self._layout, style=self._html_style)

    def _vbox(self, children: list[Any] | None = None, layout: Any = None) -> Any:
        return self._w.VBox(children or [], layout=layout or self._layout)

    # ---- feeding --------------------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        return self.tree.events

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, **options: Any) -> RunWidget:
        """A finished view of a saved or past run."""
        view = cls(**options)
        for event in trajectory.events:
            view.on_event(event)
        view.finish()
        return view

    # ---- lifecycle ------------------------------------------------------------------------------
    def display(self, handle: Any = None) -> RunWidget:
        """Show the widget in the current output, with a display id so `finish()` can refresh it; with
        `handle` (a display already shown, e.g. `placeholder()`'s), the widget takes that output's place."""
        from IPython.display import display

        if handle is not None:
            handle.update(self)
            self._handle = handle
        else:
            self._handle = display(self, display_id=True)  # type: ignore[no-untyped-call]
        return self

    @staticmethod
    def placeholder(models: tuple[str, str] = ("", "")) -> Any:
        """Show the static header (with the models' names) and meters of a run that is starting, at once (one
        message, no widget models to create, ipywidgets not yet imported); returns the display handle the
        widget then takes over."""
        from IPython.display import display

        tree = RunTree()
        tree.opened = time.time()
        tree.expected_models = models
        bundle = {"text/plain": summary_line(tree), "text/html": render_html(tree)}
        return display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]

    def resuming(self, source: str | Path) -> None:
        """Say above the turns that this run resumes the journal `source`: its first turns come from the
        journal at no cost until the run goes live, where the run's mark (RunResumed) replaces this line."""
        name = Path(source).name
        self._hint = self._html(f'<div style="{FONT};{MUTED};font-size:12px">⟳ Resuming from {html.escape(name)}: '
                                f'what it answered is served from the journal at no cost until the run goes live'
                                f'</div>')
        with self._push_lock:
            self.body.children = [self._hint, *self.body.children]

    def notice(self, text: str) -> None:
        """A muted line under the run, in the live view only: the saved output (text/plain, text/html, the
        trajectory) stays as it was, so saved notebooks compare as before. Said once, e.g. where runs are kept."""
        row = self._html(f'<div style="{FONT};{MUTED};font-size:12px">{html.escape(text)}</div>')
        self._notices.append(row)
        with self._push_lock:
            self.box.children = [*self.box.children, row]

    def start(self) -> None:
        """Start the throttled pusher thread (idempotent)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._pump, name="rlmnb-widget", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the pusher thread and wait for it (no thread is left behind)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)

    def finish(self) -> None:
        """Stop pushing, draw the final state and refresh the displayed output."""
        self.stop()
        self.push()
        self.finished = True
        self.trace.enable()
        self.trace.refresh()
        if self._handle is not None:
            self._handle.update(self)

    def discard(self) -> None:
        """The run never started (a usage error): stop, blank the output and close the widgets."""
        self.stop()
        if self._handle is not None:
            from IPython.display import HTML

            self._handle.update(HTML(""))  # type: ignore[no-untyped-call]
        self.close()

    def close(self) -> None:
        """Close every widget of this view (front-end models are released)."""
        for group in self._groups.values():
            group.close()
        for turn in self._turns.values():
            turn.html.close()
            turn.box.close()
        for panel in self._runs.values():
            for widget in (panel.header, panel.body, panel.answer, panel.box):
                widget.close()
        self.trace.close()
        for row in (self._mark, self._hint, *self._notices):
            if row is not None:
                row.close()
        for widget in (self.header, self.body, self.answer, self.meters, self.box, *self._shared):
            widget.close()

    def _pump(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.push()
                self.snapshot()
            except Exception as exc:  # a broken view must never break the run
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return

    def snapshot(self, force: bool = False) -> bool:
        """Refresh the displayed output's saved parts while the run goes on, when due (or `force`d): at a new
        turn, or `snapshot_interval` seconds after the last refresh, if events came meanwhile, and never more
        often than SNAPSHOT_SHARE of the time allows. Returns whether it refreshed (the pusher thread calls it)."""
        if self._handle is None or self.finished or self.resume is None or self.tree.root_id is None:
            return False
        at, turns, events, cost = self._snapped
        now, count, numbers = time.monotonic(), len(self.tree.events), len(self.tree.turn_numbers())
        if not force and (count == events or (numbers == turns and now - at < self.snapshot_interval)
                          or now - at < cost / SNAPSHOT_SHARE):
            return False
        note = self.resume(self.tree.root_id)
        if note is None:
            return False
        started = time.perf_counter()
        self._note = note
        try:
            self._handle.update(self)
        finally:
            self._note = None
        self.snapshots += 1
        self._snapped = (now, numbers, count, time.perf_counter() - started)
        return True

    # ---- drawing --------------------------------------------------------------------------------
    def push(self) -> None:
        """Redraw the parts that changed since the last push (and the clock)."""
        with self._push_lock:
            started = time.thread_time()
            changes = self.tree.take_changes()
            now = time.time()
            root = self.tree.run_view(now=now)
            self.header.value = header_html(root) + confinement_html(root)
            meters = self.tree.meters_view(now=now)
            self.meters.value = _spaced(meters_html(meters, running_batch(self.tree, now)))
            self.trace.show(meters["sub_calls"])
            # creation order matters: runs, then their turn lists, then turn bodies, items and groups
            for change in sorted(changes, key=_change_order):
                kind = change[0]
                if kind == "run":
                    self._draw_run(change[1])
                elif kind == "turns":
                    self._draw_turn_list(change[1])
                elif kind == "turn":
                    self._draw_turn(change[1], change[2])
                elif kind == "items":
                    self._draw_items(change[1], change[2])
                elif kind == "group":
                    self._draw_group(change[1])
            self.pushes += 1
            self.push_seconds += time.thread_time() - started

    def _panel(self, run_id: str) -> _RunPanel:
        panel = self._runs.get(run_id)
        if panel is None:
            if run_id == self.tree.root_id:
                panel = self._root_panel
            else:
                header, body, answer = self._html(), self._vbox(), self._html()
                panel = _RunPanel(header, body, answer, self._vbox([header, body, answer], self._child_layout))
            self._runs[run_id] = panel
        return panel

    def _draw_run(self, run_id: str) -> None:
        panel = self._panel(run_id)
        view = self.tree.run_view(run_id)
        if panel is not self._root_panel:
            panel.header.value = header_html(view, title="child run")
        panel.answer.value = answer_html(view)
        if view["status"] != "running":  # turns cut short now say how, as the static views do
            for number in self.tree.turn_numbers(run_id):
                if (run_id, number) in self._turns and not self.tree.turn_view(run_id, number)["executed"]:
                    self._draw_turn(run_id, number)

    def _turn_panel(self, run_id: str, turn: int) -> _TurnPanel:
        key = (run_id, turn)
        panel = self._turns.get(key)
        if panel is None:
            panel = _TurnPanel(self)
            self._turns[key] = panel
        return panel

    def _mark_widget(self, mark: dict[str, Any]) -> Any:
        if self._mark is None:
            self._mark = self._html()
        self._mark.value = resumed_html(mark)
        return self._mark

    def _draw_turn_list(self, run_id: str) -> None:
        panel = self._panel(run_id)
        numbers = self.tree.turn_numbers(run_id)
        mark = self.tree.resumed_view(run_id)
        children = []
        for n in numbers:
            if mark is not None and mark["turn"] == n and not mark["within"]:
                children.append(self._mark_widget(mark))  # it went live with this turn's root request
            children.append(self._turn_panel(run_id, n).box)
        if mark is not None and mark["turn"] is None:
            children.append(self._mark_widget(mark))  # nothing went live
        if mark is None and self._hint is not None and panel is self._root_panel:
            children.insert(0, self._hint)
        if tuple(children) != tuple(panel.body.children):
            panel.turns = numbers
            panel.body.children = children

    def _draw_turn(self, run_id: str, turn: int) -> None:
        status = self.tree.run_view(run_id)["status"]
        replayed = replayed_turn(self.tree.resumed_view(run_id), turn)
        self._turn_panel(run_id, turn).html.value = turn_html(self.tree.turn_view(run_id, turn), status=status,
                                                              actions=True, replayed=replayed)

    def _draw_items(self, run_id: str, turn: int) -> None:
        panel = self._turn_panel(run_id, turn)
        items = self.tree.turn_items(run_id, turn)
        mark = self.tree.resumed_view(run_id)
        marked = mark is not None and mark["turn"] == turn and bool(mark["within"])
        if items == panel.items and marked == panel.marked:
            return
        panel.items, panel.marked = items, marked
        boxes = [panel.html]
        if mark is not None and marked:  # it went live during this turn's sub-calls: after its reply and code
            boxes.append(self._mark_widget(mark))
        for kind, key in items:
            if kind == "group":
                boxes.append(self._group_panel(key).box)
            else:
                self._draw_run(key)
                boxes.append(self._panel(key).box)
        panel.box.children = boxes

    def _group_panel(self, key: str) -> _GroupPanel:
        group = self._groups.get(key)
        if group is None:
            group = _GroupPanel(self, key)
            self._groups[key] = group
        return group

    def _draw_group(self, key: str) -> None:
        group = self._group_panel(key)
        view = self.tree.group_view(key, now=time.time())
        group.summary.value = _spaced(group_summary_html(view))
        group.draw(view)

    # ---- display --------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from rlmnb.events import MIME_TYPE

        bundle = dict(self.box._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/plain"] = summary_line(self.tree)
        bundle["text/html"] = render_html(self.tree)
        note = self._note
        if note is not None:  # a running run's snapshot: the tree so far and the way on from its journal
            bundle["text/plain"] += "\n" + snapshot_text(note)
            bundle["text/html"] = snapshot_html(note) + bundle["text/html"]
        if self.embed_trajectory and (self.finished or note is not None):
            # in the final bundle, and in a snapshot marked as one: where the JupyterLab extension is installed
            # its view (which ranks above ipywidgets) shows the live widget while that lives, and the saved
            # tree where it is gone (a reopened notebook, a lost kernel); the final tree when the run ends
            data = compact_trajectory(Trajectory(list(self.tree.events)), opened=self.tree.opened)
            if note is not None:
                data["snapshot"] = note.to_dict()
            bundle[MIME_TYPE] = data
        return bundle

    @property
    def model_state(self) -> dict[str, Any]:
        """What the front end shows, as plain values (for tests and debugging)."""
        import re

        root = self.tree.run_view()
        meters = dict(re.findall(r'data-meter="([^"]+)".*?class="rlmnb-meter-text"[^>]*>([^<]*)<', self.meters.value))
        return {"status": root["status"], "turns": len(self.body.children), "meters": meters,
                "groups": len(self._groups), "pushes": self.pushes}

    def __repr__(self) -> str:
        m = self.tree.meters_view()
        status = self.tree.run_view()["status"]
        return f"RunWidget(status={status!r}, turns={m['turns']}, sub_calls={m['sub_calls']})"


def _spaced(piece: str) -> str:
    """A piece in the views' font and line spacing: an ipywidgets HTML widget spaces lines as tall as its controls
    (28 px), so the same piece would stand taller live than in the finished view."""
    return f'<div style="{FONT}">{piece}</div>'


_ORDER = {"run": 0, "turns": 1, "turn": 2, "items": 3, "group": 4, "meters": 5}


def _change_order(change: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_ORDER.get(change[0], 9), *(str(part) for part in change[1:]))
