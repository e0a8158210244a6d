"""The trace view's pieces: sort, filter and search sub-calls, the search's stated scope, the timeline,
group progress (done of sent, rate, ETA), the meters, and the words for turns cut short."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sandbox_support import code

from rlmnb import RLM
from rlmnb._ground.usage import Usage
from rlmnb.events import EventBus, RunScope, RunStarted, SubCallFinished, SubCallStarted
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, render_html
from rlmnb.views._format import fmt_cost, fmt_rate, pending_turn_text, slow_cutoff
from rlmnb.views._html import meters_html
from rlmnb.views._timeline import timeline_svg
from rlmnb.views._trace import search_scope, select_calls


def _tree(n: int = 40, latency: Callable[[int], float] = lambda i: 5.0 if i == 9 else 0.1) -> RunTree:
    tree = RunTree()
    bus = EventBus()
    bus.subscribe(tree.add)
    scope = RunScope("r1", "r1")
    bus.emit(RunStarted, scope, question="q", model="m", sub_model="s", sandbox="local",
             config={"max_iterations": 5, "max_llm_calls": 100})
    for i in range(n):
        bus.emit(SubCallStarted, scope, call_id=f"c{i}", turn=1, batch_id="b1", prompt=f"prompt {i}",
                 prompt_chars=len(f"prompt {i}"))
    for i in range(n):
        meta: dict[str, Any] = {"retries": 2, "rate_limited": 1} if i == 3 else {"retries": 1} if i == 4 else {}
        bus.emit(SubCallFinished, scope, call_id=f"c{i}", turn=1, batch_id="b1", reply=f"reply {i}",
                 error="[error] boom" if i == 7 else None, latency_s=latency(i),
                 usage={"input_tokens": i, "output_tokens": 1, "cost_usd": None if i == 8 else i / 1000}, meta=meta)
    return tree


def test_sort_filter_and_search() -> None:
    calls = _tree().all_call_views()
    assert [c["index"] for c in select_calls(calls, sort="latency")][:2] == [10, 1]
    assert select_calls(calls, sort="tokens")[0]["index"] == 40 and select_calls(calls, sort="cost")[0]["index"] == 40
    assert [c["index"] for c in select_calls(calls, keep="error")] == [8]
    assert [c["index"] for c in select_calls(calls, keep="retried")] == [4, 5]
    assert [c["index"] for c in select_calls(calls, keep="rate")] == [4]
    assert [c["index"] for c in select_calls(calls, keep="slow")] == [10]
    assert [c["index"] for c in select_calls(calls, query="REPLY 1", keep="all")][:2] == [2, 11]
    assert [c["index"] for c in select_calls(calls, query="boom")] == [8]  # errors are searched too


def test_search_scope_says_when_prompts_are_excerpts() -> None:
    calls = _tree(3).all_call_views()
    assert search_scope(calls) == "searches the whole prompt, reply and error of each of the 3 sub-calls"
    calls[0]["prompt_chars"] = 204_419
    scope = search_scope(calls)
    assert "1 of the 3 prompts are longer than the record keeps" in scope and "middle is not found" in scope


def test_timeline_packs_calls_into_lanes_and_marks_them() -> None:
    result = RLM(ScriptedLM([code("r = llm_query_batched([f'q{i}' for i in range(12)])"), code("submit(1)")]),
                 ScriptedLM(lambda m: "x", latency=0.05), sandbox="local").run("q", text="t")
    svg = timeline_svg(result.trajectory.events)
    lanes = int(re.search(r'data-lanes="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    assert 2 <= lanes <= 12 and svg.count("<rect") == 12 + 2 + 2  # 12 calls, 2 replies, 2 code runs
    assert "sub-call 1 · turn 1" in svg and "root model reply · turn 1" in svg and "peak" in svg
    marked = timeline_svg(_tree().events)
    assert marked.count('fill="#c62828"') == 1 and marked.count('fill="#ff7043"') == 1  # error, rate-limited
    assert marked.count('fill="#ef6c00"') == 1 and marked.count('fill="#8e24aa"') == 1  # retried, slow
    assert timeline_svg([]) == ""


def test_calls_that_all_took_about_as_long_have_no_slow_one() -> None:
    even = _tree(latency=lambda i: 1.997 + i * 0.00015)  # 2.0 s ±3 ms: the last two are above p95, not slower
    assert select_calls(even.all_call_views(), keep="slow") == []
    assert 'fill="#8e24aa"' not in timeline_svg(even.events)
    assert slow_cutoff([1.0] * 19) is None  # too few to say
    assert slow_cutoff(sorted([1.0] * 30 + [1.4])) == 1.5  # above p95 is not enough: 1.5x the median too


def test_the_timeline_shows_what_the_search_and_filter_keep() -> None:
    tree = _tree()
    kept = select_calls(tree.all_call_views(), query="reply 1")
    ids = {c["call_id"] for c in kept}
    svg = timeline_svg(tree.events, ids)
    assert re.search(r'data-shown="(\d+)"', svg).group(1) == str(len(ids))  # type: ignore[union-attr]
    assert svg.count("fill-opacity") == 40 - len(ids)  # the calls left out are faded, in their lanes
    assert "fill-opacity" not in timeline_svg(tree.events)


def test_group_progress_like_tqdm() -> None:
    tree = _tree()
    bus = EventBus()
    bus.subscribe(tree.add)
    scope = RunScope("r1", "r1")
    for i in range(40, 60):
        bus.emit(SubCallStarted, scope, call_id=f"c{i}", turn=1, batch_id="b1", prompt="p")
    view = tree.group_view("b1", now=tree.groups["b1"].started + 4.0)
    assert (view["finished"], view["started"]) == (40, 60) and view["rate"] == 10.0 and view["eta"] == 2.0
    assert fmt_rate(10.0) == "10.0/s" and fmt_rate(0.25) == "4.0 s/call"
    m = tree.meters_view()
    html = meters_html(m)
    assert "40 (+20 in flight) / 100 · 1 failed" in html and html.count("rlmnb-meter-bar") == 2
    unknown = fmt_cost(0.0, 3)
    assert "$" not in unknown and "3 calls" in unknown  # an unknown cost is never a dollar figure, and says how many
    assert fmt_cost(1.5, 2).startswith("$1.5000") and "2 calls" in fmt_cost(1.5, 2)
    assert "openai/x" in fmt_cost(0.0, 1, ("openai/x",))  # which model needs a price
    assert Usage(cost_usd=1.5, unpriced_calls=2).cost_text() == fmt_cost(1.5, 2)  # one wording everywhere


def test_turns_cut_short_read_the_same_everywhere() -> None:
    assert pending_turn_text(False, True, "running") == "running…"
    assert pending_turn_text(False, False, "running") == "waiting for the model…"
    assert pending_turn_text(False, True, "interrupted") == "interrupted: this code did not finish"
    assert pending_turn_text(False, False, "error") == "run failed before the model replied"
    assert pending_turn_text(True, True, "interrupted") is None
    assert pending_turn_text(False, True, "submitted", code=False) is None  # a prose answer has nothing to run
    assert pending_turn_text(False, True, "running", code=False) is None
    page = render_html(_tree())
    assert 'class="rlmnb-trajectory tex2jax_ignore mathjax_ignore"' in page  # safe from the math renderer
