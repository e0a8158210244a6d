"""Child runs, depth caps, verify-and-revise, refinement, rounds and their telemetry (issue 6)."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from typing import Any

import pytest

from rlmnb import RLM, ConfigError
from rlmnb._guards.rules import LLMJudge, RuleBased
from rlmnb.events import AttemptVerified, RunFinished, RunStarted
from rlmnb.testing import ScriptedLM


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def question_of(messages: list[dict[str, Any]]) -> str:
    first = messages[1]["content"]
    return first.split("Question:\n", 1)[1].split("\n", 1)[0] if "Question:\n" in first else first


def turn_of(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


def child_brain(messages: list[dict[str, Any]]) -> str:
    """The root model of every child run: explores, recurses once on a piece, answers."""
    q = question_of(messages)
    turn = turn_of(messages)
    if turn == 0:
        return code("piece = inputs['piece']\nprint(len(piece))")
    if turn == 1:
        return code("inner = rlm_query('Summarise: ' + piece, piece=piece)\nprint(inner)")
    return code(f"submit({q!r}[:12] + ' -> ' + inner)")


def test_depth_three_tree_with_batched_children_rolls_usage_up_exactly() -> None:
    root = ScriptedLM([
        code("parts = [inputs['text'][:5], inputs['text'][5:]]\nprint(parts)"),
        code("answers = rlm_query_batched(['Look at ' + p for p in parts], [{'piece': p} for p in parts])\n"
             "print(answers)"),
        code("submit(answers)"),
    ], name="root")
    children = ScriptedLM(child_brain, name="child")
    sub = ScriptedLM(lambda m: "leaf", name="sub")
    result = RLM(root, sub, child_model=children, max_depth=3).run("Summarise", text="abcdefghij")

    assert result.status == "submitted", result.reason
    assert len(result.answer) == 2 and all(a.endswith(" -> " + "leaf") or "->" in a for a in result.answer)
    starts = result.trajectory.of(RunStarted)
    assert Counter(s.depth for s in starts) == {0: 1, 1: 2, 2: 2}
    by_id = {s.run_id: s for s in starts}
    for s in starts:
        assert s.root_run_id == result.run_id
        if s.depth:
            assert by_id[s.parent_run_id].depth == s.depth - 1 and s.parent_turn is not None
    # every event of the tree names its run and depth consistently
    for e in result.trajectory.events:
        assert e.depth == by_id[e.run_id].depth and e.root_run_id == result.run_id
    # usage: every model request anywhere is counted once, and the per-run figures sum to the total
    requests = len(root.requests) + len(children.requests) + len(sub.requests)
    assert result.usage.root_calls + result.usage.sub_calls == requests
    per_run = [f.usage for f in result.trajectory.of(RunFinished)]
    for key in ("root_calls", "sub_calls", "input_tokens", "output_tokens"):
        assert sum(u[key] for u in per_run) == getattr(result.usage, key)
    # depth-2 runs were at the cap: their rlm_query became a plain sub-call carrying the piece
    assert len(sub.requests) == 2 and all("[piece]" in r[0]["content"] for r in sub.requests)


def test_child_exhausting_the_shared_budget_mid_batch() -> None:
    def child(messages: list[dict[str, Any]]) -> str:
        turn = turn_of(messages)
        if turn < 3:
            return code("r = llm_query_batched(['x', 'y'])\nprint(r)")
        return code("submit('child done')")

    root = ScriptedLM([code("print(1)"),
                       code("out = rlm_query_batched(['a', 'b', 'c'], [{'n': 1}, {'n': 2}, {'n': 3}])\nprint(out)"),
                       code("submit(out)")])
    sub = ScriptedLM(lambda m: "ok", name="sub")
    result = RLM(root, sub, child_model=ScriptedLM(child, name="child"), max_depth=2, max_llm_calls=12,
                 max_child_concurrency=3).run("q", text="t")
    assert result.status == "submitted"
    errors = [a for a in result.answer if isinstance(a, str) and a.startswith("[error] BudgetExhausted")]
    assert errors, result.answer
    # never overdrawn: child root calls and sub-calls together stay within max_llm_calls
    charged = result.usage.calls - 3  # the depth-0 root's own turns are not charged
    assert charged <= 12
    finished = [f for f in result.trajectory.of(RunFinished) if f.depth == 1]
    assert any(f.status == "budget_exhausted" for f in finished)


class PeakLM(ScriptedLM):
    """A slow sub-model that records how many of its calls were in flight at once."""

    def __init__(self) -> None:
        super().__init__(lambda m: "ok", name="sub", latency=0.05)
        self.in_flight = self.peak = 0

    async def acomplete(self, messages: Any, **params: Any) -> Any:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super().acomplete(messages, **params)
        finally:
            self.in_flight -= 1


def test_the_concurrency_limit_holds_for_the_whole_tree_not_per_run() -> None:
    child = ScriptedLM(lambda m: code("r = llm_query_batched(['x'] * 6)\nprint(r)") if turn_of(m) == 1
                       else code("submit(r)"), name="child")
    root = ScriptedLM([code("print(1)"),
                       code("out = rlm_query_batched(['a', 'b', 'c'])\nprint(out)"),
                       code("submit(out)")])
    sub = PeakLM()
    result = RLM(root, sub, child_model=child, max_depth=2, max_concurrency=2, min_concurrency=1,
                 max_child_concurrency=3, cache=False).run("q", text="t")
    assert result.status == "submitted" and result.answer == [["ok"] * 6] * 3
    assert sub.peak == 2  # three children fanning out at once still share the root's two slots


def test_depth_cap_degrades_to_a_plain_sub_call_by_default() -> None:
    root = ScriptedLM([code("r = rlm_query('Describe', piece='xyz')\nprint(r)"), code("submit(r)")])
    sub = ScriptedLM(lambda m: "described", name="sub")
    result = RLM(root, sub).run("q", text="t")
    assert result.answer == "described"
    assert len(result.trajectory.of(RunStarted)) == 1
    assert sub.requests[0][0]["content"] == "Describe\n\n[piece]\nxyz"


def test_strict_depth_fails_before_any_model_call() -> None:
    root = ScriptedLM([code("r = rlm_query('Describe')"), code("submit('gave up')")])
    sub = ScriptedLM(lambda m: "never", name="sub")
    result = RLM(root, sub, strict_depth=True, evidence_check=False).run("q", text="t")
    assert result.answer == "gave up"
    assert sub.requests == []
    assert "DepthLimitReached" in root.requests[1][-1]["content"]
    assert "max_depth is 1" in root.requests[1][-1]["content"]


# ---- verify and revise ---------------------------------------------------------------------------------
def submit_every_turn(n: int) -> ScriptedLM:
    return ScriptedLM([code("print(1)")] + [code(f"submit('answer {i}')") for i in range(1, n + 1)], name="root")


class CountingGuard:
    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, answer: Any, context: dict[str, Any]) -> Any:
        self.calls += 1
        return self.fn(answer, context)


def _hang(answer: Any, context: dict[str, Any]) -> float:
    threading.Event().wait(3)  # far past verify_timeout; a daemon thread, gone soon after
    return 1.0


def _boom(answer: Any, context: dict[str, Any]) -> float:
    raise RuntimeError("guard exploded")


@pytest.mark.parametrize("behaviour", [
    lambda a, c: 0.1,  # never confident
    lambda a, c: math.nan,
    _boom,
    lambda a, c: (7.5, "out of range"),
    lambda a, c: "very sure",
    _hang,
])
def test_adversarial_guards_end_within_the_bound(behaviour: Any) -> None:
    guard = CountingGuard(behaviour)
    root = submit_every_turn(10)
    started = time.perf_counter()
    result = RLM(root, verify=guard, max_revisions=2, verify_timeout=0.3, evidence_check=False).run("q", text="t")
    assert time.perf_counter() - started < 15  # bounded: a hanging guard is given up on, not waited out
    assert result.status == "submitted" and result.verified is False
    attempts = result.trajectory.of(AttemptVerified)
    assert [a.attempt for a in attempts] == [1, 2, 3]
    assert all(a.confidence == 0.0 or a.confidence == 0.1 for a in attempts)
    assert guard.calls == 3
    assert len(root.requests) == 4  # explore + three submissions; nothing after the last failed attempt
    assert result.answer == "answer 3"


def test_confident_guard_accepts_and_revision_message_is_shown() -> None:
    scores = iter([0.2, 0.9])
    root = submit_every_turn(5)
    result = RLM(root, verify=lambda a, c: (next(scores), "looks thin"), evidence_check=False).run("q", text="t")
    assert result.verified is True and result.answer == "answer 2"
    revision = root.requests[2][-1]["content"]
    assert "confidence 0.20" in revision and "looks thin" in revision


def test_revision_prompt_replaces_the_default() -> None:
    root = submit_every_turn(5)
    scores = iter([0.0, 1.0])
    RLM(root, verify=lambda a, c: next(scores), revision_prompt="Try again ($confidence).", evidence_check=False).run("q", text="t")
    assert root.requests[2][-1]["content"].endswith("Try again (0.00).")


def test_rule_based_guard() -> None:
    guard = RuleBased(min_chars=8, pattern=r"\d+")
    assert guard("answer 42", {})[0] == 1.0
    score, reason = guard("short", {})
    assert score == 0.0 and "fewer than 8" in reason and "does not match" in reason
    root = ScriptedLM([code("print(1)"), code("submit('no')"), code("submit('the answer is 42')")])
    result = RLM(root, verify=guard, evidence_check=False).run("q", text="t")  # a typed 42 nothing showed
    assert result.answer == "the answer is 42" and result.verified is True


def test_llm_judge_calls_are_on_the_budget() -> None:
    judge_model = ScriptedLM([json.dumps({"confidence": 0.3, "reason": "wrong"}),
                              "confidence: 0.95 looks right"], name="judge")
    root = submit_every_turn(5)
    result = RLM(root, verify=LLMJudge(judge_model, "Must be right."), evidence_check=False).run("q", text="t")
    assert result.verified is True and result.answer == "answer 2"
    assert len(judge_model.requests) == 2 and "Must be right." in judge_model.requests[0][0]["content"]
    assert result.usage.sub_calls == 2


def test_verify_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="min_confidence"):
        RLM(ScriptedLM([]), verify=lambda a, c: 1.0, min_confidence=1.5)
    with pytest.raises(ConfigError, match="max_revisions"):
        RLM(ScriptedLM([]), verify=lambda a, c: 1.0, max_revisions=-1)


def test_attempt_counters_live_in_tree_metadata_for_nested_runs() -> None:
    """Children inherit the guard; each run's attempts are bounded and recorded with its depth."""
    def child(messages: list[dict[str, Any]]) -> str:
        return code("print(1)") if turn_of(messages) == 0 else code("submit('child answer')")

    root = ScriptedLM([code("r = rlm_query('sub question', piece='p')\nprint(r)"), code("submit(r)"),
                       code("submit('again')"), code("submit('last')")])
    result = RLM(root, child_model=ScriptedLM(child), verify=lambda a, c: 0.0, max_revisions=1,
                 max_depth=2).run("q", text="t")
    attempts = result.trajectory.of(AttemptVerified)
    assert Counter(a.depth for a in attempts) == {1: 2, 0: 2}
    assert result.verified is False


# ---- refinement and rounds ------------------------------------------------------------------------------
def test_refine_two_levels_bubbles_the_deepest_answer_up() -> None:
    def brain(messages: list[dict[str, Any]]) -> str:
        first = messages[1]["content"]
        if turn_of(messages) == 0:
            return code("print(sorted(inputs))")
        level = first.count('inputs["draft"]')
        if "draft" in first:
            return code("submit(inputs['draft'] + '+')")
        return code("submit('v1')") if level == 0 else code("submit('?')")

    lm = ScriptedLM(brain)
    result = RLM(lm, refine=2).run("Improve", text="t")
    assert result.answer == "v1++"
    starts = result.trajectory.of(RunStarted)
    assert [s.depth for s in starts] == [0, 1, 2]
    assert [s.label for s in starts][1:] == ["refinement 1", "refinement 2"]
    finals = {f.run_id: f.answer for f in result.trajectory.of(RunFinished)}
    assert finals[starts[2].run_id] == "v1++" and finals[starts[0].run_id] == "v1++"


def test_rounds_accumulate_earlier_answers() -> None:
    def brain(messages: list[dict[str, Any]]) -> str:
        if turn_of(messages) == 0:
            return code("print(sorted(inputs))")
        return code("prev = list(inputs['earlier']) if 'earlier' in inputs else []\nsubmit(len(prev))")

    result = RLM(ScriptedLM(brain), rounds=3).run("Count rounds", text="t")
    assert result.answer == 2
    starts = result.trajectory.of(RunStarted)
    assert [s.label for s in starts] == ["", "round 2/3", "round 3/3"]
    assert all(s.depth == 0 and s.root_run_id == result.run_id for s in starts)


def test_refine_and_rounds_compose() -> None:
    def brain(messages: list[dict[str, Any]]) -> str:
        if turn_of(messages) == 0:
            return code("print(1)")
        return code("d = inputs['draft'] if 'draft' in inputs else 'x'\n"
                    "e = len(inputs['earlier']) if 'earlier' in inputs else 0\nsubmit(f'{d}{e}')")

    result = RLM(ScriptedLM(brain), refine=1, rounds=2).run("q", text="t")
    assert result.answer == "x11"  # round 2: "x" + 1 earlier answer, refined with the same inputs
    assert [s.depth for s in result.trajectory.of(RunStarted)] == [0, 1, 0, 1]


@pytest.mark.parametrize("kwargs, match", [({"refine": 0}, "refine"), ({"rounds": 0}, "rounds"),
                                           ({"rounds": -2}, "rounds"), ({"max_child_concurrency": 0}, "child")])
def test_zero_or_negative_recursion_settings_are_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RLM(ScriptedLM([]), **kwargs)


# ---- telemetry -----------------------------------------------------------------------------------------
def test_opentelemetry_spans_for_runs_turns_sub_calls_and_attempts() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    import rlmnb._telemetry as telemetry

    original = telemetry._tracer
    telemetry._tracer = lambda: provider.get_tracer("rlmnb")  # type: ignore[assignment]
    try:
        root = ScriptedLM([code("r = llm_query_batched(['a', 'b'])\nprint(r)"), code("submit('ok')")])
        RLM(root, ScriptedLM(lambda m: "x"), verify=lambda a, c: 0.9, evidence_check=False).run("q", text="t")
    finally:
        telemetry._tracer = original
    spans = exporter.get_finished_spans()
    names = Counter(s.name for s in spans)
    assert names == {"rlm.run": 1, "rlm.turn": 2, "rlm.sub_call": 2, "rlm.attempt": 1}
    run = next(s for s in spans if s.name == "rlm.run")
    call = next(s for s in spans if s.name == "rlm.sub_call")
    turn_ids = {s.context.span_id for s in spans if s.name == "rlm.turn"}
    assert call.parent.span_id in turn_ids
    assert call.attributes["rlmnb.input_tokens"] > 0 and call.attributes["rlmnb.depth"] == 0
    attempt = next(s for s in spans if s.name == "rlm.attempt")
    assert attempt.attributes["rlmnb.confidence"] == 0.9 and attempt.parent.span_id == run.context.span_id
    assert run.attributes["rlmnb.sub_calls"] == 2
    assert trace.get_tracer_provider() is not provider  # the global provider was left alone


def test_the_answer_schema_binds_the_root_and_its_refinements_but_not_rlm_query_children() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Final:
        total: int

    def child(messages: list[dict[str, Any]]) -> str:
        assert "JSON schema" not in messages[1]["content"]
        return code("print(1)") if turn_of(messages) == 0 else code("submit('three')")  # not a Final: fine here

    root = ScriptedLM([code("r = rlm_query('count', piece='abc')\nprint(r)"), code("submit({'total': 3})")])
    result = RLM(root, child_model=ScriptedLM(child), max_depth=2, schema=Final, sandbox="local").run("q", text="t")
    assert result.answer == Final(3)
    assert "JSON schema" in root.requests[0][1]["content"]


def test_no_span_work_without_a_configured_tracer_provider() -> None:
    from rlmnb import _telemetry as telemetry
    from rlmnb.events import EventBus

    bus = EventBus()
    detach = telemetry.attach(bus)  # the global provider is the API's default proxy: nothing to record
    assert bus._subscribers == []
    detach()
