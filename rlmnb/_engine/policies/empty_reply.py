"""Policy `empty_reply`: an empty root reply, or one that only copies the request back, is asked again once a turn.

Looks at: the reply as read (`Step.empty`, `Step.echoed`). May: ask again, once per turn, without spending a turn;
the empty reply stays out of the history. Why for any model: a reply with nothing in it carries no step, and
providers return empty replies now and then (filters, cut streams); a second ask usually gets one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._engine.policies.base import AskAgain, Policy
from rlmnb._ground.prompts import load

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message

__all__ = ["EmptyReply"]


class EmptyReply(Policy):
    name = "empty_reply"

    def __init__(self) -> None:
        super().__init__()
        self.asked_at = 0

    async def on_reply(self, ctx: RunContext, step: Step, request: list[Message]) -> AskAgain | None:
        if not step.empty or self.asked_at == ctx.turn:
            return None
        self.asked_at = ctx.turn
        ask = load("echo_retry" if step.echoed else "empty_retry")
        self.acted(ctx, "ask_again", "the reply only copied the request" if step.echoed else "the reply was empty")
        return AskAgain([*request, {"role": "user", "content": ask}], ask)
