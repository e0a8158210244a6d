"""The live widget: model state after scripted runs, lazy call rows, child runs, throttling, threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlmnb import RLM, Trajectory
from rlmnb._notebook.widget import RunWidget
from rlmnb.events import MIME_TYPE, EventBus, RunScope, RunStarted, SubCallFinished, SubCallStarted
from rlmnb.testing import ScriptedLM
from rlmnb.views import render_html
from rlmnb.views._html import FONT


def code(body: str) -> str:
    return f"```python\n{body}\n```"


class CountingComms:
    """Replaces the comm factory so every message a widget sends to the front end is counted."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def factory(self, *args: Any, **kwargs: Any) -> Any:
        import comm

        counter = self

        class Counting(comm.DummyComm):  # type: ignore[misc]
            def publish_msg(self, msg_type: str, *a: Any, **k: Any) -> None:
                counter.messages.append(msg_type)

        return Counting(*args, **kwargs)


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingComms]:
    import comm

    counting = CountingComms()
    monkeypatch.setattr(comm, "create_comm", counting.factory)
    yield counting


def widget_threads() -> list[str]:
    """rlmnb's threads but the process's one kernel launcher, which outlives runs by design."""
    from rlmnb._sandbox.kernel.process import SPAWNER_THREAD

    return [t.name for t in threading.enumerate() if t.name.startswith("rlmnb-") and t.name != SPAWNER_THREAD]


def run_with_widget(replies: list[str], sub: Any = None, interval: float = 0.25, **kw: Any) -> tuple[Any, RunWidget]:
    view = RunWidget(interval=interval, page_size=kw.pop("page_size", 50))
    view.start()
    rlm = RLM(ScriptedLM(replies, name="root"), sub or ScriptedLM(lambda m: "ok:" + m[-1]["content"], name="sub"),
              on_event=view.on_event, sandbox="local", evidence_check=False, **kw)
    try:
        result = rlm.run(kw.pop("question", "Count things"), text="alpha beta gamma " * 100)
    finally:
        view.finish()
    return result, view


def test_model_state_after_a_scripted_run() -> None:
    result, view = run_with_widget([
        code("print(inputs['text'][:20])"),
        code("r = llm_query_batched([f'q{i}' for i in range(30)])\nx = llm_query('one')\nprint(len(r))"),
        code("submit({'count': len(r), 'x': x})"),
    ], max_llm_calls=40)
    assert result.status == "submitted"
    state = view.model_state
    assert state["status"] == "submitted" and state["turns"] == 3 == len(view.body.children)
    meters = state["meters"]
    assert meters["turns"] == "3 / 20" and meters["sub-calls"] == "31 / 40"
    assert meters["tokens"].startswith(f"{result.usage.input_tokens:,} in") and meters["cost"] == "$0.0000"
    assert meters["time"].endswith(("ms", " s"))  # no limit set: no bar, no "/ ..." part
    assert view.meters.value.count("rlmnb-meter-bar") == 2  # bars only for the limits that are set
    # the widget shows the same pieces as the static HTML view, in the same order
    assert view.meters.value.removeprefix(f'<div style="{FONT}">').removesuffix("</div>") in render_html(view.tree)
    assert "answered" in view.header.value and "root" in view.header.value and "sub" in view.header.value
    assert "Answer" in view.answer.value and "&quot;count&quot;: 30" in view.answer.value
    turn2 = view.body.children[1]
    assert len(turn2.children) == 3  # the turn's html, the batch row, the single-calls row
    assert "Turn 2/20" in turn2.children[0].value and "llm_query_batched" in turn2.children[0].value
    batch_row, single_row = turn2.children[1:]
    assert "llm_query_batched</b> × 30" in batch_row.children[0].value
    assert "llm_query</b> × 1" in single_row.children[0].value
    # the calls: HTML the browser opens by itself (no kernel round trip while the run goes on)
    page = batch_row.children[1].value
    assert page.startswith("<details") and page.count("<details") == 31 and "30 calls</summary>" in page
    assert len(batch_row.children) == 2  # no "more" button: one page holds them all
    # the turn's code and each call's prompt and reply carry the copy and insert buttons
    assert 'data-rlmnb-action="insert"' in turn2.children[0].value and "copy code to a new cell" in turn2.children[0].value
    assert page.count('data-rlmnb-action="copy"') == 60 and "copy prompt" in page and "copy reply" in page
    assert widget_threads() == []


def test_rows_are_listed_a_page_at_a_time() -> None:
    _, view = run_with_widget([
        code("r = llm_query_batched([f'q{i}' for i in range(25)])\nprint(len(r))"),
        code("submit(len(r))"),
    ], max_llm_calls=30, page_size=10, allow_first_turn_submit=True)
    group = next(iter(view._groups.values()))
    summary, page, more = group.box.children
    assert page.value.count("<details") == 11 and "#10 ·" in page.value and "#11 ·" not in page.value
    assert "the first 10 of 25 calls" in page.value and " open" not in page.value.split(">", 1)[0]
    assert "ok:q0" in page.value and more.description == "show 10 more (15 left)"
    more.click()  # what a click in the front end does once the cell has finished
    assert page.value.count("<details") == 21 and page.value.startswith("<details data-rlmnb-key=\"calls\" open")
    assert more.description == "show the last 5"
    more.click()
    assert group.box.children == (summary, page) and page.value.count("<details") == 26
    assert "25 calls</summary>" in page.value


def test_an_open_page_is_redrawn_only_when_its_calls_change() -> None:
    _, view = run_with_widget([
        code("r = llm_query_batched([f'q{i}' for i in range(25)])\nprint(len(r))"),
        code("submit(len(r))"),
    ], max_llm_calls=30, page_size=10, allow_first_turn_submit=True)
    group = next(iter(view._groups.values()))
    sent: list[str] = []
    group.page.observe(lambda change: sent.append(change["new"]), names="value")
    group.draw(view.tree.group_view(group.key))
    assert sent == []  # its ten calls are done: nothing to send


def test_child_runs_nest_under_the_turn_that_started_them() -> None:
    child = ScriptedLM([code("print(inputs['piece'])"), code("submit('child saw ' + inputs['piece'])")],
                       name="child")
    result, view = run_with_widget([
        code("print(1)"),
        code("a = rlm_query('Look at this', piece='xyz')\nprint(a)"),
        code("submit(a)"),
    ], child_model=child, max_depth=2)
    assert result.answer == "child saw xyz", result.reason
    turn2 = view.body.children[1]
    child_box = turn2.children[1]
    header, body, answer = child_box.children
    assert "child run" in header.value and "Look at this" in header.value
    assert len(body.children) == 2 and "child saw xyz" in answer.value
    assert len(view.body.children) == 3  # the child's turns are not root turns


def test_mime_bundle_and_display_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[dict[str, Any]] = []

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, *a, **k: published.append({"data": data, **k}))
    view = RunWidget()
    view.display()
    view.start()
    RLM(ScriptedLM([code("print(42)"), code("submit(42)")]), on_event=view.on_event, sandbox="local").run("q", text="t")
    view.finish()
    first, final = published
    assert "application/vnd.jupyter.widget-view+json" in first["data"] and not first.get("update")
    assert final["update"] and final["transient"]["display_id"] == first["transient"]["display_id"]
    data = final["data"]
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.box.model_id
    assert data["text/plain"].startswith("RLM run · answered · 2 turn(s)") and "answer: 42" in data["text/plain"]
    assert "Turn 2" in data["text/html"] and "<script" not in data["text/html"]
    assert Trajectory.from_dict(data[MIME_TYPE]).final().answer == 42  # type: ignore[union-attr]
    assert "running" in first["data"]["text/html"] or "starting…" in first["data"]["text/html"]
    assert MIME_TYPE not in first["data"]  # the extension's view must not cover the live widget


def test_pushes_are_throttled_and_flushed_at_the_end(comms: CountingComms) -> None:
    slow = ScriptedLM(lambda m: "r", name="sub", latency=0.06)
    started = time.perf_counter()
    result, view = run_with_widget([
        code("r = []\nfor i in range(6):\n    r += llm_query_batched([f'q{j}' for j in range(50)])\nprint(len(r))"),
        code("submit(len(r))"),
    ], sub=slow, interval=0.1, max_llm_calls=400, allow_first_turn_submit=True)
    elapsed = time.perf_counter() - started
    assert result.answer == 300
    assert 2 <= view.pushes <= elapsed / 0.1 + 2  # throttled: at most one push per interval, plus the final one
    assert view.model_state["meters"]["sub-calls"] == "300 / 400"  # the final flush drew the end state
    # messages: widget creation (a few per row, the trace panel's two toolbars among them) plus a few per push,
    # plus one per trace control enabled at the end (search, sort, filter, timeline), far fewer than the 600+
    # events of the run
    assert len(result.trajectory) > 600 and len(comms.messages) <= 82 + 4 + 6 * view.pushes, len(comms.messages)


def test_events_from_another_thread_and_late_pushes() -> None:
    view = RunWidget(interval=0.02)
    view.start()
    bus = EventBus()
    bus.subscribe(view.on_event)
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="threads", model="m", sub_model="m", sandbox="local",
             config={"max_iterations": 3, "max_llm_calls": 1000})

    def worker() -> None:
        for i in range(500):
            bus.emit(SubCallStarted, scope, call_id=f"c{i}", turn=1, prompt="p")
            bus.emit(SubCallFinished, scope, call_id=f"c{i}", turn=1, reply="r")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    deadline = time.monotonic() + 5
    while view.model_state["meters"].get("sub-calls") != "500 / 1,000" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert view.model_state["meters"]["sub-calls"] == "500 / 1,000"  # the pusher drew it without finish()
    assert view.tree.run_view()["status"] == "running" and "running" in view.header.value
    view.finish()
    assert widget_threads() == [] and not view.errors


def test_from_trajectory_and_repr() -> None:
    result, _ = run_with_widget([code("print(1)"), code("submit('done')")])
    again = RunWidget.from_trajectory(Trajectory.from_dict(result.trajectory.to_dict()))
    assert again.finished and len(again.body.children) == 2 and "done" in again.answer.value
    assert repr(again) == "RunWidget(status='submitted', turns=2, sub_calls=0)"
    again.close()
    assert again.box.comm is None


def test_interrupted_run_shows_partial_state() -> None:
    import _thread

    view = RunWidget()
    view.start()
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        result = RLM(ScriptedLM([code("print(1)"), code("x = llm_query_batched(['a'] * 4)")]),
                     ScriptedLM(lambda m: "r", latency=30), on_event=view.on_event, sandbox="local").run("q", text="t")
    finally:
        timer.cancel()
        view.finish()
    assert result.status == "interrupted"
    assert "interrupted" in view.header.value and "Interrupted" in view.answer.value
    assert "interrupted: this code did not finish" in view.body.children[1].children[0].value  # the same words
    assert "interrupted: this code did not finish" in render_html(view.tree)  # as the static view
    assert len(view.body.children) == 2 and "× 4" in view.body.children[1].children[1].children[0].value
    assert widget_threads() == []


def test_child_runs_nest_under_their_turn_and_attempts_show_their_scores() -> None:
    def kid(messages: list[dict[str, Any]]) -> str:
        done = sum(1 for m in messages if m["role"] == "assistant")
        return code("print(inputs['piece'])") if done == 0 else code("submit('piece read')")

    scores = iter([0.2, 0.95, 0.9])
    view = RunWidget(interval=0.25)
    view.start()
    rlm = RLM(ScriptedLM([code("r = rlm_query('Read it', piece='xyz')\nprint(r)"), code("submit(r)"),
                          code("submit(r + '!')")], name="root"),
              ScriptedLM(lambda m: "ok", name="sub"), child_model=ScriptedLM(kid, name="kid"), max_depth=2,
              verify=lambda a, c: next(scores), on_event=view.on_event, sandbox="local")
    try:
        result = rlm.run("q", text="t")
    finally:
        view.finish()
    assert result.answer == "piece read" and result.verified  # the child revised once, the root passed
    from rlmnb.views import render_html

    html = render_html(result.trajectory)

    def text_of(widget: Any) -> str:
        own = getattr(widget, "value", "")
        return (own if isinstance(own, str) else "") + " ".join(text_of(c) for c in getattr(widget, "children", ()))

    turn1, turn2 = view.body.children[:2]
    nested = " ".join(text_of(c) for c in turn1.children[1:])
    assert "child run" in nested and "Read it" in nested  # the child sits under the turn that started it
    assert "child run" not in text_of(turn2)
    shown = view.header.value + text_of(view.body) + view.answer.value
    for where in (shown, html):
        assert "attempt 1 rejected (confidence 0.20)" in where or "confidence 0.20" in where
        assert "confidence 0.95" in where and "confidence 0.90" in where
