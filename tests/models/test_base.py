"""Providers that answer HTTP 200 without an answer, over real HTTP: never a silent empty string."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb.events import CodeExecuted, ModelReply, SubCallFinished
from rlmnb.testing import ScriptedLM

INVENTED_SHORT = code("print(len(inputs['text']))") + "\n```output\n3000\n```\n" + code("submit(3000)")


def batch_run(sub: Any, **kw: Any) -> Any:
    root = ScriptedLM([code("print(llm_query_batched(['first piece', 'second piece']))"), code("submit(1)")])
    return RLM(root, sub, sandbox="local", evidence_check=False, **kw).run("q", text="abc")  # submit(1) unprinted


@pytest.mark.parametrize(("fault", "requests", "why"), [
    ("content_filter", 2, "content filter stopped the answer (finish_reason=content_filter)."),
    ("no_choices", 4, "the provider answered with no choices; asked twice."),
    ("no_content", 4, "the provider returned no content (finish_reason=stop); asked twice."),
])
def test_a_non_answer_becomes_an_error_slot(fake_server_factory: Any, fault: str, requests: int, why: str) -> None:
    server = fake_server_factory(faults={fault: 1.0})
    result = batch_run(server.lm("fake-sub"))
    printed = result.trajectory.of(CodeExecuted)[0].stdout
    assert printed.count("[error] EmptyAnswer: openai/fake-sub gave no answer: ") == 2 and why in printed
    assert server.stats()["requests"] == requests  # retried once where that can help, never for a filter
    finished = result.trajectory.of(SubCallFinished)
    assert all(e.reply is None and e.error and e.error.startswith("[error] EmptyAnswer") for e in finished)


def test_a_non_answer_that_comes_right_on_the_second_try_is_an_answer(fake_server_factory: Any) -> None:
    seen: list[int] = []

    def flaky(messages: list[dict[str, Any]]) -> Any:
        seen.append(1)
        return {"choices": []} if len(seen) == 1 else "42"

    server = fake_server_factory(responder=flaky)
    root = ScriptedLM([code("print(llm_query('what?'))"), code("submit(1)")])
    result = RLM(root, server.lm("fake-sub"), sandbox="local", cache=False, evidence_check=False).run("q", text="abc")
    assert result.trajectory.of(CodeExecuted)[0].stdout == "42\n" and len(seen) == 2
    assert "asked_again" in result.trajectory.of(SubCallFinished)[0].meta


def test_reasoning_that_spent_all_tokens_says_so_and_is_not_retried(fake_server_factory: Any) -> None:
    server = fake_server_factory(responder=lambda m: {"content": "", "reasoning_content": "hmm " * 50,
                                                      "finish_reason": "length"})
    result = batch_run(server.lm("fake-sub"))
    printed = result.trajectory.of(CodeExecuted)[0].stdout
    assert "empty at the token limit after reasoning (finish_reason=length); give the sub-model a larger " \
           "max_tokens" in printed
    assert server.stats()["requests"] == 2


def test_a_single_llm_query_raises_the_reason_in_the_snippet(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"content_filter": 1.0})
    root = ScriptedLM([code("llm_query('x')"), code("submit(1)")])
    result = RLM(root, server.lm("fake-sub"), sandbox="local", evidence_check=False).run("q", text="abc")
    first = result.trajectory.of(CodeExecuted)[0]
    assert first.error_type == "EmptyAnswer" and "content filter" in (first.error or "")


def test_non_answers_are_not_cached(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"content_filter": 1.0})
    batch_run(server.lm("fake-sub"), cache=True)
    batch_run(server.lm("fake-sub"), cache=True)
    assert server.stats()["requests"] == 4


def test_the_adapter_reads_reasoning_and_finish_reason(fake_server_factory: Any) -> None:
    server = fake_server_factory(responder=lambda m: {"content": "7", "reasoning_content": "three and four",
                                                      "finish_reason": "length"})
    completion = asyncio.run(server.lm("fake-sub").acomplete([{"role": "user", "content": "3+4?"}]))
    assert (completion.text, completion.reasoning, completion.finish_reason) == ("7", "three and four", "length")
    empty = fake_server_factory(faults={"no_choices": 1.0})
    completion = asyncio.run(empty.lm("fake-sub").acomplete([{"role": "user", "content": "3+4?"}]))
    assert completion.text == "" and completion.meta["empty"] == "no_choices"


def test_a_root_model_over_http_gets_stop_sequences(fake_server_factory: Any) -> None:
    server = fake_server_factory(script={"fake-root": [INVENTED_SHORT, code("submit(1)")]})
    result = RLM(server.lm("fake-root"), ScriptedLM(lambda m: "x"), sandbox="local", evidence_check=False).run(
        "q", text="abc")
    assert result.status == "submitted" and server.stats()["with_stop"] == 2
    first = result.trajectory.of(ModelReply)[0]
    assert first.finish_reason == "stop" and "```output" not in first.text and first.notes == []
