"""Policy `same_error`: a note when a line raises the same error it raised at an earlier turn in other code.

Looks at: the failing line and its message (`Repeats.same_error`). May: add a note naming the earlier turn and
the line. Why for any model: a model that rewrites the code around a failing line often keeps the line; saying
which line failed before points at it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._engine.policies.base import Policy
from rlmnb._ground.prompts import render

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._sandbox.base import ExecResult

__all__ = ["SameError"]


class SameError(Policy):
    name = "same_error"

    def on_output(self, ctx: RunContext, result: ExecResult, code: str, *, going_on: bool) -> list[str]:
        if result.ok or result.timed_out:
            return []
        earlier = ctx.repeats.same_error(ctx.turn, code, result.error)
        if earlier is None or ctx.stalled is not None:  # a repeated step has the repeat note instead
            return []
        turn, line = earlier
        self.acted(ctx, "note", f"turn {turn} raised the same error at the same line")
        return ["[note] " + render("same_error", turn=turn, line=line if len(line) <= 160 else line[:157] + "...")]
