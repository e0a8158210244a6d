"""The error tree. Recoverable errors become observations for the model; terminal ones stop the run.

    RLMError                      base of everything rlmnb raises on purpose
    ├── ConfigError               a bad setting or argument (raised before any model call)
    ├── InputError                an input that cannot be bound (unknown kind, missing file)
    ├── ModelError                terminal trouble with a model
    │   ├── MissingAPIKey         no or rejected key; names the provider's environment variable
    │   ├── ScriptExhausted       a ScriptedLM ran out of replies
    │   └── ReplayDivergence      a replayed run asked for a call the record does not have
    ├── SandboxError              the sandbox could not start or was lost for good
    └── RecoverableError          shown to the model as an observation, the run goes on
        ├── BudgetExhausted       a sub-call (or batch) does not fit what is left
        ├── PromptTooLarge        a prompt exceeds its model's window
        ├── ImagesRefused         a sub-call with images to a model that does not read images
        ├── EmptyAnswer           a sub-call came back with no answer (no choices, no content, filtered)
        ├── ModelNotAllowed       a sub-call named a model the user did not configure; nothing was sent
        └── DepthLimitReached     rlm_query at the depth cap with strict_depth

`SubmitSignal` is deliberately a `BaseException`: `except Exception` in model code cannot swallow it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExhausted", "ConfigError", "DepthLimitReached", "EmptyAnswer", "InputError", "MissingAPIKey",
    "ModelError", "ModelNotAllowed", "PromptTooLarge", "RLMError", "RecoverableError", "ReplayDivergence",
    "SandboxError", "ScriptExhausted", "SubmitSignal", "format_error_slot",
]


class RLMError(Exception):
    """Base class of the errors rlmnb raises on purpose."""


class ConfigError(RLMError, ValueError):
    """A setting or argument is invalid; the message says which and what is allowed."""


class InputError(RLMError, TypeError):
    """An input cannot be bound; the message names the field and the supported kinds."""


class ModelError(RLMError):
    """A model failed in a way the run cannot recover from."""


class MissingAPIKey(ModelError):
    """The provider needs an API key that is missing or was rejected."""


class ScriptExhausted(ModelError):
    """A ScriptedLM was asked for more replies than it holds."""


class SandboxError(RLMError):
    """The sandbox could not be started or restarted."""


class ReplayDivergence(ModelError):
    """A replayed run asked for a model call that the recorded trajectory does not have."""


class RecoverableError(RLMError):
    """An error the model can act on: it is shown as an observation and the run continues."""


class BudgetExhausted(RecoverableError):
    """Not enough budget left for the requested calls; nothing was spent."""


class PromptTooLarge(RecoverableError):
    """A prompt is larger than its model accepts (a sub-call's, or the root's request); nothing was answered.

    `stated`: (tokens a prompt may have, tokens the model's server counted in this one) when the server said both,
    so a caller can shrink the prompt by the server's own count rather than ours; None otherwise."""

    stated: tuple[int, int] | None = None


class ModelNotAllowed(RecoverableError, ValueError):
    """A sub-call named a model the user did not configure; nothing was reserved or sent."""


class ImagesRefused(RecoverableError):
    """A sub-call with images to a model that does not read images (or is not known to); nothing was sent."""


class EmptyAnswer(RecoverableError):
    """A sub-call came back without an answer: no choices, no content, or stopped by a content filter."""


class DepthLimitReached(RecoverableError):
    """A child run was requested at the recursion depth cap with strict_depth on."""


class SubmitSignal(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Raised by submit()/FINAL()/FINAL_VAR() inside the sandbox to end the snippet."""

    def __init__(self, value: Any, *, error: str | None = None, during_exception: str | None = None) -> None:
        super().__init__("submit")
        self.value = value
        self.error = error  # why the value cannot be accepted as given (e.g. not JSON-able)
        self.during_exception = during_exception  # the exception type being handled, if any


def format_error_slot(exc: BaseException) -> str:
    """The string a failed llm_query_batched slot holds: '[error] <Type>: <message>'."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
    return f"[error] {type(exc).__name__}: {message}"
