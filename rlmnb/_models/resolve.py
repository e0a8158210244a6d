"""How a user's choice of model becomes an LM, and how the clients those LMs opened are released.

`resolve_model` turns a litellm model name, an LM or a sync model object into an LM; it sits above the
implementations it picks between (`LiteLLM` in litellm.py, `SyncLMAdapter` in base.py), so the
protocol's module never imports an implementation. `release_model_clients` closes what litellm opened
on the running event loop, without importing litellm when no run used it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from rlmnb._ground.errors import ConfigError
from rlmnb._models.base import LM, SyncLMAdapter

__all__ = ["release_model_clients", "resolve_model"]


def resolve_model(model: Any, *, role: str = "model", **lm_options: Any) -> LM:
    """Turn a model string, an LM or a sync model object into an LM; a clear ConfigError otherwise.

    `lm_options` (max_retries, timeout) apply only to the LiteLLM made from a string.
    """
    if isinstance(model, str):
        if not model.strip():
            raise ConfigError(f"{role} is an empty string; pass a litellm model name such as 'openai/gpt-5-mini'.")
        from rlmnb._models.litellm import LiteLLM  # deferred: importing litellm takes seconds

        return LiteLLM(model.strip(), **lm_options)
    if model is None:
        raise ConfigError(f"No {role} given; pass a litellm model name such as 'openai/gpt-5-mini' or an LM object.")
    if hasattr(model, "acomplete"):
        if not hasattr(model, "name"):
            raise ConfigError(f"{role} object {type(model).__name__} has acomplete() but no 'name' attribute.")
        return model  # type: ignore[no-any-return]
    if hasattr(model, "complete"):
        return SyncLMAdapter(model)
    raise ConfigError(
        f"{role} must be a litellm model string or an object with acomplete(messages); "
        f"got {type(model).__name__}.")


async def release_model_clients() -> None:
    """Close the HTTP clients litellm opened on the running event loop (only if litellm was used).

    Await it before a private event loop ends; best effort, never raises, and shielded from cancellation.
    """
    module = sys.modules.get("rlmnb._models.litellm")
    if module is not None:
        await asyncio.shield(module.close_loop_clients())
