"""Static views of a trajectory: the run tree, script-free HTML, terminal text and the MIME bundle."""

from __future__ import annotations

import json
import re
import threading
from html.parser import HTMLParser
from typing import Any

import pytest

from rlmnb import RLM, Trajectory
from rlmnb.events import (
    MIME_TYPE,
    EventBus,
    RunFinished,
    RunScope,
    RunStarted,
    SubCallFinished,
    SubCallStarted,
)
from rlmnb.testing import ScriptedLM
from rlmnb.views import (
    RunTree,
    TrajectoryView,
    clip,
    compact_trajectory,
    mime_bundle,
    percentile,
    render_html,
    render_text,
    summary_line,
)
from rlmnb.views._format import fmt_cost


def code(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture(scope="module")
def result() -> Any:
    """A small run with a batch of 12 sub-calls (two fail), single calls, an error turn and a submit."""

    def sub(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if prompt.startswith("bad"):
            raise RuntimeError("sub-model refused <script>")
        return prompt.upper()

    root = ScriptedLM([
        code("print(len(inputs['text']))"),
        code("out = llm_query_batched([f'p{i}' for i in range(10)] + ['bad1', 'bad2'])\n"
             "one = llm_query('single')\ntwo = llm_query('again')\nprint(out[:3], one)"),
        code("1/0"),
        code("submit({'answer': one, 'n': len(out)})"),
    ], name="root-model")
    return RLM(root, ScriptedLM(sub, name="sub-model"), max_llm_calls=20, sandbox="local").run(
        "Shout <b>it</b>", text="x" * 1000)


def test_tree_folds_turns_groups_and_calls(result: Any) -> None:
    tree = RunTree.from_trajectory(result.trajectory)
    assert tree.turn_numbers() == [1, 2, 3, 4]
    items = tree.turn_items(result.run_id, 2)
    assert [kind for kind, _ in items] == ["group", "group"]
    batch, singles = (tree.group_view(key) for _, key in items)
    assert (batch["kind"], batch["size"], batch["finished"], batch["errors"]) == ("batch", 12, 12, 2)
    assert batch["done"] and batch["p50"] is not None and batch["p95"] >= batch["p50"]
    assert (singles["kind"], singles["started"], singles["errors"]) == ("single", 2, 0)
    calls = tree.call_views(items[0][1])
    assert [c["index"] for c in calls] == list(range(1, 13))
    assert calls[0]["prompt"] == "p0" and calls[0]["reply"] == "P0"
    assert calls[10]["error"].startswith("[error] RuntimeError")
    m = tree.meters_view()
    assert (m["turns"], m["max_turns"], m["sub_calls"], m["max_llm_calls"], m["sub_errors"]) == (4, 20, 14, 20, 2)
    assert (m["input_tokens"], m["output_tokens"]) == (result.usage.input_tokens, result.usage.output_tokens)
    run = tree.run_view()
    assert run["status"] == "submitted" and run["answer"] == {"answer": "SINGLE", "n": 12}
    assert tree.turn_view(result.run_id, 3)["error_type"] == "ZeroDivisionError"
    assert tree.turn_view(result.run_id, 4)["submitted"]


def test_tree_changes_name_the_parts_that_moved(result: Any) -> None:
    tree = RunTree()
    events = result.trajectory.events
    tree.add(events[0])
    assert ("run", result.run_id) in tree.take_changes()
    assert tree.take_changes() == set()
    first_sub = next(e for e in events if isinstance(e, SubCallStarted))
    for e in events[1:events.index(first_sub) + 1]:
        tree.add(e)
    changes = tree.take_changes()
    assert ("group", first_sub.batch_id) in changes and ("meters",) in changes
    assert ("items", result.run_id, 2) in changes


def _html_is_script_free(text: str) -> None:
    """No script-capable tag and no event-handler attribute anywhere."""

    class Checker(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            assert tag not in ("script", "iframe", "object", "embed"), tag
            for name, value in attrs:
                assert not name.lower().startswith("on"), name
                assert "javascript:" not in (value or "").lower()

    Checker().feed(text)
    assert "<script" not in text.lower()


def test_html_is_a_script_free_tree_with_everything(result: Any) -> None:
    page = render_html(result.trajectory)
    _html_is_script_free(page)
    assert page.count("<details") >= 4 + 12  # a reply per turn, groups and calls
    assert "Turn 4/20" in page and "llm_query_batched</b> × 12" in page and "2 failed" in page
    assert "Shout &lt;b&gt;it&lt;/b&gt;" in page  # user text is escaped, never markup
    assert "sub-model refused &lt;script&gt;" in page
    assert "ZeroDivisionError" in page and "SINGLE" in page and "answered" in page
    assert "<span style=" in page.split("llm_query_batched")[0]  # the code is highlighted
    full = render_html(result.trajectory, full_page=True)
    assert full.startswith("<!doctype html>") and full.rstrip().endswith("</html>") and page in full
    _html_is_script_free(full)


def test_html_lists_a_bounded_number_of_calls(result: Any) -> None:
    page = render_html(result.trajectory, calls_shown=3)
    assert "#3 ·" in page and "#4 ·" not in page and "9 more calls not listed" in page


def test_text_view_reads_like_a_log(result: Any) -> None:
    text = render_text(result.trajectory)
    assert text.startswith("RLM run · answered · root-model (sub-calls: sub-model)")
    assert "Budget: turns 4/20 · sub-calls 14/20 (2 failed)" in text
    assert "── Turn 2/20" in text and "llm_query_batched × 12, 2 failed" in text and "llm_query × 2" in text
    assert "#1: 'p0' -> 'P0'" in text and "… 9 more" in text
    assert "ZeroDivisionError" in text
    assert '"answer": "SINGLE"' in text.split("=" * 100)[-1]
    assert all(len(line) <= 100 for line in text.splitlines() if line.startswith("──"))


def test_summary_line_is_stable_across_identical_runs(result: Any) -> None:
    line = summary_line(result.trajectory)
    assert line.startswith("RLM run · answered · 4 turn(s) · 14 sub-call(s)")
    assert result.run_id not in line and not re.search(r"\d+ ms|\d\.\d s", line)
    again = Trajectory.from_dict(json.loads(result.trajectory.to_json()))
    assert summary_line(again) == line


def test_mime_bundle_carries_plain_html_and_trajectory_json(result: Any) -> None:
    bundle = mime_bundle(result.trajectory)
    assert set(bundle) == {"text/plain", "text/html", MIME_TYPE}
    data = bundle[MIME_TYPE]
    json.dumps(data)  # JSON-able as is
    assert Trajectory.from_dict(data).final().status == "submitted"  # type: ignore[union-attr]
    view = TrajectoryView(result.trajectory)
    assert view._repr_mimebundle_() == bundle and repr(view) == bundle["text/plain"]
    answers = [e.pop("answer_json") for e in data["events"] if "answer_json" in e]  # a dict answer in its own order
    assert answers == [] or all(isinstance(a, str) for a in answers)
    assert "clipped" not in data and data == result.trajectory.to_dict()  # nothing long: exactly to_dict()


def test_compact_json_clips_long_strings_only(result: Any) -> None:
    bus = EventBus()
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="s", sandbox="local")
    bus.emit(SubCallStarted, scope, call_id="c1", turn=1, prompt="y" * 5000, prompt_chars=5000)
    bus.emit(SubCallFinished, scope, call_id="c1", turn=1, reply="short")
    bus.emit(RunFinished, scope, status="submitted", answer="z" * 30_000)
    data = compact_trajectory(bus.trajectory)
    assert data["clipped"] is True
    events = data["events"]
    assert len(events[1]["prompt"]) < 1100 and "characters not recorded" in events[1]["prompt"]
    assert events[2]["reply"] == "short" and len(events[3]["answer"]) < 20_100
    assert Trajectory.from_dict(data).of(SubCallStarted)[0].prompt_chars == 5000


def test_live_tree_of_an_unfinished_run_and_placeholders() -> None:
    tree = RunTree()
    assert summary_line(tree) == "RLM run (no events yet)" and render_text(tree) == "RLM run (no events yet)\n"
    assert "starting…" in render_html(tree)
    bus = EventBus()
    scope = RunScope("r1", "r1")
    bus.subscribe(tree.add)
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="m", sandbox="local",
             config={"max_iterations": 5, "max_llm_calls": 9, "max_cost": 1.5, "max_time": 60.0})
    from rlmnb.events import ModelReply, TurnStarted

    bus.emit(TurnStarted, scope, turn=1, max_turns=5)
    bus.emit(ModelReply, scope, turn=1, text=code("print(1)"), usage={"input_tokens": 10, "output_tokens": 2,
                                                                       "cost_usd": None})
    page = render_html(tree)
    assert "running…" in page and "print" in page and "$1.5" in page and fmt_cost(0.0, 1) in page
    assert "(still running)" in render_text(tree)


def test_events_from_many_threads_are_all_counted() -> None:
    tree = RunTree()
    bus = EventBus()
    bus.subscribe(tree.add)
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="m", sandbox="local")

    def worker(k: int) -> None:
        for i in range(200):
            bus.emit(SubCallStarted, scope, call_id=f"c{k}-{i}", turn=1, prompt="p")
            bus.emit(SubCallFinished, scope, call_id=f"c{k}-{i}", turn=1, reply="r", latency_s=0.001)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    view = tree.group_view("r1:t1:single")
    assert view["started"] == view["finished"] == 800 and tree.meters_view()["sub_calls"] == 800


def test_helpers() -> None:
    assert clip("abcdef", 10) == "abcdef"
    cut = clip("a" * 50 + "b" * 50, 30)
    assert cut.startswith("a" * 20) and cut.endswith("b" * 10) and "70 characters not shown" in cut
    assert percentile([], 50) is None
    values = sorted(float(i) for i in range(1, 101))
    assert percentile(values, 50) == 50.0 and percentile(values, 95) == 95.0 and percentile([3.0], 95) == 3.0


def test_a_rejection_by_an_evidence_check_says_how_to_turn_the_checks_off() -> None:
    from rlmnb.events import GuardRejected, TurnStarted

    tree = RunTree()
    bus = EventBus()
    scope = RunScope("r1", "r1")
    bus.subscribe(tree.add)
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="m", sandbox="local", config={})
    bus.emit(TurnStarted, scope, turn=1, max_turns=5)
    bus.emit(GuardRejected, scope, turn=1, guard="evidence", reason="it looks like a guess")
    bus.emit(GuardRejected, scope, turn=1, guard="schema", reason="not an int")
    notes = [text for kind, text in next(iter(tree.runs.values())).turns[1].notes if kind == "rejected"]
    assert ["evidence_check=False" in note for note in notes] == [True, False]
