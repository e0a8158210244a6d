"""Prompt caching on the root conversation, over real HTTP on the fake server: Anthropic-style
`cache_control` marks on the prefix, a byte-identical prefix across turns for OpenAI-style providers,
and the provider's cached tokens in the run's usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rlmnb import RLM
from rlmnb._engine.prompt_cache import mark_prefix, needs_cache_marks
from rlmnb._ground.config import PROFILES
from rlmnb.testing.fake_behaviours import text_of

WITH_BREAKER = ("repeat_breaker", *PROFILES["default"])  # the policy these tests are about, beside its profile

pytestmark = pytest.mark.integration
LOCAL = {"sandbox": "local"}


def code(body: str) -> str:
    return f"```python\n{body}\n```"


STEPS = [code("x = len(inputs['text'])\nprint(x)"), code("y = llm_query('the magic number is 7654321')\nprint(y)"),
         code("print(x, y)"), code("submit(y)")]


def test_an_anthropic_model_gets_cache_marks_on_its_stable_prefix(fake_server_factory: Any) -> None:
    server = fake_server_factory(script={"anthropic/claude-x": STEPS}, record_bodies=True)
    root = server.lm("openrouter/anthropic/claude-x", transport="direct")
    result = RLM(root, server.lm("fake-sub"), **LOCAL).run("What is the number?", text="some text")
    assert result.answer == "7654321", result.error
    requests = [b["messages"] for b in server.bodies() if b["model"] == "anthropic/claude-x"]
    assert len(requests) == 4
    for messages in requests:
        marked = [i for i, m in enumerate(messages) if isinstance(m["content"], list)
                  and m["content"][-1].get("cache_control") == {"type": "ephemeral"}]
        assert marked == sorted({0, 1, len(messages) - 1})  # system, the opening, the newest message
    texts = [[text_of(m) for m in messages] for messages in requests]
    for earlier, later in zip(texts, texts[1:], strict=False):
        assert later[:len(earlier)] == earlier  # marks aside, each request extends the one before


def test_an_openai_style_prefix_is_byte_identical_across_turns_and_its_cache_counted(
        fake_server_factory: Any) -> None:
    server = fake_server_factory(script={"fake-root": STEPS}, record_bodies=True, prompt_cache=True)
    result = RLM(server.lm("fake-root"), server.lm("fake-sub"), **LOCAL).run("What is the number?", text="text")
    assert result.answer == "7654321", result.error
    requests = [b["messages"] for b in server.bodies() if b["model"] == "fake-root"]
    assert len(requests) == 4
    for earlier, later in zip(requests, requests[1:], strict=False):
        assert json.dumps(later[:len(earlier)]) == json.dumps(earlier)  # byte-identical prefix
        assert all(isinstance(m["content"], str) for m in later)  # no marks where the provider caches itself
    assert result.usage.cached_input_tokens == server.stats()["cached_tokens"] > 0


def test_trimming_keeps_the_system_prompt_and_opening_byte_identical(fake_server_factory: Any) -> None:
    noisy = [code(f"tries = globals().get('tries', 0) + 1\nprint('{c}' * 3000)\nraise ValueError(f'{c} {{tries}}')")
             for c in "vwxy"]
    server = fake_server_factory(script={"fake-root": [*noisy, code("submit('done')")]}, record_bodies=True)
    # the fake server picks a reply by the number of assistant messages it is sent, so the window must keep two
    # turns beside the system prompt and the opening (4,400 tokens: with 1,000 fewer only one fits and the server
    # sends turn 2's code again; each run raises another error, so a repeat runs without being asked again); 'done'
    # is never printed, so the evidence check is off
    result = RLM(server.lm("fake-root"), server.lm("fake-sub"), max_context_tokens=4400, max_output_chars=4000,
                 evidence_check=False, **LOCAL).run("What is it?", text="alpha")
    assert result.answer == "done", result.error
    requests = [b["messages"] for b in server.bodies()]
    assert any("were dropped" in text_of(m) for m in requests[-1])
    assert all(json.dumps(r[:2]) == json.dumps(requests[0][:2]) for r in requests)


def test_which_models_need_marks_and_what_marking_changes() -> None:
    assert needs_cache_marks("anthropic/claude-sonnet-4-5")
    assert needs_cache_marks("bedrock/anthropic.claude-3-5-sonnet") and needs_cache_marks("vertex_ai/claude-3-7")
    assert needs_cache_marks("openrouter/anthropic/claude-x")
    assert not needs_cache_marks("openai/gpt-5-mini") and not needs_cache_marks("gemini/gemini-2.5-flash")
    assert not needs_cache_marks("openrouter/openai/gpt-4o")
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "o"}]}]
    before = json.dumps(messages)
    marked = mark_prefix(messages, 2)
    assert json.dumps(messages) == before  # the conversation itself is never changed
    assert marked[0]["content"] == [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]
    assert marked[2] == messages[2] and marked[3]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_re_ask_is_sent_without_cache_marks() -> None:
    # its request (the code of earlier steps left out, one user message) is a prefix no later call reads again
    from rlmnb.testing import ScriptedLM

    look = code("print(len(inputs['text']))")
    root = ScriptedLM([look, look, code("print(inputs['text'][:4])"), code("submit('some')")],
                      name="anthropic/claude-x")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), **LOCAL, policies=WITH_BREAKER).run("What is it?", text="some text")
    assert result.answer == "some", result.error
    marked = [any(isinstance(m["content"], list) and m["content"][-1].get("cache_control") for m in request)
              for request in root.requests]
    assert marked == [True, True, False, True]
