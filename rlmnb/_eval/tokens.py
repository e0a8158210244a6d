"""Tokens per answer, split: root input, root output and sub-call tokens of one run.

A method that knows its split returns it in `Outcome.tokens`: `rlm` from its trajectory (every sub-call's
usage is recorded; the root's is the rest of the run's usage, fallback and judge calls included),
`dspy_rlm` from its two LMs' histories. Otherwise the split is read from the usage when it is certain:
a run with no sub-calls (`direct`, `rlm_no_sub`) spent everything at the root. A peer that reports
only totals for calls of both kinds (`rlms`) has no split (None, shown as "-").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.usage import Usage

__all__ = ["TokenSplit", "split_from_trajectory"]


@dataclass(frozen=True)
class TokenSplit:
    root_input: int
    root_output: int
    sub: int

    @classmethod
    def from_usage(cls, usage: Usage) -> TokenSplit | None:
        """Everything at the root when there was no sub-call; None when the usage mixes both kinds."""
        if usage.sub_calls:
            return None
        return cls(usage.input_tokens, usage.output_tokens, 0)

    @classmethod
    def from_sub_usages(cls, usage: Usage, subs: Iterable[dict[str, Any]]) -> TokenSplit:
        """The root's share is the run's usage less the sub-calls' (each a usage dict with input/output_tokens)."""
        sub_in = sub_out = 0
        for item in subs:
            sub_in += int(item.get("input_tokens") or item.get("prompt_tokens") or 0)
            sub_out += int(item.get("output_tokens") or item.get("completion_tokens") or 0)
        return cls(max(0, usage.input_tokens - sub_in), max(0, usage.output_tokens - sub_out), sub_in + sub_out)


def split_from_trajectory(usage: Usage, trajectory: Any) -> TokenSplit:
    """The split of an rlmnb run: its SubCallFinished events' usage is the sub-calls' share."""
    from rlmnb.events import SubCallFinished

    return TokenSplit.from_sub_usages(usage, (e.usage for e in trajectory.of(SubCallFinished)))
