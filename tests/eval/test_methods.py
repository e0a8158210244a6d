"""Peer adapters offline: `rlms` and `dspy.RLM` against the fake server, scored like rlmnb's runs.

The fake server's root speaks each package's protocol with the oracle's working code (rlms: ```repl
blocks over `context`, the answer handed over by `answer["content"] = ...; answer["ready"] = True`; DSPy:
`[[ ## reasoning ## ]]` / `[[ ## code ## ]]` fields, then `SUBMIT(answer=...)`); its sub-model is the
oracle. Real HTTP through each package's own client (the openai SDK for rlms, litellm for DSPy).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from rlmnb._eval import EvalSpec, Setup, get_method, run_eval
from rlmnb._eval.oracles import OracleModel, parse_question, root_program
from rlmnb._ground.errors import ConfigError


class RLMsProtocolOracle:
    """Root replies in the `rlms` REPL protocol; everything else is the plain oracle."""

    def __init__(self) -> None:
        self.oracle = OracleModel()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        if "```repl" not in system:
            return self.oracle(messages)
        found = parse_question("\n".join(str(m.get("content") or "") for m in messages))
        assert found is not None, "the question reaches the rlms root prompt"
        program = root_program(*found, sub_calls=20)
        body = program.split("```python\n", 1)[1].rsplit("```", 1)[0]
        body = re.sub(r"\banswer\b", "result", body)  # `answer` is rlms's hand-over dict
        return ("```repl\ntext = context\n" + body + "import json\n"
                "answer['content'] = result if isinstance(result, str) else json.dumps(result)\n"
                "answer['ready'] = True\n```")


def assert_capped(bodies: list[dict[str, Any]]) -> None:
    """Every request carries the evaluation's temperature and `max_tokens`, the reply cap's name that every
    OpenAI-compatible server reads (llama-cpp-python's ignores `max_completion_tokens`)."""
    assert bodies
    assert all(b.get("max_tokens") == 800 and b.get("temperature") == 0 for b in bodies), \
        [{k: v for k, v in b.items() if k != "messages"} for b in bodies]


@pytest.mark.parametrize("settings", [{}, {"max_time": 120.0}], ids=["unbounded", "max_time"])
def test_rlms_adapter_runs_against_the_fake_server(fake_server_factory: Callable[..., Any],
                                                   settings: dict[str, Any]) -> None:
    # a peer runs in a forked child (run_apart), killed past max_time: the rows come back across the boundary
    pytest.importorskip("rlm", reason="the rlms package is not installed (pip install rlms)")
    server = fake_server_factory(responder=RLMsProtocolOracle(), record_bodies=True)
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/fake-root", api_base=server.url, api_key="fake-key", temperature=0, max_tokens=800)
    sub = LiteLLM("openai/fake-sub", api_base=server.url, api_key="fake-key")
    spec = EvalSpec(tasks=["niah", "oolong_pairs"], sizes=["8k"], methods=["rlms"], setup=Setup(root, sub, settings),
                    n=1)
    rows = run_eval(spec).rows
    assert [r.status for r in rows] == ["submitted", "submitted"], [r.error for r in rows]
    assert [r.score for r in rows] == [1.0, 1.0]
    assert all(r.sub_calls >= 2 and r.input_tokens > 0 for r in rows)  # rlms counts root and sub calls together
    assert all(r.root_input_tokens and r.sub_tokens for r in rows)  # split by model name (root and sub differ)
    models = server.stats()["models"]
    assert models.get("fake-root", 0) >= 2 and models.get("fake-sub", 0) >= 2
    assert_capped(server.bodies())
    json.dumps([r.to_dict() for r in rows])


def test_peer_methods_name_their_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("rlm", "dspy") else
                        real(name, *a))
    with pytest.raises(ConfigError, match="pip install rlms"):
        get_method("rlms")
    with pytest.raises(ConfigError, match="pip install dspy"):
        get_method("dspy_rlm")


DSPY_REPLY = """[[ ## reasoning ## ]]
{reasoning}

[[ ## code ## ]]
```python
{code}
```

[[ ## completed ## ]]"""


class DSPyProtocolOracle:
    """Root replies in DSPy's chat-adapter format (the oracle's program, then SUBMIT); sub-model: the oracle."""

    def __init__(self) -> None:
        self.oracle = OracleModel()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        if "[[ ## code ## ]]" not in system:
            return self.oracle(messages)
        prompt = str(messages[-1].get("content") or "")
        if "=== Step 1 ===" in prompt:
            return DSPY_REPLY.format(reasoning="The program printed the answer; submit it.", code=(
                "import json\nSUBMIT(answer=answer if isinstance(answer, str) else json.dumps(answer))"))
        found = parse_question(prompt)
        assert found is not None, "the question reaches DSPy's action prompt"
        program = root_program(*found, sub_calls=20).split("```python\n", 1)[1].rsplit("```", 1)[0]
        return DSPY_REPLY.format(reasoning="Slice the context, ask the sub-model, aggregate.",
                                 code="text = context\n" + program.rstrip())


def test_dspy_rlm_adapter_runs_against_the_fake_server(fake_server_factory: Callable[..., Any]) -> None:
    pytest.importorskip("dspy", reason="DSPy is not installed (pip install dspy)")
    server = fake_server_factory(responder=DSPyProtocolOracle(), record_bodies=True)
    from rlmnb._models.litellm import LiteLLM

    root = LiteLLM("openai/fake-root", api_base=server.url, api_key="fake-key", temperature=0, max_tokens=800)
    sub = LiteLLM("openai/fake-sub", api_base=server.url, api_key="fake-key")
    spec = EvalSpec(tasks=["niah", "oolong"], sizes=["8k"], methods=["dspy_rlm"], setup=Setup(root, sub), n=1)
    rows = run_eval(spec).rows
    assert [r.status for r in rows] == ["submitted", "submitted"], [r.error for r in rows]
    assert [r.score for r in rows] == [1.0, 1.0], [(r.prediction, r.truth) for r in rows]
    assert all(r.root_calls >= 2 and r.sub_calls >= 1 for r in rows)
    assert_capped(server.bodies())  # litellm alone would send max_completion_tokens, which llama.cpp ignores
