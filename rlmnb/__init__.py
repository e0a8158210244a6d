"""rlmnb: Recursive Language Models in Jupyter.

Ask questions of inputs far larger than any context window: the root model writes Python that runs
in a sandbox holding your data, and hands pieces to a sub-model. Public names are loaded lazily so
`import rlmnb` and `%load_ext rlmnb` stay fast (no litellm, pandas or widgets at import time).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "RLM": "api", "RunResult": "api", "Session": "api",
    "RLMConfig": "config",
    "LM": "models", "Completion": "models",
    "LiteLLM": "litellm_lm",
    "Usage": "usage", "CallUsage": "usage",
    "Trajectory": "events",
    "InputsSummary": "inputs", "FieldInfo": "inputs",
    "RLMError": "errors", "ConfigError": "errors", "InputError": "errors", "ModelError": "errors",
    "MissingAPIKey": "errors", "BudgetExhausted": "errors", "PromptTooLarge": "errors",
    "SandboxError": "errors", "ReplayDivergence": "errors", "DepthLimitReached": "errors",
    "ScriptExhausted": "errors",
    "QuotesFound": "quotes_guard",
    "saved_run": "saved_runs",
}

__all__ = sorted([*_EXPORTS, "load_ipython_extension", "unload_ipython_extension", "__version__"])

if TYPE_CHECKING:
    from .api import RLM, RunResult, Session
    from .config import RLMConfig
    from .errors import (
        BudgetExhausted,
        ConfigError,
        DepthLimitReached,
        InputError,
        MissingAPIKey,
        ModelError,
        PromptTooLarge,
        ReplayDivergence,
        RLMError,
        SandboxError,
        ScriptExhausted,
    )
    from .events import Trajectory
    from .inputs import FieldInfo, InputsSummary
    from .litellm_lm import LiteLLM
    from .models import LM, Completion
    from .quotes_guard import QuotesFound
    from .saved_runs import saved_run
    from .usage import CallUsage, Usage


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlmnb' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext rlmnb`: registers the %%rlm cell magic and %rlm line magic."""
    from .magic import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magic import unregister

    unregister(ipython)
