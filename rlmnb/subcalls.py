"""Sub-model calls on the host: budget first, then the model, every step an event.

`SubCaller.query` serves `llm_query`; `SubCaller.query_batched` serves `llm_query_batched` with the
batch reserved whole before anything is sent and each slot run concurrently under the run's limiter.
A failed slot becomes "[error] <Type>: <message>"; it never fails or holds back the other slots.
A reply with no answer (no choices, no content, a content filter) is asked again once where that can
help and otherwise fails as an EmptyAnswer (`reply_checks`); it is never returned as "" nor cached.
Terminal model errors (a missing API key, an exhausted script) are remembered in `fatal` so the loop
stops the run after the snippet returns.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from .budget import Budget, Reservation
from .cache import ResponseCache, cache_identity, open_cache, request_key
from .concurrency import AdaptiveLimiter
from .config import RLMConfig
from .errors import EmptyAnswer, ModelError, PromptTooLarge, format_error_slot
from .events import (
    BatchFinished,
    BatchStarted,
    ConcurrencyChanged,
    EventBus,
    RunScope,
    SubCallFinished,
    SubCallSent,
    SubCallStarted,
)
from .limits import sub_prompt_window
from .lm_factory import resolve_model
from .models import LM, Completion, Message, model_label
from .reply_checks import added, no_answer
from .tokens import count_tokens
from .usage import CallUsage


def prompt_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class SubCaller:
    """Host-side sub-calls of one run (child runs get their own, sharing the Budget)."""

    def __init__(self, *, lm: LM, config: RLMConfig, budget: Budget, bus: EventBus, scope: RunScope,
                 limiter: Any = None, cache: Any = None, turn: Callable[[], int] = lambda: 0) -> None:
        self.lm = lm
        self.config = config
        self.budget = budget
        self.bus = bus
        self.scope = scope
        self.turn = turn
        self.limiter = limiter if limiter is not None else AdaptiveLimiter(
            config.max_concurrency, config.min_concurrency, on_change=self._limit_changed)
        self.cache: ResponseCache | None = cache  # opened on the first cacheable call when None
        self._inflight: dict[str, asyncio.Future[Completion | None]] = {}
        self.fatal: BaseException | None = None
        self._prefetched: dict[str, Completion | None] = {}  # a batch's cache lookups, done up front
        self.pinned = False  # replay: every model asked for is served by `lm` (the record)
        self._models: dict[str, LM] = {}
        self._ids = 0
        self._batches = 0

    # ---- public ----------------------------------------------------------------------------------
    async def query(self, prompt: str, model: Any = None) -> str:
        """One sub-call; errors are raised so the model sees them in its snippet's traceback."""
        lm = self._lm_for(model)
        tokens, cost = self.budget.estimate(lm, self._check_size(prompt, lm))
        reservation = self.budget.reserve(self.scope.run_id, 1, est_tokens=tokens, est_cost=cost)
        reply, error = await self._call(lm, prompt, reservation, batch_id=None)
        if error is not None:
            raise error
        return reply

    async def query_batched(self, prompts: Sequence[str], model: str | None = None,
                            group: str | None = None) -> list[str]:
        """Many sub-calls at once: all-or-nothing budget, order kept, failures as '[error]' slots.

        `group` names the llm_map the batch belongs to, so views show its batches as one map.
        """
        lm = self._lm_for(model)
        self._batches += 1
        batch_id = f"{self.scope.run_id}-b{self._batches}"
        turn = self.turn()
        results: list[str | None] = [None] * len(prompts)
        sendable: list[tuple[int, int]] = []
        for i, prompt in enumerate(prompts):
            try:
                sendable.append((i, self._check_size(prompt, lm)))
            except PromptTooLarge as exc:
                results[i] = format_error_slot(exc)
        self.bus.emit(BatchStarted, self.scope, batch_id=batch_id, turn=turn, size=len(prompts),
                      model=model_label(lm), group=group)
        started = time.perf_counter()
        reservation = None
        if sendable:
            try:
                tokens, cost = self.budget.estimate(lm, sum(e for _, e in sendable), len(sendable))
                reservation = self.budget.reserve(self.scope.run_id, len(sendable), est_tokens=tokens,
                                                  est_cost=cost)
            except Exception as exc:
                self.bus.emit(BatchFinished, self.scope, batch_id=batch_id, turn=turn, size=len(prompts),
                              errors=len(prompts), latency_s=0.0, refused=str(exc))
                raise

        prefetched = await self._prefetch(lm, [prompts[i] for i, _ in sendable]) if sendable else []

        async def slot(i: int) -> None:
            assert reservation is not None
            reply, error = await self._call(lm, prompts[i], reservation, batch_id=batch_id)
            results[i] = format_error_slot(error) if error is not None else reply

        try:
            await asyncio.gather(*(slot(i) for i, _ in sendable))
        finally:
            if reservation is not None and reservation.remaining:
                self.budget.release(reservation)  # cancelled slots were never settled
            for key in prefetched:  # lookups a cancelled slot never used
                self._prefetched.pop(key, None)
        out = [r if r is not None else "[error] CancelledError: not sent" for r in results]
        self.bus.emit(BatchFinished, self.scope, batch_id=batch_id, turn=turn, size=len(prompts),
                      errors=sum(1 for r in out if r.startswith("[error]")),
                      latency_s=round(time.perf_counter() - started, 6))
        return out

    # ---- internals -------------------------------------------------------------------------------
    def _lm_for(self, model: Any) -> LM:
        if self.pinned or model is None or model is self.lm or model == model_label(self.lm):
            return self.lm
        if not isinstance(model, str):
            return resolve_model(model, role="llm_query model")
        if model not in self._models:
            self._models[model] = resolve_model(model, role="llm_query model", max_retries=self.config.max_retries,
                                                timeout=self.config.request_timeout)
        return self._models[model]

    def prompt_cap(self, lm: LM) -> int | None:
        """The largest prompt: max_sub_prompt_tokens, else the model's window less room for its reply."""
        return sub_prompt_window(self.config, lm)

    def _check_size(self, prompt: str, lm: LM) -> int:
        """The prompt's token estimate; PromptTooLarge (nothing sent) when it exceeds the cap."""
        cap = self.prompt_cap(lm)
        if cap is None and self.budget.max_tokens is None:
            return len(prompt) // 4
        if cap is not None and len(prompt) // 8 > cap:  # hopeless even at 8 chars a token: skip counting
            tokens = len(prompt) // 4
        else:
            tokens = count_tokens(prompt, model_label(lm))
        if cap is not None and tokens > cap:
            raise PromptTooLarge(
                f"prompt of ~{tokens:,} tokens is larger than the sub-model's limit of {cap:,}; nothing was sent. "
                f"Split the text into chunks of at most ~{cap * 3:,} characters and use llm_query_batched.")
        return tokens

    async def _call(self, lm: LM, prompt: str, reservation: Reservation,
                    batch_id: str | None) -> tuple[str, BaseException | None]:
        self._ids += 1
        call_id = f"{self.scope.run_id}-c{self._ids}"
        turn = self.turn()
        limit = self.config.max_event_chars
        self.bus.emit(SubCallStarted, self.scope, call_id=call_id, batch_id=batch_id, turn=turn,
                      model=model_label(lm), prompt=prompt[:limit], prompt_chars=len(prompt),
                      prompt_sha=prompt_sha(prompt))
        started = time.perf_counter()
        sent: list[float] = []  # when the call got its slot (empty: never sent, e.g. cached)

        def on_sent() -> None:
            if not sent:  # the "asked again" call is part of the same call's running time
                sent.append(time.perf_counter())
                self.bus.emit(SubCallSent, self.scope, call_id=call_id)

        messages = [{"role": "user", "content": prompt}]
        completion: Completion | None = None
        error: BaseException | None = None
        try:
            completion = await self._complete(lm, messages, on_sent)
            problem = no_answer(completion)
            if problem is not None and problem.retry:
                first = completion
                completion = await self._complete(lm, messages, on_sent)
                completion = Completion(completion.text, added(first.usage, completion.usage), completion.model,
                                        {**completion.meta, "asked_again": problem.reason},
                                        completion.finish_reason, completion.reasoning)
                problem = no_answer(completion)
            if problem is not None:
                error = EmptyAnswer(f"{model_label(lm)} gave no answer: {problem.reason}"
                                    + ("; asked twice" if "asked_again" in completion.meta else "") + ".")
        except asyncio.CancelledError:
            self.budget.release(reservation, 1)
            raise
        except ModelError as exc:
            self.fatal = self.fatal or exc
            error = exc
        except Exception as exc:  # a failed call is this slot's problem only
            error = exc
        ended = time.perf_counter()
        queued = round((sent[0] if sent else ended) - started, 6)
        latency = round(ended - sent[0], 6) if sent else 0.0  # the provider's time; a call never sent had none
        usage = completion.usage if completion is not None else CallUsage(
            input_tokens=0, output_tokens=0, cost_usd=0.0)
        if isinstance(error, PromptTooLarge):
            self.budget.release(reservation, 1)  # refused by the provider before any work
        else:
            self.budget.settle(reservation, usage)
        reply = completion.text if completion is not None else ""
        self.bus.emit(SubCallFinished, self.scope, call_id=call_id, batch_id=batch_id, turn=turn,
                      reply=None if error else reply, error=format_error_slot(error) if error else None,
                      usage=usage.to_dict(), latency_s=latency, cached=usage.cached, queued_s=queued,
                      meta=dict(completion.meta) if completion is not None else {})
        return reply, error

    async def _complete(self, lm: LM, messages: list[Message], on_sent: Callable[[], None]) -> Completion:
        """The reply from the response cache when allowed and present, else from the model under the limiter.

        Identical requests in flight at once are sent once; the others wait and are served as cached.
        `on_sent` is called once the limiter gives the call its slot: the end of its queued time.
        """
        identity = cache_identity(lm) if self.config.cache else None
        if identity is None:
            async with self.limiter:
                on_sent()
                return await lm.acomplete(messages)
        if self.cache is None:
            self.cache = open_cache()
        key = request_key(identity, messages)
        # looked up with its batch (no disk read on the event loop), or a single llm_query's own lookup
        hit = self._prefetched.pop(key) if key in self._prefetched else self.cache.get(key)
        if hit is not None:
            return hit
        twin = self._inflight.get(key)
        if twin is not None:
            shared = await asyncio.shield(twin)
            if shared is not None:
                return Completion(text=shared.text, usage=CallUsage(0, 0, 0.0, cached=True), model=shared.model,
                                  meta={"cached": True, "shared": True})
        future: asyncio.Future[Completion | None] = asyncio.get_running_loop().create_future()
        self._inflight.setdefault(key, future)
        completion: Completion | None = None
        try:
            async with self.limiter:
                on_sent()
                completion = await lm.acomplete(messages)
            if no_answer(completion) is None:  # "no answer" is not an answer to serve again
                self.cache.put(key, completion)
            return completion
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            future.set_result(completion)

    async def _prefetch(self, lm: LM, prompts: list[str]) -> list[str]:
        """Look a whole batch up in the response cache at once, in a worker thread; returns the keys."""
        identity = cache_identity(lm) if self.config.cache else None
        if identity is None:
            return []
        if self.cache is None:
            self.cache = open_cache()
        keys = [request_key(identity, [{"role": "user", "content": p}]) for p in prompts]
        hits = await asyncio.to_thread(self.cache.get_many, keys)
        for key in keys:
            self._prefetched[key] = hits.get(key)
        return keys

    def _limit_changed(self, limit: int, reason: str) -> None:
        self.bus.emit(ConcurrencyChanged, self.scope, limit=limit, reason=reason)
