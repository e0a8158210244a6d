"""What an evaluation spends: each run's cost bracket before anything runs, and a hard dollar limit while it runs.

Before (`--dry-run`, `--max-cost`): a `JobCost`, the low (lean) and high (whole budget) cost of one run,
made by `rlmnb._eval.runner.estimate_job`; `priced` gives a model its price before litellm loads. A cost is
None when a model has no known price.

While (`--max-cost`): the run's own `max_cost` is checked against money already spent, so the calls in
flight when it is reached can overshoot it. `--max-cost` promises more: the evaluation never passes the
limit. So each model of a run is wrapped in `GuardedLM` (`guard`), which reserves the most a call can cost
in a `Wallet` before sending it (its prompt counted generously, as the larger of tiktoken's count and a
third of its characters, since a provider's tokenizer may count more than ours, plus
`RESERVED_REPLY_TOKENS` of reply) and settles the real cost after. A refused call raises `BudgetExhausted`:
at the root it ends the run as "budget_exhausted"; in a sub-call it is that slot's error, shown to the model.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import BudgetExhausted
from rlmnb._models.base import Completion, Message

__all__ = ["RESERVED_REPLY_TOKENS", "GuardedLM", "JobCost", "PricedModel", "Wallet", "guard", "priced"]


@dataclass(frozen=True)
class JobCost:
    """The low (lean) and high (whole budget) cost of one run in US dollars; None when unpriced."""

    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None


RESERVED_REPLY_TOKENS = 2_000  # the reply a call is assumed to be able to write, for the reservation


class Wallet:
    """Money left for one run, with reservations for calls in flight (thread-safe)."""

    def __init__(self, limit: float) -> None:
        self.limit = float(limit)
        self.spent = 0.0
        self.reserved = 0.0
        self.refused = 0
        self._lock = threading.Lock()

    def reserve(self, amount: float) -> None:
        with self._lock:
            if self.spent + self.reserved + amount > self.limit:
                self.refused += 1
                raise BudgetExhausted(
                    f"The evaluation's --max-cost would be passed: ${self.spent + self.reserved:.4f} of "
                    f"${self.limit:.4f} spent or reserved and this call may cost up to ${amount:.4f}; nothing was "
                    f"sent. Submit the best answer you have.")
            self.reserved += amount

    def settle(self, reserved: float, cost: float) -> None:
        with self._lock:
            self.reserved -= reserved
            self.spent += cost


class GuardedLM:
    """An LM whose calls are reserved in a `Wallet` first; everything else is the inner model's."""

    def __init__(self, inner: Any, wallet: Wallet, price: Any) -> None:
        self.inner = inner
        self.wallet = wallet
        self.price = price
        self.name = inner.name

    def __getattr__(self, attr: str) -> Any:  # context_window, aprepare, check_key, cache_identity...
        return getattr(self.inner, attr)

    def worst_case(self, messages: list[Message]) -> float:
        from rlmnb._ground.tokens import count_messages

        chars = sum(len(str(m.get("content") or "")) for m in messages)
        tokens = max(count_messages(messages, self.name), math.ceil(chars / 3) + 4 * len(messages))
        return float(self.price.cost(tokens, RESERVED_REPLY_TOKENS))

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        amount = self.worst_case(messages)
        self.wallet.reserve(amount)
        cost = amount  # if the call fails midway, assume it was billed: never under-count
        try:
            completion: Completion = await self.inner.acomplete(messages, **params)
            cost = completion.usage.cost_usd if completion.usage.cost_usd is not None else amount
            return completion
        finally:
            self.wallet.settle(amount, cost)

    def __repr__(self) -> str:
        return f"GuardedLM({self.inner!r})"


@dataclass(frozen=True)
class PricedModel:
    """A model name with a price, in the shape `rlmnb._engine.estimate` reads (for estimates before litellm loads)."""

    name: str
    input_cost_per_token: float
    output_cost_per_token: float


def priced(lm: Any) -> Any:
    """`lm` itself, or a PricedModel when it is a LiteLLM given a price that litellm has not registered yet."""
    own = getattr(lm, "_price", None)
    if isinstance(own, tuple) and len(own) == 2 and own[0] is not None:
        return PricedModel(str(lm.name), float(own[0]), float(own[1] or 0.0))
    return lm


def guard(model: Any, wallet: Wallet, *, role: str) -> Any:
    """`model` (a name or LM) resolved and wrapped; ConfigError when it has no known price."""
    from rlmnb._engine.estimate import require_price
    from rlmnb._models.resolve import resolve_model

    lm = resolve_model(model, role=role)
    price = require_price(lm, setting="--max-cost", how=f"register one with --price {lm.name}=IN,OUT")
    return GuardedLM(lm, wallet, price)
