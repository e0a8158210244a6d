"""Policy `whole_copy`: an answer that is most of a text input, copied, goes back once.

Looks at: the submitted answer's text against each text input (`evidence.copied_from`: a verbatim copy of at
least `WHOLE_SHARE` of the input and at least `evidence.COPY_CHARS` characters). May: send it back once a run,
the last turn too (the input is never its own answer); the next submission is taken. A quoted clause, however
long, is a part of its input and passes (issue 44: a 2,000-character clause the question asked for was refused
four times). Why for any model: the input holds the answer; submitting it whole hands the question back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._engine.evidence import copied_from
from rlmnb._engine.policies.base import Policy
from rlmnb._ground.prompts import render

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext

__all__ = ["WholeCopy"]

WHOLE_SHARE = 0.5
"""Share of a text input a copied answer must cover to count as the input itself."""
MAX_COPY_CHECK_CHARS = 50_000_000
"""Text inputs larger than this are not searched (the check reads each text it searches)."""


class WholeCopy(Policy):
    name = "whole_copy"

    def may_send_back(self, ctx: RunContext) -> bool:
        return self.sent_back == 0

    def on_submit(self, ctx: RunContext, answer: Any, code: str) -> str | None:
        if not ctx.config.evidence_check or not self.may_send_back(ctx):
            return None
        texts = ((f.name, value) for f in ctx.extra.get("fields", ())  # lazy: nothing loads for a short answer
                 if f.info.kind in ("text", "text_file") and (f.info.size_chars or 0) <= MAX_COPY_CHECK_CHARS
                 and isinstance(value := f.load(), str))
        found = copied_from(answer, texts, share=WHOLE_SHARE)
        if found is None:
            return None
        return render("reject_copy", field=found[0], chars=f"{found[1]:,}")
