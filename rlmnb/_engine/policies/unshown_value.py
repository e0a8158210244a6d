"""Policy `unshown_value`: a submitted number or id that the model typed and nothing showed goes back once.

Looks at: a short submitted answer's numbers and ids (`evidence.value_claims`: "64", "2022", "T-0193"; words,
yes/no, labels and empty results claim none), whether the code wrote it as a literal (`evidence.typed_at`), and
what the run showed: outputs, sub-call replies that read something, the question, the InputsSummary. Also an
answer that came from a sub-call given only the question (`evidence.guessed_by_sub_call`): the sub-model saw no
data. May: send the answer back once a run, never on the last turn; the next submission is taken whatever it is.
Why for any model: a value nothing showed was made up or remembered, not found; one send-back costs one turn, and
a model that really knows it submits it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._engine.evidence import guessed_by_sub_call, unevidenced
from rlmnb._engine.policies.base import Policy
from rlmnb._ground.prompts import render
from rlmnb._ground.text import clip

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext

__all__ = ["UnshownValue"]


class UnshownValue(Policy):
    name = "unshown_value"

    def on_submit(self, ctx: RunContext, answer: Any, code: str) -> str | None:
        if not ctx.config.evidence_check or not self.may_send_back(ctx):
            return None
        trajectory, run_id, opening = ctx.bus.trajectory, ctx.scope.run_id, ctx.conversation.given()
        guessed = guessed_by_sub_call(answer, trajectory=trajectory, run_id=run_id, question=ctx.question,
                                      opening=opening)
        if guessed is not None:
            return render("reject_guessed", value=clip(repr(answer), 200), turn=guessed)
        found = unevidenced(answer, turn=ctx.turn, trajectory=trajectory, run_id=run_id, code=code, opening=opening)
        if found is None:
            return None
        return render("reject_evidence", value=repr(found.value), turn=found.typed_turn)
