"""Usage records: one model call, and the bill of a whole run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["CallUsage", "Usage", "cost_text"]


def cost_text(cost: float | None, unpriced: int = 0, models: Sequence[str] = ()) -> str:
    """A cost as every front end says it: "$0.0123"; calls without a price are counted apart and never shown as
    $0.0000 ("cost unknown: 4 calls to models with no price", "$0.0123 + unpriced: 1 call to a model with no
    price"). `models` names the models whose calls had no price, so the text says which one needs a price."""
    if not unpriced:
        return "$?" if cost is None else f"${cost:.4f}"
    calls = f"{unpriced:,} call{'' if unpriced == 1 else 's'}"
    who = ", ".join(models) if models else "a model" if unpriced == 1 else "models"
    missing = f"{calls} to {who} with no price"
    return f"cost unknown: {missing}" if not cost else f"${cost:.4f} + unpriced: {missing}"


@dataclass(frozen=True)
class CallUsage:
    """What one model request cost. `cost_usd` is None when the model has no known price.

    `cached` marks a reply from rlmnb's response cache (nothing was sent); `cached_input_tokens`
    counts the part of `input_tokens` the provider read from its prompt cache (billed at its
    cached rate, already in `cost_usd`); `saved_usd` is what those tokens would have cost more at the
    full input rate (0.0 when nothing was cached or the rates are unknown).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    cached: bool = False
    cached_input_tokens: int = 0
    saved_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:  # explicit: this runs twice per sub-call
        out: dict[str, Any] = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                               "cost_usd": self.cost_usd, "cached": self.cached}
        if self.cached_input_tokens:
            out["cached_input_tokens"] = self.cached_input_tokens
        if self.saved_usd:
            out["saved_usd"] = self.saved_usd
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallUsage:
        return cls(**{k: data[k] for k in ("input_tokens", "output_tokens", "cost_usd", "cached",
                                           "cached_input_tokens", "saved_usd") if k in data})

    def __add__(self, other: CallUsage) -> CallUsage:
        """The usage of two requests made for one call: unpriced if either is, cached only if both are."""
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return CallUsage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens, cost,
                         cached=self.cached and other.cached,
                         cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens)


@dataclass(frozen=True)
class Usage:
    """The bill of a run (and its descendants). `root_calls + sub_calls` is every model request made.

    `cost_usd` sums the priced calls; `unpriced_calls` counts calls whose price is unknown, so an
    unknown cost is never shown as zero. `cached_input_tokens` and `saved_usd` sum the provider's
    prompt-cache reads and what they saved (CallUsage).
    """

    root_calls: int = 0
    sub_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    cached_calls: int = 0
    wall_s: float = 0.0
    cached_input_tokens: int = 0
    saved_usd: float = 0.0

    @property
    def calls(self) -> int:
        return self.root_calls + self.sub_calls

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add_call(self, usage: CallUsage, *, root: bool) -> Usage:
        return Usage(
            root_calls=self.root_calls + (1 if root else 0),
            sub_calls=self.sub_calls + (0 if root else 1),
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            cost_usd=self.cost_usd + (usage.cost_usd or 0.0),
            unpriced_calls=self.unpriced_calls + (1 if usage.cost_usd is None else 0),
            cached_calls=self.cached_calls + (1 if usage.cached else 0),
            wall_s=self.wall_s,
            cached_input_tokens=self.cached_input_tokens + usage.cached_input_tokens,
            saved_usd=self.saved_usd + usage.saved_usd,
        )

    def with_wall(self, wall_s: float) -> Usage:
        return replace(self, wall_s=wall_s)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            root_calls=self.root_calls + other.root_calls, sub_calls=self.sub_calls + other.sub_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens, cost_usd=self.cost_usd + other.cost_usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            cached_calls=self.cached_calls + other.cached_calls, wall_s=self.wall_s + other.wall_s,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            saved_usd=self.saved_usd + other.saved_usd)

    def cost_text(self) -> str:
        """The bill's cost as the views say it (`cost_text`)."""
        return cost_text(self.cost_usd, self.unpriced_calls)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def __repr__(self) -> str:
        cache = (f", cached_input_tokens={self.cached_input_tokens}, saved=${self.saved_usd:.4f}"
                 if self.cached_input_tokens else "")  # only where a prompt cache was read
        return (f"Usage(root_calls={self.root_calls}, sub_calls={self.sub_calls}, "
                f"input_tokens={self.input_tokens}, output_tokens={self.output_tokens}{cache}, "
                f"cost={self.cost_text()})")
