"""The turn loop of one run: `run_turns(ctx) -> Outcome`, calling `turn.run_turn` until the run ends.

When the turns run out without an accepted submission, `fallback` makes one last root call for the
best answer from the history. Also here: the prompts a run opens with (`system_prompt`,
`first_prompt`). The loop renders nothing and owns no resources: `RunContext` brings the models,
sandbox, budget and event bus; runs.execute_run starts and closes them.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Collection
from typing import Any

from rlmnb._engine.evidence import ECHOED, NOT_HELD, Step, found_before, output_tails, steps_of
from rlmnb._engine.replies import extract_code, final_call, split_reasoning
from rlmnb._engine.turn import Outcome, RunContext, Stall, out_of_budget, root_call, run_turn
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.jsonable import recordable
from rlmnb._ground.prompts import load, render
from rlmnb._ground.tokens import count_tokens
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import Message
from rlmnb.events import Fallback, TurnsTrimmed

__all__ = ["code_only", "fallback", "final_text", "first_prompt", "run_turns", "system_prompt"]


def system_prompt(config: RLMConfig, sub_window: int | None, tools: dict[str, Any], example: str = "data") -> str:
    """The system rules; `example` names the input of the example first step (small models copy it)."""
    tool_lines = ""
    if tools:
        described = []
        for name, fn in tools.items():
            doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
            described.append(f"\n- `{name}(...)`: {doc[0] if doc else 'a tool provided by the user.'}")
        tool_lines = "".join(described)
    reads = (render("sub_window", tokens=f"{sub_window:,}", chars=f"{sub_window * 3:,}") if sub_window
             else load("sub_window_unknown"))
    rules = render("system", sub_reads=reads, example=example, max_llm_calls=config.max_llm_calls,
                   max_iterations=config.max_iterations, tools=tool_lines)
    if config.instructions:
        return config.instructions if config.replace_instructions else rules + "\n\n" + config.instructions
    return rules


def first_prompt(question: str, summary_text: str, config: RLMConfig, schema: AnswerSchema | None,
                 reading: str | None = None) -> str:
    """The question with its InputsSummary, limits and reach; with a first reading (`first_read`), its answers
    after the summary and a first step that checks them."""
    extra = []
    if config.max_tokens:
        extra.append(f"{config.max_tokens:,} tokens")
    if config.max_cost:
        extra.append(f"${config.max_cost:g}")
    if config.max_time:
        extra.append(f"{config.max_time:g} s")
    text = render("first_user", question=question.strip(), summary=summary_text,
                  reading=f"\n{reading}\n" if reading else "",
                  max_iterations=config.max_iterations, max_llm_calls=config.max_llm_calls,
                  extra_limits="".join(", " + e for e in extra),
                  start=load("first_read_start") if reading else "Start by exploring the inputs with code.")
    if config.sandbox == "kernel" and config.confinement != "off" and (config.allow_paths or config.allow_network):
        reach = [*(f"files under {p}" for p in config.allow_paths), *(f"TCP {n}" for n in config.allow_network)]
        text += render("reach", reach=", ".join(reach))
    if schema is not None:
        text += render("schema", schema=schema.json_schema_text())
    return text


async def run_turns(ctx: RunContext) -> Outcome:
    """Run turns until one ends the run, then fall back if the turns ran out.

    Returns:
        How the run ended: "submitted", "fallback" or "budget_exhausted".

    Raises:
        ModelError, SandboxError: terminal trouble.
    """
    while ctx.turn < ctx.config.max_iterations:
        outcome = await run_turn(ctx)
        if isinstance(outcome, Stall):
            return await fallback(ctx, outcome)
        if outcome is not None:
            return outcome
    return await fallback(ctx)


async def fallback(ctx: RunContext, stall: Stall | None = None) -> Outcome:
    """The turns ran out, or stalled (`stall`: the reply repeated an earlier turn after the run's asks for another
    step were used up): one last root call for the best answer from the history.

    The request ends with the end of every distinct output the run's code really printed (bounded), so the
    answer comes from evidence rather than from the model's own prose; the model's replies in it are cut to their
    code, statements of what earlier output held aside (`code_only`), and the reading's answers it marked as none
    are left out (`unmarked`); the conversation is trimmed first to leave room for it.
    """
    limits = ctx.run_limits()
    steps = steps_of(ctx.bus.trajectory, ctx.scope.run_id)
    tails = output_tails(steps, total=max(400, min(4000, limits.output_chars // 2)))
    answered = unmarked(ctx.reading.answers_text) if ctx.reading is not None else ""
    if answered:  # the sub-model's reading is real output too; an answer it marked as none is left out
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
    before = ctx.conversation.tokens()
    dropped = ctx.conversation.trim(limits.context_tokens - count_tokens(prompt, ctx.conversation.model) - 8)
    if dropped:
        ctx.bus.emit(TurnsTrimmed, ctx.scope, turn=ctx.turn, dropped=dropped, tokens_before=before,
                     tokens_after=ctx.conversation.tokens())
    messages = code_only(ctx.conversation.messages(), keep=_findings_stated(ctx, steps))
    messages.append({"role": "user", "content": prompt})
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
    same words were first said: a guess said again after an output that happens to hold it stays a guess.
    Recorded (RULER niah_single_2 at 8K, instance 0, on a562385): "The special magic number ... is 4." at turns 1,
    4, 7 and 8, from the preview; turn 2 printed the text's head, which holds "at least 4 of these 5 mistakes",
    so turns 4, 7 and 8 counted as findings, and the fallback answered "... is 4." though turn 6 had printed
    "is: 7067228", the answer both readings gave."""
    first: dict[str, int] = {}
    for record in ctx.conversation.turns:
        first.setdefault(" ".join(record.reply.split()), record.turn)
    return {r.reply for r in ctx.conversation.turns
            if extract_code(r.reply).code is None
            and found_before(r.reply, first[" ".join(r.reply.split())], steps, question=ctx.question)}


def code_only(messages: list[Message], *, keep: Collection[str] = ()) -> list[Message]:
    """`messages` with each of the model's replies cut to its code, and a reply without code left out unless it is
    in `keep` (the fallback keeps statements of what earlier output held, `evidence.found_before`): what the
    fallback answers from is what the code printed and what the model said about it, not its guesses.

    Recorded (Qwen2.5-Coder 1.5B, RULER, resumed on 604880f-70a5c5a): niah_single_2 at 8K, turn 1 said the number
    "is 4" (the preview's "at least 4 of these 5 mistakes") and turn 4's code printed the needle's 7067228, which the
    first reading had said too; shown its own turn-1 sentence, the fallback answered "... is 4.", and with its prose
    left out, 7067228. cwe at 32K (instance 0): with every reply without code left out, the fallback lost turn 4's
    statement of its count and answered the question's worked example."""
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
    """A reading's answer lines without those it marked as no answer (not in the part's text, the question's own
    words): recorded (RULER cwe at 32K), the fallback, shown the reading's marked worked-example line first,
    answered with it."""
    marks = (f"[{NOT_HELD}]", f"[{ECHOED}]")
    return "\n".join(line for line in answers.splitlines() if not any(m in line for m in marks))


def final_text(text: str) -> Any:
    """The answer in a fallback reply: the literal inside FINAL(...) if there is one, else the text.

    `FINAL(...)` itself (the fallback request's own words, copied back) is not a literal answer: the text is.
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
