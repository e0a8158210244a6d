"""The one counter of a run tree: calls, tokens, cost and time, checked before anything is spent.

A reservation is all-or-nothing: a batch that does not fit fails whole and spends nothing. Slots are
settled one by one as calls finish (with their real usage) or released if they were never sent.
Guarded by a plain lock, so it is safe from the event loop, sandbox threads and kernel bridges alike.
Child runs share their root's Budget; usage is also kept per run so a run tree's figures add up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.usage import CallUsage, Usage

__all__ = ["Budget", "Reservation"]


@dataclass
class Reservation:
    """Calls granted but not yet settled. `remaining` falls as slots are settled or released."""

    run_id: str
    calls: int
    est_tokens: int
    charged: bool
    remaining: int
    est_cost: float = 0.0  # dollars held for the calls until they settle (max_cost)


REPLY_ESTIMATE = 1_000  # output tokens a call is assumed to write when its reservation is made


class Budget:
    """Thread- and asyncio-safe budget shared by every run of one tree.

    Caps hold before spending: a call reserves its estimated tokens (prompt plus REPLY_ESTIMATE) and,
    under `max_cost`, its estimated price (`price_of(lm)` given by the caller, e.g. estimate.price_of)
    and is refused if the spent plus the reserved plus its own would pass the cap. So a run passes a
    cap only by what the calls in flight cost beyond their estimates.
    """

    def __init__(self, config: RLMConfig, price_of: Callable[[Any], Any] | None = None) -> None:
        self.max_llm_calls = config.max_llm_calls
        self.max_tokens = config.max_tokens
        self.max_cost = config.max_cost
        self.max_time = config.max_time
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._charged_used = 0  # settled calls that count against max_llm_calls
        self._charged_reserved = 0  # granted, not yet settled
        self._tokens_reserved = 0
        self._cost_reserved = 0.0
        self._per_run: dict[str, Usage] = {}
        self._price_of = price_of
        self._prices: dict[int, Any] = {}

    # ---- reading -------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def time_left(self) -> float | None:
        return None if self.max_time is None else max(0.0, self.max_time - self.elapsed())

    def usage(self, run_ids: set[str] | None = None) -> Usage:
        """Usage of the given runs (all runs when None), with the wall time so far."""
        with self._lock:
            parts = [u for rid, u in self._per_run.items() if run_ids is None or rid in run_ids]
        total = Usage()
        for part in parts:
            total = total + part
        return total.with_wall(round(self.elapsed(), 6))

    def run_usage(self, run_id: str) -> Usage:
        with self._lock:
            return self._per_run.get(run_id, Usage())

    @property
    def calls_left(self) -> int:
        with self._lock:
            return self.max_llm_calls - self._charged_used - self._charged_reserved

    def estimate(self, lm: Any, input_tokens: int, calls: int = 1) -> tuple[int, float]:
        """(tokens, dollars) to reserve for `calls` calls of `lm` reading `input_tokens` in all."""
        tokens = input_tokens + REPLY_ESTIMATE * calls
        if self.max_cost is None or self._price_of is None:
            return tokens, 0.0
        key = id(lm)
        if key not in self._prices:
            self._prices[key] = self._price_of(lm)
        price = self._prices[key]
        return tokens, 0.0 if price is None else float(price.cost(input_tokens, REPLY_ESTIMATE * calls))

    # ---- spending ------------------------------------------------------------------------------
    def reserve(self, run_id: str, calls: int = 1, *, est_tokens: int = 0, charged: bool = True,
                est_cost: float = 0.0) -> Reservation:
        """Grant `calls` calls at once or raise BudgetExhausted, spending nothing.

        `charged=False` is for root turns, which are limited by max_iterations instead of max_llm_calls.
        `est_tokens` and `est_cost` are held against max_tokens and max_cost until the calls settle.
        """
        if calls <= 0:
            raise ValueError("reserve() needs at least one call")
        with self._lock:
            self._check_shared(est_tokens, calls, est_cost)
            if charged:
                left = self.max_llm_calls - self._charged_used - self._charged_reserved
                if calls > left:
                    what = "this call" if calls == 1 else f"a batch of {calls} calls"
                    raise BudgetExhausted(
                        f"Sub-call budget exhausted: {left} of {self.max_llm_calls} calls left, not enough for "
                        f"{what}; nothing was sent. Aggregate what you already have with code, send fewer, "
                        f"larger prompts, or submit your answer.")
                self._charged_reserved += calls
            self._tokens_reserved += est_tokens
            self._cost_reserved += est_cost
            return Reservation(run_id, calls, est_tokens, charged, calls, est_cost)

    def settle(self, reservation: Reservation, usage: CallUsage, *, root: bool = False) -> None:
        """Record one finished call of a reservation with its real usage."""
        with self._lock:
            self._take_slot(reservation)
            if reservation.charged:
                self._charged_used += 1
            current = self._per_run.get(reservation.run_id, Usage())
            self._per_run[reservation.run_id] = current.add_call(usage, root=root)

    def release(self, reservation: Reservation, slots: int | None = None) -> None:
        """Return unsent slots (all remaining ones when `slots` is None)."""
        with self._lock:
            count = reservation.remaining if slots is None else min(slots, reservation.remaining)
            for _ in range(count):
                self._take_slot(reservation)

    def _take_slot(self, reservation: Reservation) -> None:
        if reservation.remaining <= 0:
            raise RuntimeError("reservation already fully settled")
        reservation.remaining -= 1
        if reservation.charged:
            self._charged_reserved -= 1
        share = reservation.est_tokens // reservation.calls
        if reservation.remaining == 0:
            share = reservation.est_tokens - share * (reservation.calls - 1)
        self._tokens_reserved -= share
        if reservation.est_cost:
            cost_share = reservation.est_cost / reservation.calls
            if reservation.remaining == 0:
                cost_share = reservation.est_cost - cost_share * (reservation.calls - 1)
            self._cost_reserved = max(0.0, self._cost_reserved - cost_share)

    def _check_shared(self, est_tokens: int, calls: int, est_cost: float = 0.0) -> None:
        """Token, cost and time caps, which bind root and sub calls alike. Lock held."""
        if self.max_time is not None and self.elapsed() >= self.max_time:
            raise BudgetExhausted(f"Time budget exhausted ({self.max_time:g} s); submit the best answer you have.")
        used = Usage()
        for part in self._per_run.values():
            used = used + part
        if self.max_tokens is not None and used.tokens + self._tokens_reserved + est_tokens > self.max_tokens:
            raise BudgetExhausted(
                f"Token budget exhausted: {used.tokens + self._tokens_reserved} of {self.max_tokens} tokens used "
                f"or reserved, {'this call' if calls == 1 else f'{calls} calls'} would need ~{est_tokens} more; "
                f"nothing was sent. Use smaller prompts or submit your answer.")
        if self.max_cost is not None and used.cost_usd >= self.max_cost:
            raise BudgetExhausted(
                f"Cost budget exhausted (${used.cost_usd:.4f} of ${self.max_cost:.4f}); submit your answer.")
        if self.max_cost is not None and used.cost_usd + self._cost_reserved + est_cost > self.max_cost:
            raise BudgetExhausted(
                f"Cost budget would be passed: ${used.cost_usd:.4f} spent and ${self._cost_reserved:.4f} held for "
                f"calls in flight of ${self.max_cost:.4f}, and {'this call' if calls == 1 else f'{calls} calls'} "
                f"may cost ~${est_cost:.4f}; nothing was sent. Send fewer or smaller prompts, or submit your answer.")
