"""The LM seam: what rlmnb needs of a language model, and how a user's choice becomes one.

An LM is anything with a `name` and an async `acomplete(messages) -> Completion`. A litellm model
string (e.g. "openai/gpt-5-mini") becomes `rlmnb.LiteLLM(name)`; an object with only a synchronous
`complete(messages)` is wrapped so it runs in a worker thread. Tests use `rlmnb.testing.ScriptedLM`.

Is a reply an answer? Providers say "no answer" in ways that look like an empty string: an HTTP 200
with no choices, a choice with null or empty content, or `finish_reason="content_filter"`. Passed on
as "" the root model could not tell the difference, so `no_answer` says why a Completion is not an
answer and whether asking again can help (no choices, no content: often transient; a content filter
blocks the same prompt again; a reasoning model that spent all of max_tokens thinking does the same).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlmnb._ground.usage import CallUsage

__all__ = ["LM", "Completion", "Message", "NoAnswer", "SyncLMAdapter", "model_label", "no_answer"]

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
    """The name an LM is shown by (its `name`, else its class name)."""
    return str(getattr(lm, "name", type(lm).__name__))


@dataclass(frozen=True)
class NoAnswer:
    """Why a completion holds no answer, and whether asking again can help."""

    reason: str
    retry: bool


def no_answer(completion: Completion) -> NoAnswer | None:
    """None when the completion is an answer; else why not."""
    finish = completion.finish_reason or completion.meta.get("finish_reason")
    if finish == "content_filter":
        return NoAnswer("the provider's content filter stopped the answer (finish_reason=content_filter)", False)
    if completion.text.strip():
        return None
    if completion.meta.get("empty") == "no_choices":
        return NoAnswer("the provider answered with no choices", True)
    if finish == "length":
        thought = " after reasoning" if completion.reasoning else ""
        return NoAnswer(f"the reply was empty at the token limit{thought} (finish_reason=length); "
                        f"give the sub-model a larger max_tokens", False)
    return NoAnswer(f"the provider returned no content (finish_reason={finish or 'none'})", True)
