"""What `%%rlm --dry-run` stands on in place of a model: a name and a context window, never litellm.

A dry run builds the first root request and its cost estimate and calls no model, so nothing in it needs
litellm, which takes seconds to import. A model named on the line is checked as a run would check it
(`LiteLLM(name)`, which does not import litellm) and stands in the run as an `UnsentModel`, whose window comes
from litellm's bundled price table read as JSON (`rlmnb._engine.estimate.context_window_of`). With no model
chosen the report is still made, for `NO_MODEL`: what would run, at a cost it cannot know.

Entry point: `unsent(model)` for each model the magic resolved (a name, a model object, or None).
"""

from __future__ import annotations

from typing import Any

from rlmnb._models.base import Completion, Message

__all__ = ["NO_MODEL", "UnsentModel", "unsent"]

NO_MODEL = "none chosen (-m MODEL picks one)"


class UnsentModel:
    """A model a dry run names and sizes but never calls (the LM protocol; `acomplete` refuses)."""

    def __init__(self, name: str, context_window: int | None = None) -> None:
        self.name = name
        self.context_window = context_window
        self.max_output_tokens: int | None = None

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        raise RuntimeError(f"a dry run sends no request (model {self.name})")

    def __repr__(self) -> str:
        return f"UnsentModel({self.name!r})"


def unsent(model: Any) -> Any:
    """The dry run's stand-in for `model`: a litellm name becomes an UnsentModel (checked as `LiteLLM(name)`
    checks it: a name without its provider is a ConfigError), None becomes one for NO_MODEL, and a model
    object is used as it is (the user built it; a dry run asks it only its name and window).

    Raises:
        rlmnb.ConfigError: the name cannot be a litellm model (as a run would say).
    """
    if model is None:
        return UnsentModel(NO_MODEL)
    if not isinstance(model, str):
        return model
    from rlmnb._engine.estimate import context_window_of
    from rlmnb._models.litellm import LiteLLM

    checked = LiteLLM(model)  # the run's own checks of a name; litellm itself is imported only by a request
    return UnsentModel(checked.name, context_window_of(checked.name))
