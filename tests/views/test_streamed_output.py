"""A turn's output reaches the views while its code still runs, and a turn cut short keeps it (issue 45).

The snippet prints a table, then makes a sub-call that answers only once the run's event bus has handed
the printed text to a subscriber as a `CodeOutput` event (or after a long wait, which fails the test): so
the event must arrive before the turn ends, whichever sandbox runs the code. A timed-out turn shows what
it printed and the sentence the model was told; an interrupted turn keeps what it printed so far.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from sandbox_support import code

from rlmnb import RLM
from rlmnb._sandbox.bridge import OutputAllowance
from rlmnb._sandbox.local import StreamedOutput
from rlmnb.events import CodeExecuted, CodeOutput, Event, Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, render_html, render_text
from rlmnb.views._mime import compact_trajectory

TABLE = "region  sales\\nnorth   120\\nsouth    80"
PRINT_THEN_ASK = code(f"print({TABLE!r})\nanswers = llm_query_batched(['a', 'b'])\nprint(len(answers))")
SUBMIT = code("submit(len(answers))")
WAIT_S = 60.0  # the sub-model's longest wait for the streamed event: only a broken stream waits this long


class Watcher:
    """An event subscriber that notes when the printed table arrives as a CodeOutput event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.seen = threading.Event()

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, CodeOutput) and "north" in event.text:
            self.seen.set()


def waiting_sub(watcher: Watcher) -> ScriptedLM:
    """A sub-model whose every answer waits until the watcher has seen the printed table."""

    class Waiting(ScriptedLM):
        async def acomplete(self, messages: Any, **params: Any) -> Any:
            seen = await asyncio.to_thread(watcher.seen.wait, WAIT_S)
            self.streamed_first = seen
            return self.complete(messages, **params)

    return Waiting(lambda m: "ok", name="sub")


def test_printed_output_arrives_before_the_turn_ends(kind: str) -> None:
    watcher = Watcher()
    sub = waiting_sub(watcher)
    result = RLM(ScriptedLM([PRINT_THEN_ASK, SUBMIT], name="root"), sub, sandbox=kind,
                 on_event=watcher).run("Sum the sales")
    assert result.status == "submitted"
    assert getattr(sub, "streamed_first", False) is True
    kinds = [type(e) for e in watcher.events]
    first_output = next(i for i, e in enumerate(watcher.events)
                        if isinstance(e, CodeOutput) and "north" in e.text)
    executed = kinds.index(CodeExecuted)
    assert first_output < executed
    streamed = [e for e in watcher.events if isinstance(e, CodeOutput)]
    assert {e.turn for e in streamed} == {1} and {e.stream for e in streamed} == {"stdout"}


def test_a_running_turn_shows_its_output_so_far_and_a_finished_one_its_result() -> None:
    watcher = Watcher()
    sub = waiting_sub(watcher)
    tree = RunTree()
    seen_live: list[dict[str, Any]] = []

    def on_event(event: Event) -> None:
        tree.add(event)
        watcher(event)
        if isinstance(event, CodeOutput):
            seen_live.append(tree.turn_view(event.run_id, event.turn))

    RLM(ScriptedLM([PRINT_THEN_ASK, SUBMIT], name="root"), sub, sandbox="local", on_event=on_event).run("Sum")
    live = seen_live[0]
    assert not live["executed"] and "north" in live["streamed_stdout"]
    assert "north   120" in render_html(RunTree(tree.events[: tree.events.index(_first_output(tree))+ 1]))
    done = tree.turn_view(tree.root_id or "", 1)
    assert done["executed"] and done["stdout"].endswith("2\n")
    # the saved JSON drops the pieces of a turn whose result holds its whole output
    compact = compact_trajectory(Trajectory(tree.events))
    assert not [e for e in compact["events"] if e["kind"] == "code_output"]


def _first_output(tree: RunTree) -> Event:
    return next(e for e in tree.events if isinstance(e, CodeOutput))


def test_an_interrupted_turn_keeps_what_it_printed() -> None:
    events = _events([("run_started", {}), ("turn_started", {"turn": 1, "max_turns": 5}),
                      ("model_reply", {"turn": 1, "text": PRINT_THEN_ASK}),
                      ("code_output", {"turn": 1, "text": "region  sales\nnorth   120\n"}),
                      ("run_finished", {"status": "interrupted", "reason": "the run was interrupted"})])
    tree = RunTree(events)
    view = tree.turn_view(tree.root_id or "", 1)
    assert not view["executed"] and view["streamed_stdout"].startswith("region")
    html = render_html(tree)
    assert "north   120" in html and "did not finish" in html
    assert "north   120" in render_text(Trajectory(events))
    compact = compact_trajectory(Trajectory(events))
    assert [e["kind"] for e in compact["events"]].count("code_output") == 1


def test_a_timed_out_turn_shows_the_sentence_the_model_was_told() -> None:
    told = "The code did not finish within 2 seconds and was interrupted. Work on smaller pieces."
    events = _events([("run_started", {}), ("turn_started", {"turn": 1, "max_turns": 5}),
                      ("model_reply", {"turn": 1, "text": code("while True: pass")}),
                      ("code_executed", {"turn": 1, "code": "while True: pass", "timed_out": True,
                                         "observation": f"Turn 1/5\n[timeout] {told}"})])
    tree = RunTree(events)
    view = tree.turn_view(tree.root_id or "", 1)
    assert view["told"] == told
    html = render_html(tree)
    assert "Work on smaller pieces." in html and "(no output)" not in html


def test_the_host_takes_streamed_output_within_its_allowance() -> None:
    now = [0.0]
    allowance = OutputAllowance(chunk=10, per_s=2, total=25, clock=lambda: now[0])
    assert allowance.take(11) is False  # a piece over the chunk size
    assert [allowance.take(5), allowance.take(5), allowance.take(5)] == [True, True, False]  # the burst is 2
    now[0] += 1.0  # two tokens again
    assert [allowance.take(10), allowance.take(10)] == [True, False]  # 20 of 25 characters: 10 more is over the total
    assert [allowance.take(5), allowance.take(1)] == [True, False]  # the total is used up, and this second's tokens
    now[0] += 1.0
    assert allowance.take(1) is False and allowance.left == 0 and allowance.dropped == 5


def test_streamed_output_keeps_only_the_head_in_pieces_and_nothing_once_closed() -> None:
    streamed = StreamedOutput(limit=10, chunk=4)
    streamed.write("stdout", "abcdef")
    streamed.write("stderr", "XY")
    streamed.write("stdout", "ghijkl")
    assert streamed.take() == [("stdout", "abcd"), ("stdout", "ef"), ("stderr", "XY"), ("stdout", "gh")]
    assert streamed.take() == [] and not streamed.ready.is_set()
    fresh = StreamedOutput(limit=100)
    fresh.write("stdout", "late")
    fresh.close()
    fresh.write("stdout", "later")
    assert fresh.take() == []


def _events(specs: list[tuple[str, dict[str, Any]]]) -> list[Event]:
    from rlmnb.events import event_from_dict

    base = {"run_id": "r1", "root_run_id": "r1"}
    started = {"question": "q", "model": "root", "sub_model": "sub", "sandbox": "local"}
    out = []
    for seq, (kind, fields) in enumerate(specs):
        data = {"kind": kind, "seq": seq, "ts": 1000.0 + seq, **base, **(started if kind == "run_started" else {}),
                **fields}
        out.append(event_from_dict(data))
    return out


