"""The LM seam: what rlmnb needs of a language model, and how a user's choice becomes one.

An LM is anything with a `name` and an async `acomplete(messages) -> Completion`. A litellm model
string (e.g. "openai/gpt-5-mini") becomes `rlmnb.LiteLLM(name)`; an object with only a synchronous
`complete(messages)` is wrapped so it runs in a worker thread. Tests use `rlmnb.testing.ScriptedLM`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlmnb._ground.usage import CallUsage

Message = dict[str, Any]


@dataclass(frozen=True)
class Completion:
    """One model reply with its usage. `meta` carries provider details (retries, why a reply is empty).

    `finish_reason` is the provider's ("stop", "length", "content_filter", ...; None when it gave
    none); `reasoning` is thinking the provider returned apart from the answer (not part of `text`).
    """

    text: str
    usage: CallUsage = field(default_factory=CallUsage)
    model: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    reasoning: str = ""


@runtime_checkable
class LM(Protocol):
    """A chat model. `acomplete` must be safe to call concurrently from one event loop."""

    name: str

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion: ...


class SyncLMAdapter:
    """Lets an object with a blocking `complete(messages) -> str | Completion` serve as an LM."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        out = await asyncio.to_thread(self.inner.complete, messages, **params)
        return out if isinstance(out, Completion) else Completion(text=str(out), model=self.name)

    def __repr__(self) -> str:
        return f"SyncLMAdapter({self.name!r})"


def model_label(lm: LM) -> str:
    return str(getattr(lm, "name", type(lm).__name__))
