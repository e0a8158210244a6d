"""The host side of every sandbox primitive: llm_query(_batched), a map's rounds, rlm_query routing.

Entry points: `RunHost` (implements SandboxHost for one run), `SubCaller.query` (llm_query),
`SubCaller.query_batched` (llm_query_batched and every round of a map), `SubCaller.send` (one request
under the tree's limiter; emits SubCallSent) and `MapHost` (opens, feeds and closes a run's maps).

Sub-calls: budget first, then the model, every step an event. A batch is reserved whole before
anything is sent and each slot runs concurrently under the run's limiter. A failed slot becomes
"[error] <Type>: <message>"; it never fails or holds back the other slots. A reply with no answer (no
choices, no content, a content filter) is asked again once where that can help and otherwise fails as
an EmptyAnswer (`base.no_answer`); it is never returned as "" nor cached. Terminal model errors (a
missing API key, an exhausted script) are remembered in `fatal` so the loop stops the run after the
snippet returns.

Maps (llm_map / llm_classify / llm_filter): the packing, validation and re-asks run in the sandbox
(rlmnb._operators), next to the data and the user's output classes. The host opens a map (MapStarted,
handing back the packing limits, which follow the sub-model's window), sends each round of packed
prompts through `SubCaller.query_batched` tagged with the map's id, and closes it with its figures
(MapFinished). rlm_query goes to a `ChildRunner` (runs.Children).

Models: a sub-call names only a model the user configured (`SubCaller.allowed_models`: the run's sub-model,
the tree's other models handed in as `models`, and `RLMConfig.models`); any other name is refused with
ModelNotAllowed before anything is reserved or sent, since model code chooses the name and the host, not the
sandbox, would send the request (a litellm name can carry any URL). LM objects come only from the user's
own Python and stay allowed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rlmnb._engine.budget import Budget, Reservation
from rlmnb._engine.cache import ResponseCache, cache_identity, open_cache, prompt_sha, request_key
from rlmnb._engine.limits import SMALL_WINDOW, sub_prompt_window, window_of
from rlmnb._ground.concurrency import AdaptiveLimiter
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import (
    EmptyAnswer,
    ImagesRefused,
    ModelError,
    ModelNotAllowed,
    PromptTooLarge,
    format_error_slot,
)
from rlmnb._ground.images import Image, image_tokens
from rlmnb._ground.tokens import count_tokens
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import LM, Completion, Message, model_label, no_answer
from rlmnb._models.resolve import resolve_model
from rlmnb.events import (
    BatchFinished,
    BatchStarted,
    CodeOutput,
    ConcurrencyChanged,
    EventBus,
    MapFinished,
    MapStarted,
    RunScope,
    SubCallFinished,
    SubCallSent,
    SubCallStarted,
)

__all__ = ["DEFAULT_PACK_TOKENS", "MAX_ERRORS_KEPT", "MAX_PACK_TOKENS", "CallClock", "ChildRunner", "MapHost",
           "ModelNotAllowed", "RunHost", "SubCaller", "check_vision", "pack_limits"]


def _messages(prompt: str, images: Sequence[Image] = ()) -> list[Message]:
    """The one user message of a sub-call: the prompt, then its images as OpenAI-style image parts.
    The response cache keys on these messages, so an image's bytes are part of the key."""
    if not images:
        return [{"role": "user", "content": prompt}]
    return [{"role": "user", "content": [{"type": "text", "text": prompt}, *(i.part() for i in images)]}]


def check_vision(lm: LM) -> None:
    """ImagesRefused (nothing sent) unless the model reads images: `lm.supports_images()` (LiteLLM: `vision=`
    or litellm's model info), else an LM's `vision` attribute; a model that says neither is refused."""
    method = getattr(lm, "supports_images", None)
    verdict = method() if callable(method) else getattr(lm, "vision", None)
    if verdict is True:
        return
    name = model_label(lm)
    why = ("litellm's model info says it does not read images" if verdict is False else
           "litellm does not know whether it reads images")
    raise ImagesRefused(f"{name} cannot be sent images ({why}); nothing was sent. Pass model= a vision model "
                        f"(e.g. 'openai/gpt-4o-mini'), or LiteLLM({name!r}, vision=True) if it does read images.")


@dataclass
class CallClock:
    """One sub-call's identity and the moment it was first sent (None: not sent yet, e.g. served from cache)."""

    call_id: str
    sent_at: float | None = None


class SubCaller:
    """Host-side sub-calls of one run (child runs get their own, sharing the Budget)."""

    def __init__(self, *, lm: LM, config: RLMConfig, budget: Budget, bus: EventBus, scope: RunScope,
                 limiter: AdaptiveLimiter | None = None, cache: ResponseCache | None = None,
                 turn: Callable[[], int] = lambda: 0, models: Sequence[LM | None] = ()) -> None:
        self.lm = lm
        self.models = tuple(m for m in models if m is not None)  # the tree's other models (root, child)
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
    async def query(self, prompt: str, model: Any = None, *, images: Sequence[Image] | None = None) -> str:
        """One sub-call; errors are raised so the model sees them in its snippet's traceback.

        `images` go to the model as image parts after the prompt (a vision model only: ImagesRefused otherwise).
        """
        lm = self._lm_for(model)
        pictures = tuple(images or ())
        if pictures:
            check_vision(lm)
        prompt_tokens = self._check_size(prompt, lm) + sum(image_tokens(i.width, i.height) for i in pictures)
        tokens, cost = self.budget.estimate(lm, prompt_tokens)
        reservation = self.budget.reserve(self.scope.run_id, 1, est_tokens=tokens, est_cost=cost)
        reply, error = await self._call(lm, prompt, reservation, batch_id=None, images=pictures)
        if error is not None:
            raise error
        return reply

    async def query_batched(self, prompts: Sequence[str], model: str | None = None,
                            group: str | None = None, *, images: Sequence[Sequence[Image]] | None = None) -> list[str]:
        """Many sub-calls at once: all-or-nothing budget, order kept, failures as '[error]' slots.

        `group` names the llm_map the batch belongs to, so views show its batches as one map.
        `images[i]` are the images of `prompts[i]` (see `query`).
        """
        lm = self._lm_for(model)
        pictures = [tuple(x) for x in images] if images is not None else [()] * len(prompts)
        if len(pictures) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(pictures)} image lists.")
        if any(pictures):
            check_vision(lm)
        self._batches += 1
        batch_id = f"{self.scope.run_id}-b{self._batches}"
        turn = self.turn()
        results: list[str | None] = [None] * len(prompts)
        sendable: list[tuple[int, int]] = []
        for i, prompt in enumerate(prompts):
            try:
                sendable.append((i, self._check_size(prompt, lm)
                                 + sum(image_tokens(p.width, p.height) for p in pictures[i])))
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

        prefetched = await self._prefetch(lm, [_messages(prompts[i], pictures[i]) for i, _ in sendable]) \
            if sendable else []

        async def slot(i: int) -> None:
            assert reservation is not None
            reply, error = await self._call(lm, prompts[i], reservation, batch_id=batch_id, images=pictures[i])
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
    def allowed_models(self) -> dict[str, LM | None]:
        """The model names a sub-call may give, each with its LM (None: `RLMConfig.models`, made on first use)."""
        allowed: dict[str, LM | None] = {name: None for name in self.config.models}
        for lm in (*reversed(self.models), self.lm):  # the run's own objects win over a configured name
            allowed[model_label(lm)] = lm
        return allowed

    def _lm_for(self, model: Any) -> LM:
        """The LM a sub-call's `model` names. Raises ModelNotAllowed for a name outside `allowed_models`."""
        if self.pinned or model is None or model is self.lm:
            return self.lm
        if not isinstance(model, str):  # an object: the user's own Python made it (kernel calls carry names)
            return resolve_model(model, role="llm_query model")
        allowed = self.allowed_models()
        if model not in allowed:
            shown = model if len(model) <= 80 else model[:79] + "…"
            raise ModelNotAllowed(f"model {shown!r} is not one this run may call, so nothing was sent; leave model= "
                                  f"out for the sub-model or pass one of: {', '.join(map(repr, allowed))}.")
        found = allowed[model]
        if found is not None:
            return found
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
                    batch_id: str | None, images: Sequence[Image] = ()) -> tuple[str, BaseException | None]:
        self._ids += 1
        call_id = f"{self.scope.run_id}-c{self._ids}"
        turn = self.turn()
        limit = self.config.max_event_chars
        self.bus.emit(SubCallStarted, self.scope, call_id=call_id, batch_id=batch_id, turn=turn,
                      model=model_label(lm), prompt=prompt[:limit], prompt_chars=len(prompt),
                      prompt_sha=prompt_sha(prompt), images=[i.describe() for i in images])
        started = time.perf_counter()
        clock = CallClock(call_id)
        messages = _messages(prompt, images)
        completion: Completion | None = None
        error: BaseException | None = None
        try:
            completion = await self._complete(lm, messages, clock)
            problem = no_answer(completion)
            if problem is not None and problem.retry:
                first = completion
                completion = await self._complete(lm, messages, clock)
                completion = Completion(completion.text, first.usage + completion.usage, completion.model,
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
        sent = clock.sent_at
        queued = round((sent if sent is not None else ended) - started, 6)
        latency = round(ended - sent, 6) if sent is not None else 0.0  # the provider's time; none if never sent
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

    async def send(self, lm: LM, messages: list[Message], clock: CallClock) -> Completion:
        """Send one request under the tree's limiter and return the model's reply.

        The first send of a call ends its queued time: it stamps `clock.sent_at` and emits SubCallSent once
        (the "asked again" request is part of the same call's running time).
        """
        async with self.limiter:
            if clock.sent_at is None:
                clock.sent_at = time.perf_counter()
                self.bus.emit(SubCallSent, self.scope, call_id=clock.call_id)
            return await lm.acomplete(messages)

    async def _complete(self, lm: LM, messages: list[Message], clock: CallClock) -> Completion:
        """The reply from the response cache when allowed and present, else from the model under the limiter.

        Identical requests in flight at once are sent once; the others wait and are served as cached.
        """
        identity = cache_identity(lm) if self.config.cache else None
        if identity is None:
            return await self.send(lm, messages, clock)
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
            completion = await self.send(lm, messages, clock)
            if no_answer(completion) is None:  # "no answer" is not an answer to serve again
                self.cache.put(key, completion)
            return completion
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            future.set_result(completion)

    async def _prefetch(self, lm: LM, requests: list[list[Message]]) -> list[str]:
        """Look a whole batch up in the response cache at once, in a worker thread; returns the keys."""
        identity = cache_identity(lm) if self.config.cache else None
        if identity is None:
            return []
        if self.cache is None:
            self.cache = open_cache()
        keys = [request_key(identity, messages) for messages in requests]
        hits = await asyncio.to_thread(self.cache.get_many, keys)
        for key in keys:
            self._prefetched[key] = hits.get(key)
        return keys

    def _limit_changed(self, limit: int, reason: str) -> None:
        self.bus.emit(ConcurrencyChanged, self.scope, limit=limit, reason=reason)


# ---- maps ------------------------------------------------------------------------------------------
DEFAULT_PACK_TOKENS = 4_000  # when the sub-model's window is unknown
MAX_PACK_TOKENS = 8_000  # larger packs save little and make long replies (and their mistakes) likelier
MAX_ERRORS_KEPT = 20  # failed items listed in a MapFinished event
DEFAULT_PACK_ITEMS = 50
# a small sub-model (limits.SMALL_WINDOW) gets one item per map call by default (bench/packing.py)


def pack_limits(sub: SubCaller) -> dict[str, Any]:
    """Token target and item cap of one pack (`pack_items`, else one item for a small sub-model and
    `DEFAULT_PACK_ITEMS` otherwise), the largest prompt the sub-model takes (None: unknown), and the tree's
    concurrency limit (the map keeps about twice that many packs on their way)."""
    cap = sub.prompt_cap(sub.lm)
    target = sub.config.pack_tokens
    if target is None:
        target = DEFAULT_PACK_TOKENS if cap is None else max(256, min(MAX_PACK_TOKENS, cap // 4))
    elif cap is not None:
        target = min(target, cap)
    items = sub.config.pack_items
    if items is None:
        window = window_of(sub.lm)
        items = 1 if window is not None and window <= SMALL_WINDOW else DEFAULT_PACK_ITEMS
    return {"pack_tokens": int(target), "pack_items": items, "retries": sub.config.map_retries,
            "max_prompt_tokens": cap, "concurrency": sub.limiter.max_limit}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class MapHost:
    """Opens, feeds and closes the maps of one run; every sub-call goes through the run's SubCaller."""

    def __init__(self, sub: SubCaller) -> None:
        self.sub = sub
        self._count = 0
        self._open: dict[str, tuple[int, float]] = {}  # map_id -> (turn, started)

    def begin(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """Emit MapStarted; return the map's id and its packing limits."""
        self._count += 1
        map_id = f"{self.sub.scope.run_id}-m{self._count}"
        turn = self.sub.turn()
        limits = pack_limits(self.sub)
        items = info.get("items")
        self.sub.bus.emit(MapStarted, self.sub.scope, map_id=map_id, turn=turn,
                          operator=str(info.get("operator") or "llm_map")[:40],
                          instruction=str(info.get("instruction") or "")[:2_000],
                          output=str(info.get("output") or "")[:500],
                          items=items if isinstance(items, int) and not isinstance(items, bool) else None,
                          pack_tokens=limits["pack_tokens"], pack_items=limits["pack_items"])
        self._open[map_id] = (turn, time.perf_counter())
        return {"map_id": map_id, "model": model_label(self.sub.lm), **limits}

    async def batch(self, map_id: str, prompts: list[str], model: str | None = None, *,
                    images: Sequence[Sequence[Image]] | None = None) -> list[str]:
        """One round of packed prompts: exactly llm_query_batched, grouped under the map."""
        if map_id not in self._open:
            raise ValueError(f"no open map {map_id!r}; llm_map opens one itself")
        return await self.sub.query_batched(prompts, model, group=map_id, images=images)

    def end(self, map_id: str, figures: Mapping[str, Any]) -> None:
        """Emit MapFinished with the map's figures (items, packs, re-asks, failures)."""
        turn, started = self._open.pop(map_id, (self.sub.turn(), time.perf_counter()))
        errors = figures.get("errors")
        kept = [{"item": str(e.get("item", ""))[:200], "reason": str(e.get("reason", ""))[:300]}
                for e in (errors if isinstance(errors, list) else [])[:MAX_ERRORS_KEPT] if isinstance(e, dict)]
        stopped = figures.get("stopped")
        self.sub.bus.emit(MapFinished, self.sub.scope, map_id=map_id, turn=turn, items=_int(figures.get("items")),
                          packs=_int(figures.get("packs")), reasks=_int(figures.get("reasks")),
                          failures=_int(figures.get("failures")), calls=_int(figures.get("calls")),
                          latency_s=round(time.perf_counter() - started, 6),
                          stopped=str(stopped)[:500] if stopped else None, errors=kept)


# ---- the run's host -------------------------------------------------------------------------------
class ChildRunner(Protocol):
    """Serves rlm_query: child runs below the depth cap, a plain sub-call at it (see recursion.py)."""

    async def run_child(self, prompt: str, inputs: Mapping[str, Any]) -> Any: ...

    async def run_children(self, prompts: Sequence[str],
                           inputs_list: Sequence[Mapping[str, Any]] | None) -> list[Any]: ...


class RunHost:
    """Implements SandboxHost for one run."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, sub: SubCaller,
                 children: ChildRunner, tools: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.loop = loop
        self.sub = sub
        self.tools = dict(tools or {})
        self.children = children
        self.maps = MapHost(sub)

    async def llm_query(self, prompt: str, model: str | None = None, *, images: Sequence[Image] | None = None) -> str:
        return await self.sub.query(prompt, model, images=images)

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None, *,
                                images: Sequence[Sequence[Image]] | None = None) -> list[str]:
        return await self.sub.query_batched(list(prompts), model, images=images)

    async def rlm_query(self, prompt: str, inputs: Mapping[str, Any] | None = None) -> Any:
        return await self.children.run_child(prompt, inputs or {})

    async def rlm_query_batched(self, prompts: Sequence[str],
                                inputs_list: Sequence[Mapping[str, Any]] | None = None) -> list[Any]:
        return await self.children.run_children(prompts, inputs_list)

    async def map_begin(self, info: Mapping[str, Any]) -> dict[str, Any]:
        return self.maps.begin(info)

    async def map_batch(self, map_id: str, prompts: Sequence[str], model: str | None = None, *,
                        images: Sequence[Sequence[Image]] | None = None) -> list[str]:
        return await self.maps.batch(map_id, list(prompts), model, images=images)

    async def map_end(self, map_id: str, figures: Mapping[str, Any]) -> None:
        self.maps.end(map_id, figures)

    def output(self, text: str, stream: str, turn: int) -> None:
        """A piece of what the running snippet printed, as a CodeOutput event (never for another turn)."""
        if turn == self.sub.turn():
            self.sub.bus.emit(CodeOutput, self.sub.scope, turn=turn, text=text, stream=stream)
