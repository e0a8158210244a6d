"""The minrlm and fast_rlm adapters offline: minrlm against the fake server (real HTTP through its openai
client), its root speaking minrlm's protocol (one ```python block, `input_0`, `sub_llm`, `FINAL`);
fast_rlm's missing-Deno and missing-package messages (its engine needs jsr.io, see rlmnb/_eval/methods.py)."""

from __future__ import annotations

import importlib.util
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._eval import EvalSpec, Setup, get_method, run_eval
from rlmnb._eval.methods import FastRLMMethod, sampling
from rlmnb._eval.tasks import get_task
from rlmnb._ground.errors import ConfigError

FILLER = "Nothing to see in this line of filler text. " * 60


class MinRLMProtocol:
    """Root: read input_0 through one sub_llm call and FINAL its answer; sub-model: read the city."""

    def __init__(self) -> None:
        self.sub_prompts: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        if "FINAL(" in system and "input_0" in system:
            return ("I will hand the text to the sub-model.\n```python\n"
                    "evidence = input_0[input_0.find('The city'):][:200]\n"
                    "answer = sub_llm(task_0, evidence)\nFINAL(answer.strip())\n```")
        text = " ".join(str(m.get("content") or "") for m in messages)
        self.sub_prompts.append(text)
        return "Lyon" if "The city is Lyon" in text else "unknown"


def _rows(tmp_path: Path) -> Path:
    path = tmp_path / "cities.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": "Which city is named? Answer with the city.",
                                        "context": FILLER + "The city is Lyon." + FILLER, "answers": ["Lyon"]}) + "\n"
                            for i in range(2)), encoding="utf-8")
    return path


def test_minrlm_adapter_runs_against_the_fake_server(fake_server_factory: Callable[..., Any], tmp_path: Path) -> None:
    if importlib.util.find_spec("minrlm") is None:  # not importorskip: importing it here would bypass the adapter
        pytest.skip("pip install minrlm")
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    responder = MinRLMProtocol()
    server = fake_server_factory(responder=responder, record_bodies=True)
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/fake-root", api_base=server.url, api_key="fake-key", temperature=0.0, max_tokens=800)
    spec = EvalSpec(tasks=[f"jsonl:{_rows(tmp_path)}"], sizes=["8k"], methods=["minrlm"],
                    setup=Setup(root, None, {"max_iterations": 4, "max_llm_calls": 5}), n=2)
    rows = run_eval(spec).rows
    assert [r.status for r in rows] == ["submitted", "submitted"], [r.error for r in rows]
    assert [r.score for r in rows] == [1.0, 1.0], [r.prediction for r in rows]
    for row in rows:
        assert row.root_calls >= 1 and row.sub_calls == 1
        assert row.sub_tokens is not None and row.sub_tokens > 0
        assert row.root_input_tokens is not None and row.root_input_tokens > row.sub_tokens
        assert row.input_tokens + row.output_tokens == row.root_input_tokens + row.root_output_tokens + row.sub_tokens
    stats = server.stats()
    assert stats["prompt_tokens"] == sum(r.input_tokens for r in rows)  # minrlm's count is the server's
    assert len(responder.sub_prompts) == 2
    assert all(b.get("max_tokens") == 800 and b.get("temperature") == 0 for b in server.bodies())
    # minrlm installs SIGINT/SIGTERM handlers at import that kill the process; the adapter keeps ours
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_sampling_follows_the_root_model() -> None:
    from rlmnb._models.litellm import LiteLLM

    assert sampling(Setup(LiteLLM("openai/x", temperature=0, max_tokens=800))) == {"temperature": 0.0,
                                                                                 "max_tokens": 800}
    assert sampling(Setup("openai/x")) == {}


def test_fast_rlm_says_what_it_needs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util
    import shutil

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("minrlm", "fast_rlm") else real(name, *a))
    with pytest.raises(ConfigError, match="pip install minrlm"):
        get_method("minrlm")
    with pytest.raises(ConfigError, match="pip install fast-rlm"):
        get_method("fast_rlm")
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    instance = get_task(f"jsonl:{_rows(tmp_path)}").generate(8000)
    with pytest.raises(ConfigError, match="needs Deno on PATH"):
        FastRLMMethod().run(instance, Setup("openai/x"))


def test_cli_sampling_flags_reach_every_method() -> None:
    import argparse

    from rlmnb._eval.command import add_arguments, spec_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["-m", "openai/root", "-s", "openai/sub", "--temperature", "0", "--max-tokens", "800",
                              "--methods", "direct", "--task", "niah"])
    for flag in ("confinement", "allow_paths", "allow_network"):
        setattr(args, flag, None)
    setup = spec_from_args(args).setup
    assert sampling(setup) == {"temperature": 0.0, "max_tokens": 800}
    assert setup.sub_model.kwargs["max_tokens"] == 800
