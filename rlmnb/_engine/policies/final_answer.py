"""Policy `final_answer`: when the turns run out (or stall), one last root call answers from what the code printed.

Looks at: the run's outputs (the end of each distinct output, bounded), the model's replies cut to their code
(`code_only`; statements of what earlier output held kept), and a first reading's answers the reading did not mark
as not held. May: end the run with status "fallback" and that call's answer (the literal in `FINAL(...)` if the
reply has one, else its text; validated against an answer schema where there is one). Without this policy a run
whose turns ran out ends "budget_exhausted" with no answer. Why for any model: the RLM paper's loop ends the same
way (a last call for the answer from the history); the outputs are paid-for evidence.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from rlmnb._engine.context import Outcome, out_of_budget, root_call
from rlmnb._engine.evidence import NOT_HELD, Step, found_before, output_tails, steps_of
from rlmnb._engine.policies.base import EndTurns, Policy
from rlmnb._engine.replies import extract_code, final_call, split_reasoning
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.jsonable import recordable
from rlmnb._ground.prompts import render
from rlmnb._ground.tokens import count_tokens
from rlmnb.events import Fallback

if TYPE_CHECKING:
    from rlmnb._engine.context import RunContext
    from rlmnb._models.base import Message

__all__ = ["FinalAnswer", "code_only", "final_text", "unmarked"]


class FinalAnswer(Policy):
    name = "final_answer"

    async def on_turns_end(self, ctx: RunContext, stall: EndTurns | None) -> Outcome:


        limits = ctx.run_limits()
        steps = steps_of(ctx.bus.trajectory, ctx.scope.run_id)
        tails = output_tails(steps, total=max(400, min(4000, limits.output_chars // 2)))
        answered = unmarked(ctx.reading.answers_text) if ctx.reading is not None else ""
        if answered:  # the sub-model's reading is real output too; an answer it marked as not held is left out
            tails.insert(0, f"The first reading answered:\n{answered}")
        printed = render("fallback_outputs", outputs="\n\n".join(tails)) if tails else ""
        if stall is None:
            why = render("fallback_turns", max_iterations=ctx.config.max_iterations)
            reason = f"no submit() within {ctx.config.max_iterations} turns"
        else:
            why = render("fallback_stalled", earlier=stall.earlier)
            asks = ctx.config.repeat_asks
            times = "once" if asks == 1 else f"{asks} times"
            after = "(repeat_asks=0)" if asks == 0 else f"after the model was asked for another step {times}"
            reason = f"no submit(): the reply at turn {stall.turn} repeated turn {stall.earlier}'s {after}"
        prompt = render("fallback", why=why, printed=printed)
        await ctx.fit_conversation(limits.context_tokens - count_tokens(prompt, ctx.conversation.model) - 8)
        messages = code_only(ctx.conversation.messages(), keep=_findings_stated(ctx, steps))
        messages.append({"role": "user", "content": prompt})
        self.acted(ctx, "end_turns", reason)
        try:
            completion, _ = await root_call(ctx, messages, purpose="fallback")
        except BudgetExhausted as exc:
            return out_of_budget(ctx, exc, f"turns ran out and no budget was left for a final answer: {exc}")
        answer = final_text(split_reasoning(completion.text)[0])
        if ctx.schema is not None:
            with contextlib.suppress(ValueError):  # unvalidated text stays text; status "fallback" says so
                answer = ctx.schema.validate(_maybe_json(answer))
        ctx.bus.emit(Fallback, ctx.scope, answer=recordable(answer), reason=reason)
        return Outcome("fallback", answer, reason)


def _findings_stated(ctx: RunContext, steps: list[Step]) -> set[str]:
    """The replies without code that state what earlier output held (`evidence.found_before`), judged at the turn the
    same words were first said: a guess said again after an output that happens to hold it stays a guess."""
    first: dict[str, int] = {}
    for record in ctx.conversation.turns:
        first.setdefault(" ".join(record.reply.split()), record.turn)
    return {r.reply for r in ctx.conversation.turns
            if extract_code(r.reply).code is None
            and found_before(r.reply, first[" ".join(r.reply.split())], steps, question=ctx.question)}


def code_only(messages: list[Message], *, keep: Collection[str] = ()) -> list[Message]:
    """`messages` with each of the model's replies cut to its code, and a reply without code left out unless it is
    in `keep`: what the final answer comes from is what the code printed and what the model said about it, not its
    guesses."""
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content not in keep:
            code = extract_code(content).code
            if code is None:
                continue
            message = {**message, "content": f"```python\n{code}\n```"}
        out.append(message)
    return out


def unmarked(answers: str) -> str:
    """A reading's answer lines without those it marked as not held by the text they were read from."""
    return "\n".join(line for line in answers.splitlines() if f"[{NOT_HELD}]" not in line)


def final_text(text: str) -> Any:
    """The answer in a final-answer reply: the literal inside FINAL(...) if there is one, else the text.

    `FINAL(...)` itself (the request's own words, copied back) is not a literal answer: the text is.
    """
    call = final_call(text)
    if call and call.startswith("FINAL("):
        try:
            node = ast.parse(call, mode="eval").body
            if isinstance(node, ast.Call) and len(node.args) == 1:
                value = ast.literal_eval(node.args[0])
                if value is not Ellipsis:
                    return value
        except (ValueError, SyntaxError):
            pass
    return text.strip()


def _maybe_json(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text
