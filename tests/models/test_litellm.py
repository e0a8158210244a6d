"""The litellm adapter through real HTTP on the fake server: usage, cost, retries, errors, secrets.

Every test runs on both transports (`transport="litellm"` and the direct lane), so the faults, the
errors and the usage are shown to be the same on both.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from rlmnb import MissingAPIKey, PromptTooLarge
from rlmnb._ground.concurrency import AdaptiveLimiter
from rlmnb._models.litellm import LiteLLM, ModelCallFailed, close_loop_clients
from rlmnb._models.resolve import resolve_model
from rlmnb.testing import fake_server as fake_server_module
from rlmnb.testing.fake_server import plausible_tokens

pytestmark = pytest.mark.integration
MSGS = [{"role": "user", "content": "Find it: the magic number is 5550123. Thanks."}]


@pytest.fixture(autouse=True, params=["litellm", "direct"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The transport every `server.lm(...)` of the test uses."""
    chosen = str(request.param)
    original = fake_server_module.lm_for

    def lm_for(url: str, name: str, **kwargs: Any) -> Any:
        lm = original(url, name, **{"transport": chosen, **kwargs})
        assert lm.transport == chosen
        return lm

    monkeypatch.setattr(fake_server_module, "lm_for", lm_for)
    return chosen


def ask(lm: LiteLLM, messages: list[dict[str, Any]] = MSGS) -> Any:
    async def once() -> Any:
        try:
            return await lm.acomplete(messages)
        finally:
            await close_loop_clients()

    return asyncio.run(once())


def test_importing_rlmnb_does_not_import_litellm_and_respects_user_env() -> None:
    code = ("import os, rlmnb, rlmnb._models.litellm as a, rlmnb._engine.cache, rlmnb._ground.concurrency, sys\n"
            "assert 'litellm' not in sys.modules, 'litellm imported too early'\n"
            "a.LiteLLM('openai/x')\n"
            "assert 'litellm' not in sys.modules\n"
            "a.load_litellm()\n"
            "print(os.environ['TIKTOKEN_CACHE_DIR'], os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])\n")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["TIKTOKEN_CACHE_DIR"] = "/tmp/mine"  # the user's choice survives litellm's import
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["/tmp/mine", "True"]
    assert out.stderr == ""  # nothing tried the network, nothing warned


def test_a_first_call_cancelled_while_litellm_loads_leaves_the_next_call_working(fake_server: Any) -> None:
    # the first call of a process loads litellm in a worker thread; cancelled then (Ctrl-C, a --max-time), the
    # closing of the call's loop must not import from the half-loaded package, or the load fails and every
    # later call in the kernel does too ("partially initialized module 'litellm'")
    code = ("import asyncio, sys\n"
            "from rlmnb._ground.blocking import run_coroutine_blocking\n"
            "from rlmnb._models.litellm import LiteLLM\n"
            "from rlmnb._models.resolve import release_model_clients\n"
            f"lm = LiteLLM('openai/fake-root', api_base={fake_server.url!r}, api_key='k')\n"
            "msgs = [{'role': 'user', 'content': 'Which city? The city is Lyon.'}]\n"
            "async def cut():\n"
            "    try:\n"
            "        await asyncio.wait_for(lm.acomplete(msgs), 0.05)\n"
            "    except TimeoutError:\n"
            "        print('cancelled', 'litellm' in sys.modules)\n"
            "run_coroutine_blocking(cut(), on_close=release_model_clients)\n"
            "print(bool(run_coroutine_blocking(lm.acomplete(msgs), on_close=release_model_clients).text))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["cancelled", "True", "True"]  # cut mid-load, and the next call answers


def test_unset_tiktoken_dir_points_at_litellms_bundled_files(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._ground.tokens import prepare_offline_env

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    prepare_offline_env()
    assert os.path.isfile(os.path.join(os.environ["TIKTOKEN_CACHE_DIR"], "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"))


def test_a_reply_with_provider_usage_and_unknown_cost(fake_server: Any) -> None:
    done = ask(fake_server.lm("fake-sub"))
    assert done.text == "5550123"
    stats = fake_server.stats()
    assert done.usage.input_tokens == stats["prompt_tokens"] and done.usage.output_tokens == 2
    assert done.usage.cost_usd is None  # unpriced: unknown, not zero
    assert done.meta["retries"] == 0 and done.meta["finish_reason"] == "stop"


def test_a_registered_price_gives_a_cost(fake_server: Any) -> None:
    lm = fake_server.lm("priced-model-x", input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    done = ask(lm)
    assert done.usage.cost_usd == pytest.approx(done.usage.input_tokens * 1e-6 + done.usage.output_tokens * 2e-6)


def test_usage_is_counted_when_the_provider_reports_none(fake_server_factory: Any) -> None:
    server = fake_server_factory(report_usage=False)
    done = ask(server.lm("fake-sub"))
    assert done.meta.get("usage_counted") is True
    assert done.usage.input_tokens > 10 and done.usage.output_tokens >= 1


def test_secrets_never_show(fake_server: Any) -> None:
    lm = fake_server.lm("fake-sub", api_key="sk-very-secret", extra_headers={"X-Token": "tok-secret"},
                        temperature=0)
    text = repr(lm) + repr(lm.cache_identity()) + repr(lm.public_params())
    assert "sk-very-secret" not in text and "tok-secret" not in text
    assert "temperature=0" in repr(lm) and "'***'" in repr(lm)
    done = ask(lm)
    assert "sk-very-secret" not in repr(done)


def test_context_window_comes_from_litellm_or_the_constructor() -> None:
    assert LiteLLM("openai/gpt-4o-mini").context_window == 128_000
    assert LiteLLM("openai/not-a-real-model").context_window is None
    assert LiteLLM("openai/not-a-real-model", context_window=4096).context_window == 4096


def test_strings_resolve_to_litellm_with_the_run_settings() -> None:
    lm = resolve_model("openai/x", max_retries=1, timeout=7.0)
    assert isinstance(lm, LiteLLM) and lm.max_retries == 1 and lm.timeout == 7.0 and lm.name == "openai/x"


def test_retry_after_is_honoured_and_counted(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"429": 1.0}, retry_after=0.3)
    lm = server.lm("fake-sub", max_retries=2)
    started = time.perf_counter()
    with pytest.raises(ModelCallFailed, match="after 3 attempts.*(RateLimitError|HTTP 429)"):
        ask(lm)
    elapsed = time.perf_counter() - started
    assert server.stats()["requests"] == 3  # 1 + 2 retries: nobody underneath retried on top
    assert elapsed >= 0.6


def test_retries_then_success_report_their_count(fake_server_factory: Any) -> None:
    # scripted, in arrival order: request 1 answered, 2-3 refused (429, 500), 4 answered, 5-7 refused, ...
    sequence = [None, "429", "500", None, "500", "429", "429", None, None, "429", None, None, None]
    server = fake_server_factory(fault_sequence=sequence, retry_after=0.01)
    lm = server.lm("fake-sub", max_retries=10, backoff=0.01)
    retries = []
    for i in range(8):
        done = ask(lm, [{"role": "user", "content": f"magic number is 100000{i}"}])
        assert done.text == f"100000{i}"
        retries.append(done.meta["retries"])
    assert retries == [0, 2, 3, 0, 1, 0, 0, 0]
    stats = server.stats()
    assert stats["requests"] == 8 + 6 and stats["replies"] == 8
    assert stats["faults"] == {"429": 4, "500": 2}


def test_no_retry_when_turned_off_or_pointless(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"500": 1.0})
    with pytest.raises(ModelCallFailed):
        ask(server.lm("fake-sub", max_retries=0))
    assert server.stats()["requests"] == 1
    scripted = fake_server_factory(script={"root": []})
    with pytest.raises(ModelCallFailed, match="has 0 replies"):  # a 400 is not retried
        ask(scripted.lm("root"))
    assert scripted.stats()["requests"] == 1


@pytest.mark.parametrize("fault", ["500", "drop", "malformed"])
def test_server_errors_drops_and_garbage_are_retried(fake_server_factory: Any, fault: str) -> None:
    server = fake_server_factory(faults={fault: 1.0})
    with pytest.raises(ModelCallFailed, match="after 2 attempts"):
        ask(server.lm("fake-sub", max_retries=1, backoff=0.01))
    assert server.stats()["requests"] == 2


def test_a_hung_request_times_out_and_is_retried(fake_server_factory: Any) -> None:
    server = fake_server_factory(faults={"timeout": 1.0}, hang_s=10)
    started = time.perf_counter()
    with pytest.raises(ModelCallFailed, match="after 2 attempts"):  # as a hosted provider would be treated
        ask(server.lm("fake-sub", max_retries=1, timeout=0.3, backoff=0.01, local=False))
    assert 0.6 <= time.perf_counter() - started < 5
    assert server.stats()["requests"] == 2


def test_a_missing_key_is_found_before_any_request(fake_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                  transport: str) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = LiteLLM("openai/fake-sub", api_base=fake_server.url, transport=transport)
    with pytest.raises(MissingAPIKey, match=r"^No API key for openai: set OPENAI_API_KEY \(or pass api_key=\.\.\.\)\.$"):
        ask(lm)
    assert fake_server.stats()["requests"] == 0
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert ask(lm).text == "5550123"  # the check runs again until it passes


def test_a_rejected_key_names_the_variable_and_is_not_retried(fake_server_factory: Any) -> None:
    server = fake_server_factory(api_key="right")
    with pytest.raises(MissingAPIKey, match="rejected: check OPENAI_API_KEY"):
        ask(server.lm("fake-sub", api_key="wrong"))
    assert server.stats()["requests"] == 1
    assert ask(server.lm("fake-sub", api_key="right")).text == "5550123"


def test_a_providers_context_window_error_is_prompt_too_large(fake_server_factory: Any) -> None:
    server = fake_server_factory(context_window=30)
    with pytest.raises(PromptTooLarge, match="Split the text"):
        ask(server.lm("fake-sub"), [{"role": "user", "content": "word " * 200}])
    assert server.stats()["requests"] == 1


def test_rate_limits_inside_the_adapter_reach_the_limiter(fake_server_factory: Any) -> None:
    server = fake_server_factory(fault_sequence=["429", None, "429", "429"] * 8)
    lm = server.lm("fake-sub", max_retries=20)
    limiter = AdaptiveLimiter(32, 2)

    async def fan_out() -> list[str]:
        async def one(i: int) -> str:
            async with limiter:
                return (await lm.acomplete([{"role": "user", "content": f"magic number is {2000000 + i}"}])).text

        answers = await asyncio.gather(*(one(i) for i in range(100)))
        await close_loop_clients()
        return answers

    answers = asyncio.run(fan_out())
    assert answers == [str(2000000 + i) for i in range(100)]
    assert limiter.rate_limits == server.stats()["faults"]["429"] == 24
    assert limiter.decreases >= 1 and limiter.limit < 32


def test_plausible_usage_matches_what_the_adapter_reports(fake_server: Any) -> None:
    done = ask(fake_server.lm("fake-sub"))
    assert done.usage.input_tokens == plausible_tokens(MSGS[0]["content"]) + 4 + 2


def test_a_seed_reaches_the_server_only_where_the_provider_takes_one(fake_server_factory: Any) -> None:
    # the engine seeds a re-ask's sampling (`turn._reask_sampling`) only where `supports_seed` says so
    server = fake_server_factory(record_bodies=True)
    lm = server.lm("fake-sub", temperature=0)
    assert lm.supports_seed and lm.supports_stop

    async def once() -> Any:
        try:
            return await lm.acomplete(MSGS, temperature=0.7, seed=2)
        finally:
            await close_loop_clients()

    asyncio.run(once())
    body = server.bodies()[-1]
    assert body["temperature"] == 0.7 and body["seed"] == 2
    assert not LiteLLM("anthropic/claude-sonnet-4-5", api_key="x").supports_seed  # litellm: Anthropic takes none
