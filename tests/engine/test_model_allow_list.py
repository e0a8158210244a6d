"""Sub-calls name only models the user configured (issue 43): the host, not the sandbox, sends the request,
so a model name the model code chose (a litellm name can carry any URL) is refused before anything is sent.

The refused calls aim at a fake OpenAI-compatible server on loopback, which must receive nothing; the run
carries on with the refusal as the snippet's error. Configured names (the run's models, `models=`) and LM
objects from the user's own Python are served.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sandbox_support import code, observations

from rlmnb import RLM, ConfigError
from rlmnb._engine.budget import Budget
from rlmnb._engine.subcalls import ModelNotAllowed, SubCaller
from rlmnb._ground.config import RLMConfig
from rlmnb.events import EventBus, RunScope, SubCallStarted
from rlmnb.testing import ScriptedLM
from rlmnb.testing.fake_server import FakeServer

REFUSED = "refused ModelNotAllowed"


def attacks(url: str) -> str:
    """Model code that names a model at `url` through every primitive that takes a model, then the sub-model."""
    target = f"oobabooga/{url}/x"
    return code(
        "import json\nsecret = 'the data'\n"
        f"for call in (lambda: llm_query(secret, model={target!r}),\n"
        f"             lambda: llm_query_batched([secret, secret], model={target!r}),\n"
        f"             lambda: llm_map(['a', 'b'], 'Say it.', model='openai/any-model'),\n"
        f"             lambda: llm_query(secret, model='root' + ' ' * 100)):\n"
        "    try:\n        call()\n        print('sent')\n"
        "    except Exception as exc:\n        print('refused', type(exc).__name__)\n"
        "print(llm_query('hello', model='sub'))")


@pytest.fixture
def server(fake_server_factory: Any) -> FakeServer:
    return fake_server_factory(record_bodies=True)


@pytest.mark.parametrize("sandbox", ["local", pytest.param("kernel", marks=pytest.mark.integration)])
def test_a_model_name_outside_the_configured_ones_is_refused_with_nothing_sent(
        sandbox: str, server: FakeServer) -> None:
    root = ScriptedLM([attacks(server.url), code("submit('done')")], name="root")
    sub = ScriptedLM(lambda m: "hi there", name="sub")
    result = RLM(root, sub, sandbox=sandbox, evidence_check=False).run("Say hello.", text="the data")
    assert result.answer == "done", result.error  # the run carried on
    assert server.stats()["requests"] == 0 and server.bodies() == []
    assert len(sub.requests) == 1 and result.usage.sub_calls == 1  # only the sub-model's own call
    assert [e.model for e in result.trajectory.of(SubCallStarted)] == ["sub"]
    assert observations(root)[0].split("\n")[1:6] == [REFUSED] * 4 + ["hi there"]


def test_a_child_run_is_held_to_the_same_models(server: FakeServer) -> None:
    child = ScriptedLM([attacks(server.url), code("submit('child done')")], name="child")
    root = ScriptedLM([code("print(rlm_query('Look.'))"), code("submit('done')")], name="root")
    sub = ScriptedLM(lambda m: "hi there", name="sub")
    result = RLM(root, sub, child_model=child, sandbox="local", max_depth=2, evidence_check=False).run(
        "Say hello.", text="the data")
    assert result.answer == "done", result.error
    assert server.stats()["requests"] == 0 and len(sub.requests) == 1
    assert "child done" in observations(root)[0]
    assert observations(child)[0].split("\n")[1:6] == [REFUSED] * 4 + ["hi there"]


@pytest.mark.integration
def test_a_name_in_models_is_made_into_a_model_and_the_sub_models_own_name_is_served(server: FakeServer) -> None:
    other = "openai/fake-other"
    root = ScriptedLM([code(f"print(llm_query('hello', model={other!r}))"), code("submit('done')")], name="root")
    sub = ScriptedLM(lambda m: "from sub", name="sub")
    lm = server.lm("fake-other")
    config = RLMConfig(models=(other,), evidence_check=False, sandbox="local")
    sub_caller = _caller(sub, config)
    assert isinstance(sub_caller._lm_for(other), type(lm))  # made from the name, nothing sent yet
    assert server.stats()["requests"] == 0
    result = RLM(root, lm, config=config).run("Say hello.", text="t")  # the sub-model's own name is allowed too
    assert result.answer == "done", result.error
    assert server.stats()["models"] == {"fake-other": 1}


def test_the_trees_other_models_and_the_users_objects_are_allowed_and_nothing_else() -> None:
    sub, root, child = (ScriptedLM(lambda m: "x", name=n) for n in ("sub", "root", "child"))
    caller = _caller(sub, RLMConfig(models=("openai/extra",)), models=(root, child, None))
    assert list(caller.allowed_models()) == ["openai/extra", "child", "root", "sub"]
    assert caller._lm_for("root") is root and caller._lm_for("child") is child and caller._lm_for(None) is sub
    mine = ScriptedLM(lambda m: "y", name="mine")
    assert caller._lm_for(mine) is mine  # an object only the user's Python can make
    with pytest.raises(ModelNotAllowed) as refused:
        asyncio.run(caller.query("secret", "openai/other"))
    assert "\n" not in str(refused.value) and "'sub'" in str(refused.value)  # one line naming the allowed
    assert sub.requests == [] and root.requests == []


def test_models_must_be_a_list_of_names_before_any_model_call() -> None:
    root = ScriptedLM([code("submit(1)")], name="root")
    with pytest.raises(ConfigError):
        RLM(root, models="openai/gpt-4o-mini")
    with pytest.raises(ConfigError):
        RLM(root, models=[""])
    assert RLM(root, models=["openai/gpt-4o-mini"]).config.models == ("openai/gpt-4o-mini",)
    assert root.requests == []


def _caller(lm: Any, config: RLMConfig, models: tuple[Any, ...] = ()) -> SubCaller:
    return SubCaller(lm=lm, config=config, budget=Budget(config), bus=EventBus(), scope=RunScope(run_id="r", root_run_id="r"),
                     models=models)
