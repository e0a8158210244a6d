"""Request policy: slow servers on this machine (a longer default timeout, no retry of a timed-out request,
snippet time) and how long a server asked us to wait."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rlmnb._engine.limits import run_limits
from rlmnb._ground.config import RLMConfig
from rlmnb._models.litellm import LiteLLM, ModelCallFailed, close_loop_clients
from rlmnb._models.request_policy import (
    LOCAL_TIMEOUT,
    REMOTE_TIMEOUT,
    is_local,
    is_loopback,
    retry_after,
    server_slots,
    stated_window,
)
from rlmnb.testing import ScriptedLM


@pytest.mark.parametrize(("base", "local"), [
    ("http://127.0.0.1:8899/v1", True), ("http://localhost:11434", True), ("http://[::1]:8000/v1", True),
    ("127.0.0.2:8080", True), ("https://api.openai.com/v1", False), ("http://10.0.0.5:8000/v1", False), (None, False),
])
def test_loopback_addresses(base: str | None, local: bool) -> None:
    assert is_loopback(base) is local


def test_local_providers_and_default_timeouts() -> None:
    assert is_local("ollama_chat/qwen3", None) and not is_local("openai/gpt-5-mini", None)
    assert LiteLLM("openai/local", api_base="http://127.0.0.1:8899/v1").timeout == LOCAL_TIMEOUT
    assert LiteLLM("openai/gpt-5-mini").timeout == REMOTE_TIMEOUT
    assert LiteLLM("openai/local", api_base="http://127.0.0.1:1/v1", timeout=30).timeout == 30
    assert RLMConfig().request_timeout is None


def test_a_timed_out_local_request_is_not_sent_again(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"timeout": 1.0}, hang_s=5)
    lm = server.lm("fake-sub", max_retries=3, timeout=0.3, backoff=0.01)
    assert lm.local
    async def ask() -> Any:
        try:
            return await lm.acomplete([{"role": "user", "content": "hi"}])
        finally:
            await close_loop_clients()

    with pytest.raises(ModelCallFailed, match="may still be working on the request, so it was not sent again"):
        asyncio.run(ask())
    assert server.stats()["requests"] == 1


def test_requests_to_a_one_slot_local_server_wait_their_turn_on_our_side(fake_server_factory: Any) -> None:
    # recorded (RULER 32K, Qwen2.5-Coder 1.5B on llama-cpp-python): the first reading's three 11K-token parts went
    # out at once; the server answers one at a time, the first took 359 s and the other two timed out at 600 s
    # while they waited inside the server
    server = fake_server_factory(latency=0.4, slots=1)
    root, sub = server.lm("fake-root", timeout=1.0), server.lm("fake-sub", timeout=1.0)
    assert root.parallel == sub.parallel == 1 and LiteLLM("openai/gpt-5-mini").parallel is None

    async def five(*lms: LiteLLM) -> list[Any]:
        asks = [lms[i % len(lms)].acomplete([{"role": "user", "content": f"part {i}"}]) for i in range(5)]
        try:
            return await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await close_loop_clients()

    answers = asyncio.run(five(root, sub))  # 2 s of work in all, each request under its 1 s timeout
    assert not [a for a in answers if isinstance(a, BaseException)]
    assert server.stats()["peak_in_flight"] == 1 and server.stats()["requests"] == 5
    # told the server has more slots than it has, the requests queue inside it and the late ones time out
    server.reset()
    eager = server.lm("fake-sub", timeout=1.0, parallel=5)
    failed = [a for a in asyncio.run(five(eager)) if isinstance(a, BaseException)]
    assert failed and all("did not answer within 1 s" in str(a) for a in failed)
    with pytest.raises(ValueError, match="parallel is a number of requests"):
        LiteLLM("openai/local", api_base="http://127.0.0.1:1/v1", parallel=0)


def test_the_snippet_timeout_leaves_room_for_one_local_sub_call() -> None:
    local_sub = LiteLLM("openai/local", api_base="http://127.0.0.1:8899/v1", timeout=300)
    assert run_limits(RLMConfig(timeout=60), ScriptedLM([]), local_sub).snippet_timeout == 330
    remote_sub = LiteLLM("openai/gpt-5-mini", timeout=300)
    assert run_limits(RLMConfig(timeout=60), ScriptedLM([]), remote_sub).snippet_timeout == 60


def test_retry_after_header_forms() -> None:
    class Exc(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            self.litellm_response_headers = headers

    assert retry_after(Exc({"retry-after-ms": "1500"})) == 1.5
    assert retry_after(Exc({"Retry-After": "2"})) == 2.0
    assert 5 < (retry_after(Exc({"retry-after": time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                                                time.gmtime(time.time() + 10))})) or 0) <= 10
    assert retry_after(Exc({})) is None and retry_after(ValueError()) is None


# ---- how many requests a server on this machine gets at once: what it says -----------------------------------
def peak_of(server: Any, lm: LiteLLM, n: int = 6) -> int:
    """The most requests `server` held at once while `lm` sent `n` together."""
    async def together() -> None:
        try:
            await asyncio.gather(*(lm.acomplete([{"role": "user", "content": f"part {i}"}]) for i in range(n)))
        finally:
            await close_loop_clients()

    asyncio.run(together())
    return int(server.stats()["peak_in_flight"])


def test_a_llama_cpp_server_gets_as_many_requests_as_its_slots(fake_server_factory: Any) -> None:
    server = fake_server_factory(latency=0.2, slots=3, report_slots=True)
    lm = server.lm("fake-sub")
    assert peak_of(server, lm) == 3 and lm.parallel == 3


@pytest.mark.parametrize("owner", ["vllm", "sglang"])
def test_a_batching_server_gets_no_gate(owner: str, fake_server_factory: Any) -> None:
    server = fake_server_factory(latency=0.2, owned_by=owner)
    lm = server.lm("fake-sub")
    assert peak_of(server, lm) == 6 and lm.parallel is None


def test_a_server_that_says_nothing_gets_one_and_parallel_wins(fake_server_factory: Any) -> None:
    quiet = fake_server_factory(latency=0.1)
    assert peak_of(quiet, quiet.lm("fake-sub")) == 1
    told = fake_server_factory(latency=0.1, slots=4, report_slots=True)
    assert peak_of(told, told.lm("fake-sub", parallel=2)) == 2
    batching = fake_server_factory(latency=0.1, owned_by="vllm")
    assert peak_of(batching, batching.lm("fake-sub", parallel=1)) == 1


def test_a_server_restarted_on_the_same_address_is_asked_again(fake_server_factory: Any) -> None:
    # each run (event loop) asks afresh: a server restarted on the same port with other slots is seen as it is now
    server = fake_server_factory(latency=0.1, slots=1, report_slots=True)
    assert asyncio.run(server_slots(server.url)) == 1
    server.slots = 3  # restarted with --parallel 3 on the same address
    assert asyncio.run(server_slots(server.url)) == 3


@pytest.mark.parametrize(("text", "stated"), [
    # llama-cpp-python (chat): the window, the prompt and the completion it reserved
    ("This model's maximum context length is 16384 tokens. However, you requested 18432 tokens (16384 in the "
     "messages, 2048 in the completion). Please reduce the length of the messages or completion.", (14336, 16384)),
    # OpenAI's wording, which vLLM copies
    ("This model's maximum context length is 4,000 tokens. However, your messages resulted in 5,123 tokens. "
     "Please reduce the length of the messages.", (4000, 5123)),
    # llama.cpp's server
    ('{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",'
     '"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}', (8192, 9000)),
    ("prompt is too long", None),
    ("This model's maximum context length is 4000 tokens.", None),
])
def test_a_context_refusal_says_what_fits_where_the_server_said_it(text: str, stated: Any) -> None:
    assert stated_window(RuntimeError(text)) == stated
