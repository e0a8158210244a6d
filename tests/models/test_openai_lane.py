"""The direct lane (openai_lane) beside litellm, over real HTTP on the fake server: the same replies,
the same empty-answer handling, exact usage, the same errors; and when each transport is chosen."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rlmnb._ground.errors import ConfigError
from rlmnb._models.litellm import LiteLLM, ModelCallFailed, close_loop_clients
from rlmnb._models.openai_lane import HTTPStatusError, choose_transport, wire_fields
from rlmnb._models.resolve import resolve_model
from rlmnb.testing.fake_server import FakeServer

pytestmark = pytest.mark.integration
BOTH = pytest.mark.parametrize("transport", ["litellm", "direct"])


def run(coro_fn: Any) -> Any:
    async def once() -> Any:
        try:
            return await coro_fn()
        finally:
            await close_loop_clients()

    return asyncio.run(once())


def ask(lm: LiteLLM, text: str = "the magic number is 5550123") -> Any:
    return run(lambda: lm.acomplete([{"role": "user", "content": text}]))


@BOTH
@pytest.mark.parametrize(("fault", "empty", "finish"), [("no_choices", "no_choices", None),
                                                        ("no_content", "no_content", "stop"),
                                                        ("content_filter", "no_content", "content_filter")])
def test_empty_replies_come_back_marked_not_raised(fake_server_factory: Any, transport: str, fault: str,
                                                   empty: str, finish: str | None) -> None:
    server = fake_server_factory(faults={fault: 1.0})
    done = ask(server.lm("fake-sub", transport=transport))
    assert done.text == "" and done.meta["empty"] == empty and done.finish_reason == finish
    assert server.stats()["requests"] == 1  # an empty answer is the caller's call, not a retry here


@BOTH
def test_reasoning_is_kept_apart_from_the_answer(fake_server_factory: Any, transport: str) -> None:
    server = fake_server_factory(script={"thinker": [{"content": "42", "reasoning_content": "6 times 7"}]})
    done = ask(server.lm("thinker", transport=transport))
    assert (done.text, done.reasoning, done.finish_reason) == ("42", "6 times 7", "stop")


@BOTH
def test_usage_and_cost_are_exact_over_a_fan_out_under_faults(fake_server_factory: Any, transport: str) -> None:
    sequence = [None, "429", "500", "drop", "malformed", None] * 10
    server = fake_server_factory(fault_sequence=sequence, latency=0.002)
    lm = server.lm("priced-lane-x", transport=transport, max_retries=10, backoff=0.001,
                   input_cost_per_token=1e-6, output_cost_per_token=2e-6)

    async def fan_out() -> list[Any]:
        return list(await asyncio.gather(*(lm.acomplete([{"role": "user", "content": f"magic number is {3000000 + i}"}])
                                           for i in range(80))))

    done = run(fan_out)
    assert [d.text for d in done] == [str(3000000 + i) for i in range(80)]
    stats = server.stats()
    assert sum(d.usage.input_tokens for d in done) == stats["prompt_tokens"]
    assert sum(d.usage.output_tokens for d in done) == stats["completion_tokens"]
    assert sum(d.meta["retries"] for d in done) == stats["requests"] - 80 == 40
    assert sum(d.usage.cost_usd or 0 for d in done) == pytest.approx(
        stats["prompt_tokens"] * 1e-6 + stats["completion_tokens"] * 2e-6)


@BOTH
def test_a_hung_local_request_is_not_sent_twice(fake_server_factory: Any, transport: str) -> None:
    server = fake_server_factory(faults={"timeout": 1.0}, hang_s=10)
    started = time.perf_counter()
    with pytest.raises(ModelCallFailed, match="may still be working on the request"):
        ask(server.lm("fake-sub", transport=transport, timeout=0.3, max_retries=3))
    assert time.perf_counter() - started < 3 and server.stats()["requests"] == 1


def test_the_direct_lane_sends_only_the_chat_body(fake_server_factory: Any) -> None:
    server = fake_server_factory(record_bodies=True)
    lm = server.lm("fake-sub", transport="direct", temperature=0, extra_body={"top_k": 5},
                   extra_headers={"X-Trace": "t1"})
    ask(lm)
    body = server.bodies()[-1]
    assert body == {"model": "fake-sub", "messages": [{"role": "user", "content": "the magic number is 5550123"}],
                    "temperature": 0, "top_k": 5}


def test_auto_is_direct_only_where_the_wire_is_surely_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOSTED_VLLM_API_BASE", raising=False)
    url = "http://127.0.0.1:9/v1"
    assert choose_transport("openai/gpt-4o-mini", None, "auto", {}) == "direct"
    assert choose_transport("groq/llama-3", None, "auto", {}) == "direct"
    assert choose_transport("hosted_vllm/qwen", url, "auto", {}) == "direct"
    assert choose_transport("hosted_vllm/qwen", None, "auto", {}) == "litellm"  # no address known
    assert choose_transport("anthropic/claude-sonnet-4-5", None, "auto", {}) == "litellm"
    assert choose_transport("ollama_chat/qwen3", None, "auto", {}) == "litellm"  # Ollama's own protocol
    assert choose_transport("gemini/gemini-2.5-flash", None, "auto", {}) == "litellm"
    assert choose_transport("openai/x", url, "auto", {"drop_params": True}) == "litellm"  # a litellm-only option
    assert choose_transport("openai/x", url, "litellm", {}) == "litellm"
    assert choose_transport("my-model", url, "direct", {}) == "direct"
    with pytest.raises(ConfigError, match="needs an OpenAI-compatible endpoint"):
        choose_transport("anthropic/claude-sonnet-4-5", None, "direct", {})
    with pytest.raises(ConfigError, match="does not send drop_params"):
        choose_transport("openai/x", url, "direct", {"drop_params": True})
    with pytest.raises(ConfigError, match="transport must be one of"):
        choose_transport("openai/x", url, "fast", {})
    lm = resolve_model("hosted_vllm/qwen", api_base=url, transport="litellm")
    assert isinstance(lm, LiteLLM) and lm.transport == "litellm"


def test_replies_that_are_not_completions_are_bad_gateway_errors() -> None:
    for raw in (b'{"choices": [', b"[1, 2]", b'{"choices": 3}'):
        with pytest.raises(HTTPStatusError) as caught:
            wire_fields(raw)
        assert caught.value.status_code == 502
    fields = wire_fields(b'{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3}}')
    assert fields["choices"][0]["message"]["content"] == "hi" and fields["usage"] == {"prompt_tokens": 3}


@BOTH
def test_cached_prompt_tokens_are_recorded_and_priced_at_the_cached_rate(transport: str) -> None:
    from rlmnb._models.litellm import load_litellm

    load_litellm().register_model({f"openai/cache-{transport}": {
        "input_cost_per_token": 1e-6, "output_cost_per_token": 0.0, "cache_read_input_token_cost": 1e-7,
        "litellm_provider": "openai", "mode": "chat"}})
    with FakeServer(prompt_cache=True) as server:
        lm = server.lm(f"cache-{transport}", transport=transport)
        system = {"role": "system", "content": "You are careful. " * 200}
        first = run(lambda: lm.acomplete([system, {"role": "user", "content": "magic number is 1234567"}]))
        second = run(lambda: lm.acomplete([system, {"role": "user", "content": "magic number is 7654321"}]))
        assert second.usage.cached_input_tokens == server.stats()["cached_tokens"] > 0
    assert first.usage.cached_input_tokens == 0 and first.usage.cost_usd == pytest.approx(first.usage.input_tokens * 1e-6)
    usage = second.usage
    assert usage.cached_input_tokens < usage.input_tokens
    assert usage.cost_usd == pytest.approx((usage.input_tokens - usage.cached_input_tokens) * 1e-6
                                           + usage.cached_input_tokens * 1e-7)
    assert first.usage.saved_usd == 0.0 and usage.saved_usd == pytest.approx(usage.cached_input_tokens * 9e-7)
    assert usage.to_dict()["saved_usd"] == usage.saved_usd and "saved_usd" not in first.usage.to_dict()


@pytest.mark.parametrize("transport", ["litellm", "direct"])
def test_llama_cpps_window_refusal_says_what_fits(transport: str) -> None:
    # llama.cpp's server puts the sizes beside its message, not in it: both transports keep them for the refit
    import http.server
    import json
    import threading

    from rlmnb._ground.errors import PromptTooLarge

    body = json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                 "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
                                 "n_ctx": 8192}}).encode()

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lm = LiteLLM("openai/local", api_base=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="none",
                     transport=transport, max_retries=0)
        with pytest.raises(PromptTooLarge) as refused:
            ask(lm)
        assert refused.value.stated == (8192, 9000)
    finally:
        server.shutdown()
