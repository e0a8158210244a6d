"""The run loop end to end with scripted models in the local sandbox."""

from __future__ import annotations

import _thread
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code, observations

from rlmnb import RLM, ConfigError, InputError, Trajectory
from rlmnb.events import (
    CodeExecuted,
    GuardRejected,
    ModelReply,
    PolicyActed,
    RunFinished,
    SubCallStarted,
    TurnsTrimmed,
)
from rlmnb.testing import ScriptedLM
from rlmnb.testing.generators import haystack
from rlmnb.testing.responders import find_needle
from rlmnb.testing.scenarios import needle_scenario


def run(replies: list[str], *, sub: Any = None, **kw: Any) -> tuple[Any, ScriptedLM]:
    root = ScriptedLM(replies, name="root")
    inputs = kw.pop("inputs", {"text": "alpha beta gamma"})
    rlm = RLM(root, sub or ScriptedLM(lambda m: "sub-reply", name="sub"), **kw)
    return rlm.run(kw.pop("question", "What is it?"), **inputs), root


# ---- the main scenario ------------------------------------------------------------------------------
def test_needle_in_50mb_haystack_end_to_end() -> None:
    hay = haystack(50_000_000, seed=7)
    chunks = 40
    scenario = needle_scenario(10, chunks=chunks)  # reuse its scripted code, with our own haystack
    chunk = -(-len(hay.text) // chunks)
    from rlmnb.testing.scenarios import NEEDLE_EXPLORE, NEEDLE_SEARCH, NEEDLE_SUBMIT, NEEDLE_VERIFY

    root = ScriptedLM([NEEDLE_EXPLORE, NEEDLE_SEARCH.format(chunk=chunk), NEEDLE_VERIFY, NEEDLE_SUBMIT])
    sub = ScriptedLM(find_needle)
    result = RLM(root, sub, max_llm_calls=100).run(scenario.question, text=hay.text)

    assert result.status == "submitted", result.reason
    assert result.answer == hay.needle
    assert result.usage.sub_calls == chunks == len(sub.requests)
    assert result.usage.root_calls == 4 == len(root.requests)
    assert result.usage.calls == len(root.requests) + len(sub.requests)
    # the root model never saw the haystack beyond the preview: no 200-char window of it in any request
    preview = result.trajectory.events[0].summary  # type: ignore[attr-defined]
    sent = "\n".join(m["content"] for req in root.requests for m in req)
    step = 997
    for start in range(0, len(hay.text) - 200, step):
        window = hay.text[start:start + 200]
        if window in preview:
            continue
        assert window not in sent, f"root saw haystack text at {start}"
    # the needle reaches the root only through the sub-model's answers (third request on)
    assert not any(hay.needle in m["content"] for req in root.requests[:2] for m in req)
    assert hay.needle in root.requests[2][-1]["content"]


def test_usage_counts_every_model_request_and_nothing_else() -> None:
    result, root = run([code("x = llm_query_batched(['a', 'b', 'c'])\nprint(x)"), code("submit(len(x))")])
    assert result.status == "submitted" and result.answer == 3
    assert result.usage.root_calls == 2 and result.usage.sub_calls == 3
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


# ---- guards -------------------------------------------------------------------------------------------
def test_first_turn_submit_is_rejected_then_accepted() -> None:
    result, root = run([code("submit('guess')"), code("print(inputs['text'][:5])"), code("submit('alpha')")],
                       policies=["look_first"])
    assert result.answer == "alpha"
    rejected = result.trajectory.of(GuardRejected)
    assert [(r.turn, r.guard) for r in rejected] == [(1, "look_first")]
    assert [(e.turn, e.policy, e.action) for e in result.trajectory.of(PolicyActed)] == [(1, "look_first", "send_back")]
    assert rejected[0].reason in observations(root)[0]  # the model is told why


def test_first_turn_submit_allowed_by_setting() -> None:
    result, _ = run([code("submit('quick')")], allow_first_turn_submit=True, evidence_check=False)
    assert result.status == "submitted" and result.answer == "quick"


def test_submit_while_handling_exception_is_rejected() -> None:
    replies = [code("print(1)"), code("try:\n    int('x')\nexcept ValueError:\n    submit(0)"), code("submit(1)")]
    result, root = run(replies)
    assert result.answer == 1
    assert [r.guard for r in result.trajectory.of(GuardRejected)] == ["exception"]
    assert "ValueError" in observations(root)[1]


def test_unjsonable_submit_is_rejected() -> None:
    result, root = run([code("print(1)"), code("submit(object())"), code("submit('ok')")], evidence_check=False)
    assert result.answer == "ok"
    assert "plain data" in observations(root)[1]


@dataclasses.dataclass
class Verdict:
    label: str
    count: int


def test_schema_validation_rejects_then_accepts() -> None:
    replies = [code("print(2)"), code("submit({'label': 'x'})"), code("submit({'label': 'x', 'count': '3'})")]
    result, root = run(replies, schema=Verdict)
    assert result.status == "submitted"
    assert result.answer == Verdict("x", 3)
    assert "count: Field required" in observations(root)[1]
    assert '"count"' in root.requests[0][1]["content"]  # the schema is in the first prompt


# ---- extraction, observations, truncation -----------------------------------------------------------------
def test_reply_without_code_gets_feedback() -> None:
    result, root = run(["I will think about it.", code("print('x')"), code("submit(1)")])
    assert result.answer == 1
    assert "nothing ran" in observations(root)[0]


def test_indented_and_final_in_prose_layers_run() -> None:
    result, _ = run(["Counting:\n\n    n = len(inputs['text'])\n    print(n)\n", 'Done: FINAL("sixteen")'],
                    evidence_check=False)  # "sixteen" is in no output: the check would send it back once
    assert result.status == "submitted" and result.answer == "sixteen"
    assert result.trajectory.of(CodeExecuted)[0].stdout == "16\n"


def test_turn_headers_and_end_warnings() -> None:
    result, root = run([code(f"print({i})") for i in range(4)] + ["FINAL('x')"], max_iterations=4)
    obs = observations(root)[:-1]  # the last user message is the fallback request
    assert [o.splitlines()[0] for o in obs] == ["Turn 1/4", "Turn 2/4", "Turn 3/4", "Turn 4/4"]
    assert "left:" not in obs[0] and "left:" not in obs[3]
    assert "2 step(s) left" in obs[1]
    assert "1 step(s) left" in obs[2]


def test_errors_are_observations_not_crashes() -> None:
    result, root = run([code("1/0"), code("print('fine')"), code("submit(2)")], evidence_check=False)
    assert result.answer == 2
    assert "ZeroDivisionError" in observations(root)[0]


def test_long_output_is_cut_keeping_head_and_tail() -> None:
    body = "print('HEAD' + 'x' * 50000 + 'TAIL')"
    result, root = run([code(body), code("submit(1)")], max_output_chars=1000)
    obs = observations(root)[0]
    assert "HEAD" in obs and "TAIL" in obs
    assert "the output was" in obs and len(obs) < 3000


def test_snippet_timeout_is_an_observation() -> None:
    result, root = run([code("while True:\n    pass"), code("submit('after')")], timeout=0.3, evidence_check=False)
    assert result.answer == "after"
    assert "did not finish within 0.3 seconds" in observations(root)[0]


# ---- trimming -------------------------------------------------------------------------------------------
def test_old_low_value_turns_are_trimmed() -> None:
    noisy = [code(f"print('{c}' * 3000)") for c in "vwxy"]  # distinct: a repeated step would be a stall
    replies = [code("print('first')"), noisy[0], code("1/0"), *noisy[1:], code("print('z')"),
               code("submit('done')")]
    # room for the system prompt, the opening and about three of the noisy turns
    result, root = run(replies, max_context_tokens=3500, max_output_chars=4000, evidence_check=False)
    assert result.answer == "done"
    trimmed = result.trajectory.of(TurnsTrimmed)
    assert trimmed
    dropped = sorted(t for e in trimmed for t in e.dropped)
    assert 3 not in dropped  # the error turn is kept while plain turns can go
    last = root.requests[-1]
    assert "were dropped" in last[2]["content"]  # its own message: the opening stays byte-identical
    assert last[0]["role"] == "system" and "Question:" in last[1]["content"]


# ---- fallback and budgets -------------------------------------------------------------------------------
def test_fallback_when_turns_run_out() -> None:
    result, root = run([code("print(1)"), code("print(2)"), "My best answer: FINAL('partial')"], max_iterations=2)
    assert result.status == "fallback" and result.answer == "partial"
    assert result.usage.root_calls == 3
    assert "used all 2 steps" in root.requests[-1][-1]["content"]


def test_sub_call_budget_exhausted_is_told_to_the_model() -> None:
    replies = [code("r = llm_query_batched(['a'] * 5)"), code("print(llm_query('one'))"), code("submit('ok')")]
    result, root = run(replies, max_llm_calls=3, evidence_check=False)
    assert result.status == "submitted"
    assert result.usage.sub_calls == 1  # the batch of 5 spent nothing, the single call fit
    assert "BudgetExhausted" in observations(root)[0] and "Send at most 3 prompts at once" in observations(root)[0]


def test_token_budget_exhaustion_ends_the_run() -> None:
    result, _ = run([code("print(1)")] * 10, max_tokens=1500)
    assert result.status == "budget_exhausted"
    assert "Token budget" in result.reason


# ---- bad input, before any model call --------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"max_iterations": 0}, "max_iterations"), ({"timeout": -1}, "timeout"),
    ({"max_llm_calls": -2}, "max_llm_calls"), ({"sandbox": "docker"}, "sandbox"),
    ({"max_turns": 3}, "Unknown setting"),
])
def test_bad_settings(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RLM(ScriptedLM([]), **kwargs)


def test_empty_question_and_bad_inputs_fail_before_any_call(tmp_path: Path) -> None:
    root = ScriptedLM([code("submit(1)")])
    rlm = RLM(root)
    with pytest.raises(ConfigError, match="question is empty"):
        rlm.run("   ", text="x")
    with pytest.raises(InputError, match="lock"):
        rlm.run("q", lock=threading.Lock())
    with pytest.raises(InputError, match="no file or directory"):
        rlm.run("q", notes=tmp_path / "missing.md")
    assert root.requests == []


def test_no_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="No model given"):
        RLM()


def test_tool_name_clash_is_an_error() -> None:
    def submit() -> None: ...

    with pytest.raises(ConfigError, match="reserved"):
        RLM(ScriptedLM([]), tools=[submit])


def test_script_exhausted_is_an_error_status() -> None:
    result, _ = run([code("print(1)")])
    assert result.status == "error" and "ran out of replies" in (result.error or "")


# ---- trajectory, events, async, isolation -----------------------------------------------------------------
def test_trajectory_round_trips_and_subscribers_see_events_live(tmp_path: Path) -> None:
    seen: list[str] = []
    root = ScriptedLM([code("x = llm_query('hi')\nprint(x)"), code("submit(x)")])
    rlm = RLM(root, ScriptedLM(lambda m: "hello"), on_event=lambda e: seen.append(e.kind))
    result = rlm.run("Say hi", text="abc")
    assert seen[0] == "run_started" and seen[-1] == "run_finished"
    assert "sub_call_started" in seen and "sub_call_finished" in seen
    path = result.save(tmp_path / "run.json")
    loaded = Trajectory.load(path)
    assert [e.to_dict() for e in loaded] == [e.to_dict() for e in result.trajectory]
    data = json.loads(path.read_text())
    assert data["trajectory"]["schema_version"] == 1
    final = loaded.final()
    assert isinstance(final, RunFinished) and final.status == "submitted" and final.answer == "hello"
    assert loaded.of(SubCallStarted)[0].prompt == "hi"
    assert loaded.of(ModelReply)[0].usage["input_tokens"] > 0


async def test_arun_from_async_code() -> None:
    rlm = RLM(ScriptedLM([code("print(1)"), code("submit('async')")]), evidence_check=False)
    result = await rlm.arun("q", text="abc")
    assert result.answer == "async"


def test_concurrent_runs_have_separate_budgets() -> None:
    def make() -> RLM:
        return RLM(ScriptedLM([code("r = llm_query_batched(['a'] * 3)"), code("submit(len(r))")], latency=0.05),
                   ScriptedLM(lambda m: "x"), max_llm_calls=3)

    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(make().run("q", text="t"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.answer for r in results] == [3, 3, 3]


def test_inputs_are_never_modified_by_sandbox_code() -> None:
    import pandas as pd

    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    before = df.copy(deep=True)
    replies = [code("t = inputs['t']\nt.iloc[0, 0] = 99\nt['c'] = 1\nt.sort_values('a', inplace=True)\n"
                    "print(t.shape)"), code("submit(int(inputs['t']['a'].sum()))")]
    result, _ = run(replies, inputs={"t": df})
    pd.testing.assert_frame_equal(df, before)
    assert result.answer == 6


def test_keyboard_interrupt_returns_interrupted_result() -> None:
    root = ScriptedLM([code("import time\nfor _ in range(200):\n    time.sleep(0.05)")] * 3, latency=0.0)
    rlm = RLM(root, timeout=30)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    result = rlm.run("q", text="abc")
    timer.join()
    assert result.status == "interrupted"
    assert result.trajectory.final() is not None
    assert not [t for t in threading.enumerate() if t.name.startswith(("rlmnb-run", "rlmnb-snippet"))]


def test_continue_keeps_sandbox_and_conversation() -> None:
    root = ScriptedLM([code("kept = inputs['text'].upper()\nprint(kept)"), code("submit(kept)"),
                       code("print(kept.lower())"), code("submit(kept.lower())")])
    rlm = RLM(root)
    first = rlm.run("Shout it", text="abc", keep_session=True)
    assert first.answer == "ABC" and first.session is not None
    second = rlm.run("Now whisper it", continue_from=first)
    assert second.answer == "abc"
    assert any("New question" in m["content"] for m in root.requests[-1] if m["role"] == "user")
    with pytest.raises(ConfigError, match="kept no session"):
        rlm.run("again", continue_from=second)
    first.session.close()


def test_instructions_append_to_or_replace_the_rules() -> None:
    _, root = run([code("print(1)"), code("submit(1)")], instructions="Answer in French.", sandbox="local")
    system = root.requests[0][0]["content"]
    assert system.endswith("Answer in French.") and "In the REPL:" in system
    _, root = run([code("print(1)"), code("submit(1)")], instructions="Only these rules.",
                  replace_instructions=True, sandbox="local")
    assert root.requests[0][0]["content"] == "Only these rules."


def test_a_used_up_script_plays_again_for_a_new_run() -> None:
    # the README's quickstart cell, run twice: the second run replays the same script (not ScriptExhausted)
    root = ScriptedLM([code("x = llm_query('hi')\nprint(x)"), code("submit(x)")])
    sub = ScriptedLM(["hello"])
    first = RLM(root, sub, sandbox="local").run("q", text="t")
    second = RLM(root, sub, sandbox="local").run("q", text="t")
    assert first.status == second.status == "submitted" and first.answer == second.answer == "hello"
    assert root.remaining == 0 and len(root.requests) == 4


def test_the_config_lists_every_policy_the_engine_has_and_its_docs_name_them() -> None:
    # one list of names: the config validates against it, the engine builds from it, the help text names it
    from rlmnb import POLICIES, PROFILES, RLMConfig
    from rlmnb._engine.policies import REGISTRY, policies_for
    from rlmnb._ground.flags import setting_docs

    assert tuple(REGISTRY) == POLICIES and all(set(names) <= set(POLICIES) for names in PROFILES.values())
    assert policies_for(RLMConfig(policies="all"), None) == POLICIES
    assert set(PROFILES["paper"]) < set(PROFILES["default"]) < set(PROFILES["small"])  # each adds to the last
    assert all(name in " ".join(setting_docs()["policies"].split()) for name in POLICIES)


def test_a_root_request_the_model_refuses_as_too_large_is_cut_and_asked_again() -> None:
    # the server's tokenizer counts more than ours (number-heavy outputs): the turn cuts the conversation to
    # three quarters of what was refused and asks again, instead of ending the run in an error
    from rlmnb._ground.errors import PromptTooLarge
    from rlmnb.events import TurnsTrimmed

    big = code("print(' '.join(str(i) for i in range(1600)))")
    steps = [big, code("print('a')"), big.replace("1600", "1601"), code("print('b')"), code("submit('done')")]

    answered: list[int] = []

    def root(messages: list[dict[str, Any]]) -> str:
        if sum(len(str(m["content"])) for m in messages) > 16_000:
            raise PromptTooLarge("the request is larger than the model's window")
        answered.append(1)
        return steps[len(answered) - 1]

    result = RLM(ScriptedLM(root), sandbox="local", max_output_chars=9_000).run("q", text="t")
    assert result.status == "submitted" and result.answer == "done"
    assert result.trajectory.of(TurnsTrimmed)


def test_an_output_larger_than_the_window_is_cut_in_the_middle_and_the_run_goes_on() -> None:
    # the latest turn is never dropped: when it alone is over the window, its observation is cut to fit
    from rlmnb._ground.tokens import count_messages

    body = "print('HEAD' + ' '.join(str(i) for i in range(20_000)) + 'TAIL')"
    result, root = run([code(body), code("submit('done')")], max_output_chars=200_000, max_context_tokens=4000,
                       evidence_check=False)
    assert result.status == "submitted" and result.answer == "done"
    assert [e.clipped for e in result.trajectory.of(TurnsTrimmed)] == [[1]]
    last = root.requests[-1]
    assert count_messages(last) <= 4000
    assert "HEAD" in last[-1]["content"] and "TAIL" in last[-1]["content"]
    assert result.trajectory.of(CodeExecuted)[0].stdout.count(" ") > 19_000  # the record keeps the whole output


def test_a_server_counting_more_than_us_gets_the_latest_output_cut_after_its_refusal() -> None:
    # a server tokenizer that counts every digit (ours groups them): the request we sized to fit is refused, the
    # refit cuts the conversation down to the latest turn and then cuts that turn's output, instead of ending
    from rlmnb._ground.errors import PromptTooLarge

    steps = [code("print(' '.join(str(i) for i in range(3000)))"), code("submit('done')")]
    answered: list[int] = []

    def root(messages: list[dict[str, Any]]) -> str:
        if sum(ch.isdigit() for m in messages for ch in str(m["content"])) > 8_000:
            raise PromptTooLarge("the request is larger than the model's window")
        answered.append(1)
        return steps[len(answered) - 1]

    result = RLM(ScriptedLM(root), sandbox="local", max_output_chars=50_000, evidence_check=False).run("q", text="t")
    assert result.status == "submitted" and result.answer == "done"
    assert any(e.clipped == [1] for e in result.trajectory.of(TurnsTrimmed))


def test_a_root_that_refuses_every_request_as_too_large_ends_the_run_after_the_refits() -> None:
    from rlmnb._engine.turn import ROOT_REFITS
    from rlmnb._ground.errors import PromptTooLarge

    asked: list[int] = []

    def root(messages: list[dict[str, Any]]) -> str:
        asked.append(1)
        raise PromptTooLarge("the request is larger than the model's window")

    result = RLM(ScriptedLM(root), sandbox="local").run("q", text="t")
    assert result.status == "error" and result.answer is None
    assert len(asked) == ROOT_REFITS + 1
