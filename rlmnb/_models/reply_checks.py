"""Is a sub-model's reply an answer? Providers say "no answer" in ways that look like an empty string.

An HTTP 200 with no choices, a choice with null or empty content, or `finish_reason="content_filter"`
is not the sub-model answering "": passed on as "" the root model could not tell the difference. A
sub-call asks again once where that can help (no choices, no content: often transient), and
otherwise fails as an "[error] EmptyAnswer: ..." slot that says why (a content filter blocks the same
prompt again; a reasoning model that spent all of max_tokens thinking does the same again).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion


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


def added(first: CallUsage, second: CallUsage) -> CallUsage:
    """The usage of two requests made for one sub-call."""
    cost = None if first.cost_usd is None or second.cost_usd is None else first.cost_usd + second.cost_usd
    return CallUsage(first.input_tokens + second.input_tokens, first.output_tokens + second.output_tokens, cost,
                     cached=first.cached and second.cached)
