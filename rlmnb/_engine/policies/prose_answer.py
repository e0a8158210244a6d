"""Policy `prose_answer`: a reply without code that answers with values real output showed is the run's answer.

Looks at: a reply without code that is a bare short value on one line ("4015985", "`France`."), ends in a
`\\boxed{...}` value, or is a short statement of numbers or ids that says nothing of going on ("Billing has 64
tickets."; not "it says 12, I will count them with code next") (`evidence.prose_answer`, `boxed_answer`,
`stated_answer`), and whether outputs of the run or sub-call replies that read something show every value.
May: end the run with that answer ("submitted"). Not on the first turn before any output, not with an answer
schema (which needs submit()), not for a sub-model's guess (`evidence.guessed_by_sub_call`). Why for any model: a
model that has seen the value and says it, and nothing more to do, has answered; asking it to wrap the value in
submit() costs a turn and, for a small model, often the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmnb._engine.evidence import NOT_HELD, boxed_answer, guessed_by_sub_call, prose_answer, stated_answer
from rlmnb._engine.policies.base import Answer, Policy

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._engine.replies import Step
    from rlmnb._models.base import Message

__all__ = ["ProseAnswer"]


class ProseAnswer(Policy):
    name = "prose_answer"

    def __init__(self) -> None:
        super().__init__()
        self.first_said: dict[str, int] = {}  # each statement (whitespace folded), the turn it was first said

    async def on_reply(self, ctx: RunContext, step: Step, request: list[Message]) -> Answer | None:
        if step.code is not None or step.empty:
            return None
        self.first_said.setdefault(" ".join(step.kept.split()), ctx.turn)
        if ctx.schema is not None:
            return None
        if ctx.turn == 1 and ctx.reading is None and not ctx.conversation.turns:
            return None
        trajectory, run_id = ctx.bus.trajectory, ctx.scope.run_id
        answer = (prose_answer(step.kept, trajectory=trajectory, run_id=run_id)
                  or boxed_answer(step.kept, trajectory=trajectory, run_id=run_id)
                  or self._stated(ctx, step.kept))
        if answer is None or guessed_by_sub_call(answer, trajectory=trajectory, run_id=run_id, question=ctx.question,
                                                 opening=ctx.conversation.given()) is not None:
            return None
        self.acted(ctx, "answer", f"the reply was the value {answer!r}, which output showed")
        return Answer(answer, "answered in prose with a value its outputs showed")

    def _stated(self, ctx: RunContext, prose: str) -> str | None:
        first = self.first_said[" ".join(prose.split())]
        unheld = [line for line in (ctx.reading.answers_text.splitlines() if ctx.reading is not None else ())
                  if f"[{NOT_HELD}]" in line]
        return stated_answer(prose, trajectory=ctx.bus.trajectory, run_id=ctx.scope.run_id, question=ctx.question,
                             before=first if first < ctx.turn else None, unheld=unheld)
