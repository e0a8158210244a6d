"""End to end over real HTTP: root and sub models on the fake server through litellm, fan-out under faults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rlmnb import RLM, LiteLLM
from rlmnb.events import ConcurrencyChanged, ModelReply, SubCallFinished, TurnsTrimmed

pytestmark = pytest.mark.integration
KEY = "sk-test-0123456789"
LOCAL = {"sandbox": "local"}  # the first test uses the default (kernel) sandbox; the rest need no process


def code(body: str) -> str:
    return f"```python\n{body}\n```"


FIND = code("parts = [inputs['text'][i:i + 400] for i in range(0, len(inputs['text']), 300)]\n"
            "answers = llm_query_batched(['Find the number. ' + p for p in parts])\n"
            "print(len(answers), [a for a in answers if a != 'NONE'])")
SUBMIT = code("submit(sorted({a for a in answers if a != 'NONE'})[0])")
TEXT = (" ".join(f"w{i}" for i in range(700)) + " and the magic number is 8675309, remember it. "
        + " ".join(f"v{i}" for i in range(700)))  # no two chunks alike


def test_root_and_sub_on_the_fake_server_end_to_end(fake_server_factory: Any) -> None:
    server = fake_server_factory(script={"fake-root": [FIND, SUBMIT]}, latency=0.005)
    rlm = RLM(server.lm("fake-root", api_key=KEY), server.lm("fake-sub", api_key=KEY))
    result = rlm.run("What is the magic number?", text=TEXT)
    assert result.status == "submitted", result.error
    assert result.answer == "8675309"
    stats = server.stats()
    subs = result.trajectory.of(SubCallFinished)
    assert len(subs) == result.usage.sub_calls == stats["models"]["fake-sub"] > 10
    assert result.usage.root_calls == len(result.trajectory.of(ModelReply)) == stats["models"]["fake-root"] == 2
    assert result.usage.input_tokens == stats["prompt_tokens"]  # the provider's figures, exactly
    assert result.usage.output_tokens == stats["completion_tokens"]
    assert result.usage.unpriced_calls == result.usage.calls  # no price known: cost unknown, not zero
    assert result.usage.cached_calls == 0
    assert KEY not in result.to_json()


_FAULTS = {3: "429", 7: "500", 13: "429"}  # in every 20 sub-model requests


def test_500_prompt_batch_completes_under_429s_and_500s_with_an_exact_budget(fake_server_factory: Any) -> None:
    batch = code("answers = llm_query_batched([f'item {i}: the magic number is {1000000 + i}.' for i in range(500)])\n"
                 "print(sum(a.startswith('[error]') for a in answers))")
    server = fake_server_factory(script={"fake-root": [batch, code("submit(answers)")]},
                                 fault_sequence=[_FAULTS.get(i % 20) for i in range(500)],
                                 fault_models={"fake-sub"}, retry_after=0.0)
    sub = server.lm("fake-sub", max_retries=12, backoff=0.005)
    result = RLM(server.lm("fake-root"), sub, max_llm_calls=500, **LOCAL).run("List the numbers.", text="x")
    assert result.status == "submitted", result.error
    assert result.answer == [str(1000000 + i) for i in range(500)]  # every slot, in order
    stats = server.stats()
    assert stats["faults"] == {"429": 50, "500": 25}  # the scripted sequence, whatever the arrival order
    assert result.usage.sub_calls == 500  # retries are not extra calls against the budget
    assert result.usage.input_tokens == stats["prompt_tokens"] and result.usage.output_tokens == stats[
        "completion_tokens"]
    finished = result.trajectory.of(SubCallFinished)
    assert sum(e.meta["retries"] for e in finished) == stats["faults"]["429"] + stats["faults"]["500"]
    assert sum(e.meta["rate_limited"] for e in finished) == stats["faults"]["429"]
    limits = [e.limit for e in result.trajectory.of(ConcurrencyChanged)]
    assert limits and min(limits) < 64  # the effective limit adapted and is on record


def test_a_missing_key_stops_the_run_with_one_sentence(fake_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb import MissingAPIKey

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rlm = RLM(LiteLLM("openai/fake-root", api_base=fake_server.url), **LOCAL)
    with pytest.raises(MissingAPIKey) as caught:  # checked before the run starts
        rlm.run("q", text="abc")
    assert str(caught.value) == "No API key for openai: set OPENAI_API_KEY (or pass api_key=...)."
    assert fake_server.stats()["requests"] == 0


def test_a_rejected_sub_model_key_stops_the_run(fake_server_factory: Any) -> None:
    server = fake_server_factory(api_key=KEY, script={"fake-root": [code("print(llm_query_batched(['a', 'b']))"),
                                                                      code("submit(1)")]})
    result = RLM(server.lm("fake-root", api_key=KEY), server.lm("fake-sub", api_key="sk-wrong"), **LOCAL).run(
        "q", text="x")
    assert result.status == "error"
    assert "MissingAPIKey" in (result.error or "") and "OPENAI_API_KEY" in (result.error or "")
    assert server.stats()["models"]["fake-root"] == 1  # stopped after the turn that hit it
    assert "sk-wrong" not in result.to_json() and KEY not in result.to_json()


def test_oversized_prompts_are_refused_and_the_others_go_through(fake_server_factory: Any) -> None:
    ask = code("big = 'word ' * 5000\n"
               "answers = llm_query_batched([big, 'the magic number is 1231231', 'nothing here'])\n"
               "print(answers)")
    server = fake_server_factory(script={"fake-root": [ask, code("submit(answers)")]})
    result = RLM(server.lm("fake-root"), server.lm("fake-sub"), max_sub_prompt_tokens=1000, **LOCAL).run("q", text="x")
    assert result.status == "submitted"
    first, second, third = result.answer
    assert first.startswith("[error] PromptTooLarge") and "Split the text" in first
    assert (second, third) == ("1231231", "NONE")
    assert server.stats()["models"]["fake-sub"] == 2  # the big one was never sent
    assert result.usage.sub_calls == 2


def test_a_providers_context_error_becomes_an_error_slot(fake_server_factory: Any) -> None:
    ask = code("answers = llm_query_batched(['word ' * 3000, 'the magic number is 4564564'])\nprint(answers)")
    server = fake_server_factory(script={"fake-root": [ask, code("submit(answers)")]}, context_window=2000)
    result = RLM(server.lm("fake-root"), server.lm("fake-sub"), **LOCAL).run("q", text="x")
    assert result.status == "submitted"
    assert result.answer[0].startswith("[error] PromptTooLarge") and "Split the text" in result.answer[0]
    assert result.answer[1] == "4564564"
    assert result.usage.sub_calls == 1  # the refused slot was given back to the budget


def test_rerunning_a_cell_serves_sub_calls_from_the_cache(fake_server_factory: Any) -> None:
    server = fake_server_factory(script={"fake-root": [FIND, SUBMIT]})
    rlm = RLM(server.lm("fake-root"), server.lm("fake-sub"), **LOCAL)
    first = rlm.run("What is the magic number?", text=TEXT)
    sent = server.stats()["models"]["fake-sub"]
    second = rlm.run("What is the magic number?", text=TEXT)
    assert second.answer == first.answer == "8675309"
    assert server.stats()["models"]["fake-sub"] == sent  # nothing new reached the server
    cached = second.trajectory.of(SubCallFinished)
    assert cached and all(e.cached and e.usage["cost_usd"] == 0.0 for e in cached)
    assert second.usage.cached_calls == len(cached)
    data = json.loads(second.to_json())
    assert any(e.get("cached") for e in data["trajectory"]["events"] if e["kind"] == "sub_call_finished")
    third = RLM(server.lm("fake-root"), server.lm("fake-sub"), cache=False, **LOCAL).run(
        "What is the magic number?", text=TEXT)
    assert third.usage.cached_calls == 0
    assert server.stats()["models"]["fake-sub"] == sent + third.usage.sub_calls  # every call sent, twins too


def test_an_output_over_the_root_window_is_cut_to_fit_over_http(fake_server_factory: Any) -> None:
    # the server refuses prompts over its window; the latest turn printed more than the window holds
    big = code("print('HEAD' + 'word ' * 12_000 + 'TAIL')")
    server = fake_server_factory(script={"fake-root": [big, code("submit('done')")]}, context_window=4000)
    result = RLM(server.lm("fake-root"), server.lm("fake-sub"), max_output_chars=100_000, evidence_check=False,
                 **LOCAL).run("q", text="x")
    assert result.status == "submitted" and result.answer == "done", result.error
    assert [e.clipped for e in result.trajectory.of(TurnsTrimmed)][-1] == [1]
