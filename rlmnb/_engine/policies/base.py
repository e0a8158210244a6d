"""What a turn-loop policy is: `Policy`, the actions it may take, and `Policies`, the set one run uses.

A policy watches one thing and may act at one of the turn's points, through one hook each:
- `on_start(ctx, fields)`: before the first turn: evidence for the opening message (text added after the summary);
- `on_reply(ctx, step, request)`: a root reply before anything runs: ask again (`AskAgain`), take it as the run's
  answer (`Answer`) or end the turns (`EndTurns`);
- `on_submit(ctx, answer, code)`: a submitted answer that passed the answer contract: the message sending it back
  (at most once a run per policy, never on the last turn, unless the policy says otherwise);
- `on_output(ctx, result, code, ...)`: notes added to the turn's observation;
- `on_turns_end(ctx, stall)`: the turns ran out or stalled: the run's outcome.
Each keeps its own state on itself (a run gets fresh instances) and every action is recorded as a `PolicyActed`
event, so the trajectory and the views say which policy acted. Why objects: one contract per rule, switchable by
name (`RLMConfig.policies`), ablated one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rlmnb.events import GuardRejected, PolicyActed

if TYPE_CHECKING:
    from rlmnb._engine.context import Outcome, RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message
    from rlmnb._sandbox.base import ExecResult

__all__ = ["Answer", "AskAgain", "EndTurns", "Policy"]


@dataclass(frozen=True)
class AskAgain:
    """Do not use the reply: send `request` instead (a one-off request: no prompt-cache marks), with `sampling`."""

    request: list[Message]
    detail: str
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """The reply (without code) is the run's answer."""

    value: Any
    reason: str


@dataclass(frozen=True)
class EndTurns:
    """The turns end here (the reply repeated turn `earlier` after the asks were used up); the final answer follows."""

    turn: int
    earlier: int


class Policy:
    """One rule of the turn loop (see the module docs). Subclasses set `name` and override the hooks they use."""

    name: ClassVar[str] = ""
    once: ClassVar[bool] = True
    """A send-back at most once a run and never on the last turn (the next submission is taken)."""

    def __init__(self) -> None:
        self.sent_back = 0

    async def on_start(self, ctx: RunContext, fields: Sequence[Any]) -> str | None:
        return None

    async def on_reply(self, ctx: RunContext, step: Step, request: list[Message]) -> AskAgain | Answer | EndTurns | None:
        return None

    def on_submit(self, ctx: RunContext, answer: Any, code: str) -> str | None:
        return None

    def on_output(self, ctx: RunContext, result: ExecResult, code: str, *, going_on: bool) -> list[str]:
        return []

    async def on_turns_end(self, ctx: RunContext, stall: EndTurns | None) -> Outcome | None:
        return None

    def may_send_back(self, ctx: RunContext) -> bool:
        """Whether this policy may still send an answer back in this run."""
        return not self.once or (self.sent_back == 0 and ctx.turn < ctx.config.max_iterations)

    def acted(self, ctx: RunContext, action: str, detail: str = "") -> None:
        """Record that this policy acted (a `PolicyActed` event; a send-back is also a `GuardRejected`)."""
        ctx.acted += 1
        ctx.bus.emit(PolicyActed, ctx.scope, turn=ctx.turn, policy=self.name, action=action, detail=detail)
        if action == "send_back":
            self.sent_back += 1
            ctx.bus.emit(GuardRejected, ctx.scope, turn=ctx.turn, guard=self.name, reason=detail)
