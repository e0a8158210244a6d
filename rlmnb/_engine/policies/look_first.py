"""Policy `look_first`: a submit() before the model has seen any output goes back.

Looks at: a submission at turn 1 with no earlier turn and no first reading. May: send it back (every time it
happens, which is only at turn 1). Why for any model: before any output the only things the model has seen are
the question and the InputsSummary, so its answer cannot come from the inputs. Off with
`allow_first_turn_submit=True`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._engine.policies.base import Policy
from rlmnb._ground.prompts import load

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext

__all__ = ["LookFirst"]


class LookFirst(Policy):
    name = "look_first"
    once = False

    def on_submit(self, ctx: RunContext, answer: Any, code: str) -> str | None:
        if (ctx.turn == 1 and not ctx.config.allow_first_turn_submit and not ctx.conversation.turns
                and ctx.reading is None):  # a first reading is output the root has seen
            return load("reject_first_turn")
        return None
