"""Limits that follow the models' context windows: a 16K-token model is trimmed before it would refuse."""

from __future__ import annotations

import itertools
from typing import Any

from sandbox_support import code

from rlmnb import RLM
from rlmnb._engine.limits import run_limits
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.tokens import count_messages
from rlmnb.events import TurnsTrimmed
from rlmnb.testing import ScriptedLM

NOISY = [code(f"print(list(range({k * 100_000}, {k * 100_000 + 3_000})))") for k in range(8)]


def test_a_16k_model_lowers_the_ceilings() -> None:
    root = ScriptedLM([], context_window=16_384, max_output_tokens=800)
    sub = ScriptedLM([], context_window=16_384, max_output_tokens=200)
    limits = run_limits(RLMConfig(), root, sub)
    assert limits.context_tokens == int((16_384 - 800) * 0.85) < 16_384 - 800
    assert limits.sub_window == 16_184 and limits.root_window == 16_384
    small = run_limits(RLMConfig(), ScriptedLM([], context_window=8_192, max_output_tokens=800), sub)
    assert small.output_chars < RLMConfig().max_output_chars and small.context_tokens < 8_192 - 800


def test_unknown_windows_keep_the_ceilings_and_the_prompt_says_unknown() -> None:
    limits = run_limits(RLMConfig(), ScriptedLM([]), ScriptedLM([]))
    assert (limits.context_tokens, limits.output_chars, limits.sub_window) == (100_000, 10_000, None)
    root = ScriptedLM([code("print(1)"), code("submit(1)")])
    RLM(root, ScriptedLM(lambda m: "x"), sandbox="local").run("q", text="abc")
    system = root.requests[0][0]["content"]
    assert "not known" in system and "100,000" not in system


def test_the_system_prompt_quotes_the_sub_models_window() -> None:
    root = ScriptedLM([code("print(1)"), code("submit(1)")])
    sub = ScriptedLM(lambda m: "x", context_window=16_384, max_output_tokens=200)
    RLM(root, sub, sandbox="local").run("q", text="abc")
    assert "about 16,184 tokens" in root.requests[0][0]["content"]


def run_noisy(root: ScriptedLM) -> Any:
    return RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=9).run("q", text="abc")


def test_trimming_keeps_every_request_inside_a_16k_window() -> None:
    root = ScriptedLM([*NOISY, code("submit(1)")], context_window=16_384, max_output_tokens=800)
    result = run_noisy(root)
    assert result.status == "submitted" and result.trajectory.of(TurnsTrimmed)
    assert max(count_messages(r, "root") for r in root.requests) + 800 <= 16_384
    # without the window the same run sends requests a 16K model would refuse
    blind = ScriptedLM([*NOISY, code("submit(1)")])
    run_noisy(blind)
    assert max(count_messages(r, "root") for r in blind.requests) > 16_384


def test_a_16k_server_never_refuses_a_trimmed_run(fake_server_factory: Any) -> None:
    replies = itertools.cycle([*NOISY, code("submit(1)")])
    server = fake_server_factory(responder=lambda messages: next(replies), context_window=16_384)
    root = server.lm("fake-root", context_window=16_384, max_tokens=800)
    result = RLM(root, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=9).run("q", text="abc")
    assert result.status == "submitted", result.reason
    assert "400" not in server.stats()["statuses"]
    replies = itertools.cycle([*NOISY, code("submit(1)")])
    blind = server.lm("fake-root", max_tokens=800)  # the window unknown: the server refuses a long run's request,
    recovered = RLM(blind, ScriptedLM(lambda m: "x"), sandbox="local", max_iterations=9).run("q", text="abc")
    assert "400" in server.stats()["statuses"]  # and the turn cuts the conversation and asks again
    assert recovered.status == "submitted", recovered.reason
