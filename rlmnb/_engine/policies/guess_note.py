"""Policy `guess_note`: a note when a step's sub-calls were given only the question.

Looks at: the step's sub-call prompts (`evidence.bare_sub_calls`: a prompt that is the question again with
nothing to read and no image). May: add a note saying the sub-model saw no data, so its reply is a guess. Why for
any model: a sub-model sees only its prompt; asked the question alone it answers from memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._engine.evidence import bare_sub_calls
from rlmnb._engine.policies.base import Policy
from rlmnb._ground.prompts import render

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._sandbox.base import ExecResult

__all__ = ["GuessNote"]


class GuessNote(Policy):
    name = "guess_note"

    def on_output(self, ctx: RunContext, result: ExecResult, code: str, *, going_on: bool) -> list[str]:
        count = bare_sub_calls(ctx.bus.trajectory, ctx.scope.run_id, ctx.turn, ctx.question)
        if not count:
            return []
        self.acted(ctx, "note", f"{count} sub-call(s) given only the question")
        return ["[note] " + render("bare_sub_call", calls="call" if count == 1 else f"{count} calls")]
