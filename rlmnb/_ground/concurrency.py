"""An adaptive limit on sub-calls in flight: halve on rate limits, climb back one step at a time.

`AdaptiveLimiter` is used as `async with limiter:` around each model request (AIMD, as TCP does):

- a rate limit (HTTP 429) halves the limit, down to a floor, at most once per "generation" of
  requests: the 64 requests that were all admitted under the old limit and all got a 429 cause one
  halving, not 64;
- every `increase_every` successes (default: the current limit, i.e. about one round trip) raise
  it by one, up to the ceiling.

Model adapters report what happens *inside* a request without knowing about the limiter: the
slot held by the current task lives in a context variable, so `note_rate_limited()` tells the
limiter that admitted this request, and `await backoff(seconds)` gives the slot back while the
request sleeps before a retry and waits to be admitted again under the (maybe lower) limit. Both
are harmless no-ops when no limiter is active, so an adapter works the same outside a run.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["AdaptiveLimiter", "OnChange", "backoff", "current_limiter", "note_rate_limited", "settle"]

OnChange = Callable[[int, str], None]


class _Slot:
    """One admitted request: which limiter, which generation, whether it currently holds capacity."""

    __slots__ = ("limiter", "generation", "held", "token", "throttled")

    def __init__(self, limiter: AdaptiveLimiter, generation: int) -> None:
        self.limiter = limiter
        self.generation = generation
        self.held = True
        self.throttled = False  # its latest answer was a 429 (not a success, even if it ends quietly)
        self.token: contextvars.Token[_Slot | None] | None = None


_current_slot: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("rlmnb_limiter_slot", default=None)


class AdaptiveLimiter:
    """At most `limit` requests in flight; `limit` adapts between `min_limit` and `max_limit`.

    Args:
        max_limit: the starting and highest limit (RLMConfig.max_concurrency, default 64).
        min_limit: the floor rate limits never push it below (RLMConfig.min_concurrency, default 2).
        increase_every: successes per +1 step; default None means "the current limit".
        on_change: called with (new_limit, reason) on every change, from the event loop's thread.

    Waiters are admitted in arrival order. Not thread-safe: use it from one event loop.
    """

    def __init__(self, max_limit: int = 64, min_limit: int = 2, *, increase_every: int | None = None,
                 on_change: OnChange | None = None) -> None:
        if max_limit < 1 or min_limit < 1 or min_limit > max_limit:
            raise ValueError(f"need 1 <= min_limit <= max_limit, got min_limit={min_limit}, max_limit={max_limit}")
        self.max_limit = max_limit
        self.min_limit = min_limit
        self.limit = max_limit
        self.increase_every = increase_every
        self.on_change = on_change
        self.in_flight = 0
        self.peak_in_flight = 0
        self.rate_limits = 0  # 429s reported
        self.decreases = 0
        self.increases = 0
        self._generation = 0
        self._successes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    # ---- admission --------------------------------------------------------------------------------
    async def __aenter__(self) -> AdaptiveLimiter:
        await self._acquire()
        slot = _Slot(self, self._generation)
        slot.token = _current_slot.set(slot)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        slot = _current_slot.get()
        if slot is None or slot.limiter is not self:  # entered and left in different contexts: be safe
            self._release()
            return
        if slot.token is not None:
            _current_slot.reset(slot.token)
        if slot.held:
            slot.held = False
            self._release()
        if exc_type is None and not slot.throttled:
            self._on_success()

    async def _acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self._admit()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # admitted, then cancelled before resuming
                self._release()
            raise

    def _admit(self) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            future = self._waiters.popleft()
            if not future.done():
                self._admit()
                future.set_result(None)

    # ---- adaptation -------------------------------------------------------------------------------
    def _on_success(self) -> None:
        if self.limit >= self.max_limit:
            return
        self._successes += 1
        if self._successes >= (self.increase_every or self.limit):
            self._successes = 0
            self.limit += 1
            self.increases += 1
            self._notify("calls succeeding: +1")
            self._wake()

    def _on_rate_limited(self, slot: _Slot) -> None:
        self.rate_limits += 1
        if slot.generation != self._generation:
            return  # admitted before the last decrease, which already answered this burst
        self._generation += 1
        self._successes = 0
        new = max(self.min_limit, self.limit // 2)
        if new != self.limit:
            self.limit = new
            self.decreases += 1
            self._notify("rate limited (429): halved")

    def _notify(self, reason: str) -> None:
        if self.on_change is not None:
            self.on_change(self.limit, reason)

    def __repr__(self) -> str:
        return (f"AdaptiveLimiter(limit={self.limit}, in_flight={self.in_flight}, "
                f"range={self.min_limit}..{self.max_limit})")


def note_rate_limited() -> bool:
    """Tell the limiter that admitted the current request that it was rate limited (a 429).

    Returns False when the request runs outside any AdaptiveLimiter.
    """
    slot = _current_slot.get()
    if slot is None:
        return False
    slot.throttled = True
    slot.limiter._on_rate_limited(slot)
    return True


async def backoff(seconds: float) -> None:
    """Sleep before a retry without holding a slot, then wait to be admitted again.

    Outside a limiter this is `asyncio.sleep(seconds)`.
    """
    slot = _current_slot.get()
    if slot is None or not slot.held:
        await asyncio.sleep(seconds)
        return
    limiter = slot.limiter
    slot.held = False
    limiter._release()
    await asyncio.sleep(seconds)
    await limiter._acquire()  # if cancelled here, the slot is not held and __aexit__ gives nothing back
    slot.held = True
    slot.throttled = False
    slot.generation = limiter._generation


def current_limiter() -> AdaptiveLimiter | None:
    """The limiter that admitted the current request, if any."""
    slot = _current_slot.get()
    return slot.limiter if slot is not None else None


def settle(future: asyncio.Future[Any], value: Any) -> None:
    """Give `future` its result unless it already has one (a worker thread hands back through
    `loop.call_soon_threadsafe(settle, future, value)`; a timed-out waiter may have moved on)."""
    if not future.done():
        future.set_result(value)
