"""ScriptedLM: a model whose replies are written in advance, for tests, notebooks and demos.

Replies are a list served in order, or a callable `f(messages) -> str`; an item may be a `Completion`
to script what real providers send besides text (`finish_reason="length"`, `reasoning=...`, an empty
`meta={"empty": "no_choices"}`). With `supports_stop=True` a reply is cut at the first stop sequence a
request passes, as providers do. Every request is recorded in `.requests`. A list script that has been used up starts again from the top when a new
conversation begins (a request with no assistant message: a new run's first root call), so re-running a
notebook cell replays the same scripted run; inside one run, running out is still `ScriptExhausted`, whose
message says how many replies the script holds, which reply was asked for, and what that request said. Usage is counted with tiktoken's bundled encodings (offline), so budgets and meters
behave as they would with a real provider; cost is zero.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rlmnb._ground.errors import ScriptExhausted
from rlmnb._ground.tokens import count_messages, count_tokens
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion, Message

__all__ = ["Responder", "ScriptedLM"]

Responder = Callable[[list[Message]], "str | Completion"]


class ScriptedLM:
    """A deterministic LM. `latency` (seconds) is awaited per call, without blocking the event loop.
    `vision` says whether it takes images (llm_query(images=...)); its responder sees the image parts."""

    def __init__(self, replies: Sequence[str | Completion] | Responder, *, name: str = "scripted",
                 latency: float = 0.0, count_usage: bool = True, supports_stop: bool = False, supports_seed: bool = False,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 vision: bool = True) -> None:
        if callable(replies):
            self._responder: Responder | None = replies
            self._replies: list[str | Completion] = []
        else:
            if isinstance(replies, str):
                raise TypeError("ScriptedLM takes a list of replies (or a callable), not a single str.")
            self._responder = None
            self._replies = [r if isinstance(r, Completion) else str(r) for r in replies]
        self.name = name
        self.vision = vision
        self.latency = latency
        self.count_usage = count_usage
        self.supports_stop = supports_stop
        self.supports_seed = supports_seed
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.requests: list[list[Message]] = []
        self.request_params: list[dict[str, Any]] = []
        """The keyword parameters of each request (stop sequences, a re-ask's temperature and seed), in order."""
        self._lock = threading.Lock()
        self._served = 0

    @property
    def remaining(self) -> int | None:
        """Replies left in a list script (None for a callable)."""
        return None if self._responder is not None else len(self._replies) - self._served

    def _next(self, messages: list[Message]) -> str | Completion:
        with self._lock:
            self.requests.append([dict(m) for m in messages])
            if self._responder is None:
                if self._served >= len(self._replies) and self._replies and _starts_conversation(messages):
                    self._served = 0  # a re-run: the script plays again from the top
                if self._served >= len(self._replies):
                    raise ScriptExhausted(_exhausted(self.name, len(self._replies), messages))
                reply = self._replies[self._served]
                self._served += 1
                return reply
        out = self._responder(messages)
        return out if isinstance(out, Completion) else str(out)

    def rewind(self) -> None:
        """Serve the script from its first reply again."""
        with self._lock:
            self._served = 0

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        reply = self._next(messages)
        self.request_params.append(dict(params))
        scripted = reply if isinstance(reply, Completion) else Completion(text=reply, finish_reason="stop")
        text, finish = scripted.text, scripted.finish_reason
        stops = [s for s in (params.get("stop") or []) if s in text] if self.supports_stop else []
        if stops:
            text, finish = text[:min(text.index(s) for s in stops)], "stop"
        usage = CallUsage(
            input_tokens=count_messages(messages, self.name) if self.count_usage else 0,
            output_tokens=count_tokens(text, self.name) if self.count_usage else 0,
            cost_usd=0.0)
        return Completion(text=text, usage=usage, model=self.name, meta={**scripted.meta, "finish_reason": finish},
                          finish_reason=finish, reasoning=scripted.reasoning)

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self.complete(messages, **params)

    def __repr__(self) -> str:
        kind = "callable" if self._responder is not None else f"{len(self._replies)} replies"
        return f"ScriptedLM({self.name!r}, {kind})"


def _exhausted(name: str, given: int, messages: list[Message]) -> str:
    """Why a list script ran out and what to add: how many replies it holds, how many requests asked for one,
    and what the last said (often a run's closing call after its last turn, or a submit sent back)."""
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    said = " ".join(str(last).split())[:100] if isinstance(last, str) else "(not text)"
    return (f"ScriptedLM {name!r} ran out of replies: its script has {given}, and the run asked for "
            f"reply {given + 1} (its last message: {said!r}). Add replies to the script (a run whose turns end without submit() "
            f"makes one more root call for its answer, and a submit() sent back by a check is asked again), or pass "
            f"a callable.")


def _starts_conversation(messages: list[Message]) -> bool:
    return not any(m.get("role") == "assistant" for m in messages)
