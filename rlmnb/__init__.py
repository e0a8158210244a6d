"""rlmnb: Recursive Language Models in Jupyter.

Ask questions of inputs far larger than any context window: the root model writes Python that runs
in a sandbox holding your data, and hands pieces to a sub-model. This module is the public surface;
everything under a `_`-prefixed name is private. Public names are loaded lazily so `import rlmnb`
and `%load_ext rlmnb` stay fast (no litellm, pandas or widgets at import time).

Public modules beside this one: `rlmnb.events` (event records, `Trajectory`), `rlmnb.views` (renderers
of a run), `rlmnb.inputs` (the registry of input kinds) and `rlmnb.testing` (scripted models, the fake
server, generators).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "RLM": "rlmnb._api", "RunResult": "rlmnb._api", "Session": "rlmnb._api",
    "RLMConfig": "rlmnb._ground.config", "POLICIES": "rlmnb._ground.config", "PROFILES": "rlmnb._ground.config",
    "LM": "rlmnb._models.base", "Completion": "rlmnb._models.base",
    "LiteLLM": "rlmnb._models.litellm",
    "Usage": "rlmnb._ground.usage", "CallUsage": "rlmnb._ground.usage",
    "Trajectory": "rlmnb.events",
    "InputsSummary": "rlmnb.inputs", "FieldInfo": "rlmnb.inputs",
    "RLMError": "rlmnb._ground.errors", "ConfigError": "rlmnb._ground.errors", "InputError": "rlmnb._ground.errors",
    "ModelError": "rlmnb._ground.errors", "MissingAPIKey": "rlmnb._ground.errors",
    "BudgetExhausted": "rlmnb._ground.errors", "PromptTooLarge": "rlmnb._ground.errors",
    "SandboxError": "rlmnb._ground.errors", "ReplayDivergence": "rlmnb._ground.errors",
    "DepthLimitReached": "rlmnb._ground.errors", "ScriptExhausted": "rlmnb._ground.errors",
    "ImagesRefused": "rlmnb._ground.errors",
    "RuleBased": "rlmnb._guards.rules", "LLMJudge": "rlmnb._guards.rules", "AllOf": "rlmnb._guards.rules",
    "QuotesFound": "rlmnb._guards.quotes",
    "saved_run": "rlmnb._notebook.saved_runs",
}

__all__ = sorted([*_EXPORTS, "load_ipython_extension", "unload_ipython_extension", "__version__"])

if TYPE_CHECKING:
    from rlmnb._api import RLM, RunResult, Session
    from rlmnb._ground.config import POLICIES, PROFILES, RLMConfig
    from rlmnb._ground.errors import (
        BudgetExhausted,
        ConfigError,
        DepthLimitReached,
        ImagesRefused,
        InputError,
        MissingAPIKey,
        ModelError,
        PromptTooLarge,
        ReplayDivergence,
        RLMError,
        SandboxError,
        ScriptExhausted,
    )
    from rlmnb._ground.usage import CallUsage, Usage
    from rlmnb._guards.quotes import QuotesFound
    from rlmnb._guards.rules import AllOf, LLMJudge, RuleBased
    from rlmnb._models.base import LM, Completion
    from rlmnb._models.litellm import LiteLLM
    from rlmnb._notebook.saved_runs import saved_run
    from rlmnb.events import Trajectory
    from rlmnb.inputs import FieldInfo, InputsSummary


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlmnb' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext rlmnb`: registers the %%rlm cell magic and %rlm line magic."""
    from rlmnb._notebook.magic import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """`%unload_ext rlmnb`: removes the magics."""
    from rlmnb._notebook.magic import unregister

    unregister(ipython)
