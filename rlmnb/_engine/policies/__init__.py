"""The turn loop's policies: each watches one thing and may note, send back once, ask again, answer or end.

Entry points: `policies_for(config, root_window)` (the names a run uses: `RLMConfig.policies`, a profile or a list)
and `Policies` (a run's fresh instances, called by the turn at its points: start, reply, submit, output, turns'
end). One module per policy, each docstring stating what it looks at, what it may do and why that holds for any
model and any data; `base.Policy` is the contract. Decision records: docs/decisions/policies.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._engine.limits import SMALL_WINDOW
from rlmnb._engine.policies.base import Answer, AskAgain, EndTurns, Policy
from rlmnb._engine.policies.empty_reply import EmptyReply
from rlmnb._engine.policies.final_answer import FinalAnswer
from rlmnb._engine.policies.first_read import FirstRead
from rlmnb._engine.policies.guess_note import GuessNote
from rlmnb._engine.policies.look_first import LookFirst
from rlmnb._engine.policies.prose_answer import ProseAnswer
from rlmnb._engine.policies.repeat_breaker import RepeatBreaker
from rlmnb._engine.policies.same_error import SameError
from rlmnb._engine.policies.unshown_value import UnshownValue
from rlmnb._engine.policies.whole_copy import WholeCopy
from rlmnb._ground.config import POLICIES, PROFILES, RLMConfig

if TYPE_CHECKING:
    from rlmnb._engine.context import Outcome, RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message
    from rlmnb._sandbox.base import ExecResult

__all__ = ["Answer", "AskAgain", "EndTurns", "Policies", "Policy", "REGISTRY", "policies_for"]

REGISTRY: dict[str, type[Policy]] = {cls.name: cls for cls in (
    EmptyReply, RepeatBreaker, LookFirst, UnshownValue, WholeCopy, ProseAnswer, SameError, GuessNote, FirstRead,
    FinalAnswer)}
assert tuple(REGISTRY) == POLICIES, "rlmnb._ground.config.POLICIES lists every policy, in order"

SMALL_ROOT_WINDOW = SMALL_WINDOW
"""A root model whose context window is at most this many tokens gets profile "small" under "auto"."""


def policies_for(config: RLMConfig, root_window: int | None) -> tuple[str, ...]:
    """The policy names a run uses, in acting order: the profile or list of `config.policies` ("all": every policy;
    "auto": "small" for a root window of at most `SMALL_ROOT_WINDOW` tokens, else "default"), with
    `first_read="on"/"off"` adding or removing the first reading."""
    chosen = config.policies
    if chosen == "all":
        chosen = POLICIES
    elif chosen == "auto":
        chosen = "small" if root_window is not None and root_window <= SMALL_ROOT_WINDOW else "default"
    names = set(PROFILES[chosen] if isinstance(chosen, str) else chosen)
    if config.first_read == "on":
        names.add("first_read")
    elif config.first_read == "off":
        names.discard("first_read")
    return tuple(n for n in POLICIES if n in names)


class Policies:
    """One run's policies, fresh instances in acting order; each hook asks them in that order."""

    MAX_ASKS_PER_TURN = 8
    """Most times one turn's reply is replaced by asking again, whatever the policies say (a safety bound)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.active = [REGISTRY[name]() for name in POLICIES if name in names]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.active)

    async def on_start(self, ctx: RunContext, fields: Sequence[Any]) -> str | None:
        texts = [t for p in self.active if (t := await p.on_start(ctx, fields))]
        return "\n".join(texts) or None

    async def on_reply(self, ctx: RunContext, step: Step,
                       request: list[Message]) -> AskAgain | Answer | EndTurns | None:
        for policy in self.active:
            action = await policy.on_reply(ctx, step, request)
            if action is not None:
                return action
        return None

    def on_submit(self, ctx: RunContext, answer: Any, code: str) -> str | None:
        """The message sending `answer` back (the first policy that does; recorded as its send-back), or None."""
        for policy in self.active:
            if policy.may_send_back(ctx) and (message := policy.on_submit(ctx, answer, code)) is not None:
                policy.acted(ctx, "send_back", message)
                return message
        return None

    def on_output(self, ctx: RunContext, result: ExecResult, code: str, *, going_on: bool) -> list[str]:
        return [note for p in self.active for note in p.on_output(ctx, result, code, going_on=going_on)]

    async def on_turns_end(self, ctx: RunContext, stall: EndTurns | None) -> Outcome | None:
        for policy in self.active:
            outcome = await policy.on_turns_end(ctx, stall)
            if outcome is not None:
                return outcome
        return None
