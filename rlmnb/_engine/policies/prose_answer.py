"""Policy `prose_answer`: a reply without code that is only a value real output showed is the run's answer.

Looks at: a reply without code that is a bare short value on one line ("4015985", "`France`.") or ends in a
`\\boxed{...}` value (`evidence.prose_answer`, `evidence.boxed_answer`), and whether an output of the run or a
sub-call reply that read something shows it. May: end the run with that value as the answer ("submitted"). Not on
the first turn before any output, not with an answer schema (which needs submit()), not for a sub-model's guess
(`evidence.guessed_by_sub_call`). Why for any model: a model that has seen the value and says only the value has
answered; asking it to wrap the value in submit() costs a turn and sometimes the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._engine.evidence import boxed_answer, guessed_by_sub_call, prose_answer
from rlmnb._engine.policies.base import Answer, Policy

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message

__all__ = ["ProseAnswer"]


class ProseAnswer(Policy):
    name = "prose_answer"

    async def on_reply(self, ctx: RunContext, step: Step, request: list[Message]) -> Answer | None:
        if step.code is not None or step.empty or ctx.schema is not None:
            return None
        if ctx.turn == 1 and ctx.reading is None and not ctx.conversation.turns:
            return None
        trajectory, run_id = ctx.bus.trajectory, ctx.scope.run_id
        answer = (prose_answer(step.kept, trajectory=trajectory, run_id=run_id)
                  or boxed_answer(step.kept, trajectory=trajectory, run_id=run_id))
        if answer is None or guessed_by_sub_call(answer, trajectory=trajectory, run_id=run_id, question=ctx.question,
                                                 opening=ctx.conversation.given()) is not None:
            return None
        self.acted(ctx, "answer", f"the reply was the value {answer!r}, which output showed")
        return Answer(answer, "answered in prose with a value its outputs showed")
