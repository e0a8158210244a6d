"""One turn of a run: `run_turn(ctx) -> Outcome | EndTurns | None` (None: the run goes on to the next turn).

A turn is: ask (the root call, budget checked first; the policies may replace the reply by asking again, take a
reply without code as the answer, or end the turns), read the step (`replies.read_step`), execute its code in the
sandbox, check a submission (the answer contract: no submit while an exception is handled, JSON-able, the
schema; then the policies' send-backs), and observe (the output and the policies' notes go into the
conversation). Every rule beyond that loop is a policy (rlmnb/_engine/policies), named in the trajectory when it
acts. Recoverable trouble (bad code, timeouts, rejected submissions, exhausted sub-call budget) goes back to the
model; terminal trouble raises. Also here: the records a run's turns share, `RunContext` (the live run) and
`Outcome` (how a run ended).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlmnb._engine.compaction import summarize_dropped
from rlmnb._engine.context import Outcome, RunContext, root_call
from rlmnb._engine.conversation import TurnRecord, build, no_code, output_of, reply_notes
from rlmnb._engine.policies import Answer, AskAgain, EndTurns, Policies
from rlmnb._engine.replies import EMPTY_KEPT, Step
from rlmnb._ground.errors import BudgetExhausted, PromptTooLarge
from rlmnb._ground.prompts import render
from rlmnb._models.base import Message
from rlmnb._sandbox.base import ExecResult
from rlmnb.events import CodeExecuted, GuardRejected, Submitted, TurnStarted

__all__ = ["run_turn"]


async def run_turn(ctx: RunContext) -> Outcome | EndTurns | None:
    """Run turn `ctx.turn + 1`: ask, read the step, execute, check, observe.

    Returns:
        The Outcome when the run ended in this turn (an accepted submission, a reply a policy took as the answer,
        or the budget ran out before the root call); EndTurns when a policy ended the turns (the final answer
        follows); else None with the turn added to the conversation.

    Raises:
        ModelError, SandboxError: terminal trouble (a sub-call's terminal error is raised after the snippet).
    """
    ctx.turn += 1
    ctx.stalled = None
    ctx.bus.emit(TurnStarted, ctx.scope, turn=ctx.turn, max_turns=ctx.config.max_iterations)
    try:
        step = await _ask_fitting(ctx)
    except BudgetExhausted as exc:
        return Outcome("budget_exhausted", None, str(exc))
    if isinstance(step, EndTurns):
        return step
    if isinstance(step, Outcome):
        return step
    if step.code is None:
        _without_code(ctx, step)
        return None
    result = await _execute(ctx, step.code)
    outcome, rejected = _check(ctx, result, step.code)
    return _observe(ctx, step, result, outcome, rejected)


async def _compact_call(ctx: RunContext, request: list[Message]) -> str:
    completion, _ = await root_call(ctx, request, purpose="compact")
    return completion.text


ROOT_REFITS = 2
"""Times a turn's request is cut to a smaller share of the root's window after the model refused it as too large."""
REFIT_MARGIN = 0.9
"""The share of what the server said fits that a refit aims at: our count of the cut request is still an estimate."""


async def _ask_fitting(ctx: RunContext) -> Step | Outcome | EndTurns:
    """`_ask` over the turn's request; when the root model refuses it as larger than its window (its tokenizer counts
    more than ours: number-heavy outputs; or its window is smaller than we were told), the conversation is cut and
    asked again, `ROOT_REFITS` times, before the refusal ends the run: to what the server said fits, scaled by its
    count of the refused request over ours, where it said both (`PromptTooLarge.stated`), else to half of what was
    refused. A smaller request is a cheaper end than losing the turns already paid for."""
    for _ in range(ROOT_REFITS):
        try:
            return await _ask(ctx, await _request(ctx))
        except PromptTooLarge as exc:
            limits = ctx.run_limits()
            sent = min(limits.context_tokens, ctx.conversation.tokens())
            fits = sent // 2
            if exc.stated is not None:
                allowed, counted = exc.stated
                fits = min(fits * 3 // 2, int(sent * allowed / counted * REFIT_MARGIN))
            ctx.limits = dataclasses.replace(limits, context_tokens=max(1, fits))
    return await _ask(ctx, await _request(ctx))  # the last refusal ends the run


async def _request(ctx: RunContext) -> list[Message]:
    """The turn's request: the conversation, its middle turns dropped (or summarized) to fit the root's window."""
    summarize = None
    if ctx.config.compaction == "summarize":
        async def summarize(dropped: list[int]) -> bool:
            return await summarize_dropped(ctx.conversation, dropped, lambda request: _compact_call(ctx, request))
    await ctx.fit_conversation(ctx.run_limits().context_tokens, summarize)
    return ctx.conversation.messages()


async def _ask(ctx: RunContext, messages: list[Message]) -> Step | Outcome | EndTurns:
    """The root's step for this turn, after the policies had their say on each reply (`Policies.on_reply`)."""
    _, step = await root_call(ctx, messages, purpose="turn")
    for _ in range(Policies.MAX_ASKS_PER_TURN):
        action = await ctx.policies.on_reply(ctx, step, messages)
        if action is None:
            return step
        if isinstance(action, EndTurns):
            return action
        if isinstance(action, Answer):
            ctx.bus.emit(Submitted, ctx.scope, turn=ctx.turn, answer=action.value)
            return Outcome("submitted", action.value, action.reason, TurnRecord(ctx.turn, step.kept or EMPTY_KEPT, ""))
        assert isinstance(action, AskAgain)
        _, step = await root_call(ctx, action.request, purpose="turn", cache_marks=False, **action.sampling)
    return step


def _without_code(ctx: RunContext, step: Step) -> None:
    """A reply with nothing to run: its prose and a note saying so go into the conversation."""
    reply = step.kept or EMPTY_KEPT
    notes = reply_notes(step, getattr(ctx.root_lm, "max_output_tokens", None))
    if not step.empty:
        ctx.repeats.said(ctx.turn, step.kept)
    ctx.conversation.add_turn(TurnRecord(ctx.turn, reply, no_code(ctx.turn, ctx.config.max_iterations, notes)))


async def _execute(ctx: RunContext, code: str) -> ExecResult:
    """Run the step in the sandbox, within the snippet timeout and the time the budget has left."""
    timeout = ctx.run_limits().snippet_timeout
    left = ctx.budget.time_left()
    if left is not None:
        timeout = max(0.1, min(timeout, left))
    ctx.extra["timeout"] = timeout
    ctx.extra["sub_calls_before"] = ctx.budget.run_usage(ctx.scope.run_id).sub_calls
    result = await ctx.sandbox.execute(code, timeout, turn=ctx.turn)
    if ctx.sub.fatal is not None:
        raise ctx.sub.fatal
    return result


def _check(ctx: RunContext, result: ExecResult, code: str) -> tuple[Outcome | None, str | None]:
    """A submission checked: the answer contract first (`_contract`), then the policies' send-backs. Returns the
    accepted Outcome (or None) and the rejection's message (or None)."""
    if not result.submitted:
        return None, None
    message = _contract(ctx, result)
    answer = result.answer
    if message is None:
        answer = _validated(ctx, result.answer)
        if isinstance(answer, _Rejected):
            message = render("reject_schema", error=answer.message)
            ctx.bus.emit(GuardRejected, ctx.scope, turn=ctx.turn, guard="schema", reason=message)
        else:
            message = ctx.policies.on_submit(ctx, result.answer, code)
    if message is not None:
        return None, message
    ctx.bus.emit(Submitted, ctx.scope, turn=ctx.turn, answer=result.answer)
    return Outcome("submitted", answer, "submit() was called"), None


def _observe(ctx: RunContext, step: Step, result: ExecResult, outcome: Outcome | None,
             rejected: str | None) -> Outcome | None:
    """The turn's observation (output, then the reply's and the policies' notes) recorded and, unless the run
    ended, added to the conversation."""
    turn, limits = ctx.turn, ctx.run_limits()
    shown = output_of(result)
    clean = result.ok and "[error]" not in shown and not result.submitted  # a rejected submit may be sent again
    repeat_of = ctx.repeats.check(turn, step.code or "", shown, clean=clean, submitted=result.submitted)
    ctx.stalled = repeat_of if outcome is None else None
    notes = reply_notes(step, getattr(ctx.root_lm, "max_output_tokens", None))
    if rejected is not None:
        notes.append("[rejected] " + rejected)
    notes += ctx.policies.on_output(ctx, result, step.code or "", going_on=outcome is None and rejected is None)
    obs = build(result, turn=turn, max_turns=ctx.config.max_iterations, max_chars=limits.output_chars,
                timeout=ctx.extra.get("timeout", limits.snippet_timeout), extra=notes, nudge=outcome is None)
    _emit_code(ctx, turn, step.code or "", result, obs, repeat_of)
    reply = step.kept or EMPTY_KEPT
    if outcome is not None:
        return Outcome(outcome.status, outcome.answer, outcome.reason, TurnRecord(turn, reply, obs))
    made_calls = ctx.budget.run_usage(ctx.scope.run_id).sub_calls > ctx.extra.get("sub_calls_before", 0)
    ctx.conversation.add_turn(TurnRecord(turn, reply, obs, error=not result.ok or rejected is not None,
                                         findings=made_calls, repeat=ctx.stalled is not None))
    return None


class _Rejected:
    def __init__(self, message: str) -> None:
        self.message = message


def _contract(ctx: RunContext, result: ExecResult) -> str | None:
    """Why a submission breaks the answer contract (submitted while an exception was being handled, or not
    JSON-able), or None; recorded as a GuardRejected. Always on: these are the contract of submit(), not policies."""
    if result.submit_during_exception:
        guard, message = "exception", render("reject_exception", error_type=result.submit_during_exception)
    elif result.submit_error:
        guard, message = "jsonable", render("reject_unjsonable", error=result.submit_error)
    else:
        return None
    ctx.bus.emit(GuardRejected, ctx.scope, turn=ctx.turn, guard=guard, reason=message)
    return message


def _validated(ctx: RunContext, answer: Any) -> Any:
    if ctx.schema is None:
        return answer
    try:
        return ctx.schema.validate(answer)
    except ValueError as exc:
        return _Rejected(str(exc))


def _emit_code(ctx: RunContext, turn: int, code: str, result: ExecResult, obs: str, repeat_of: int | None) -> None:
    ctx.bus.emit(CodeExecuted, ctx.scope, turn=turn, code=code, stdout=result.stdout, stderr=result.stderr,
                 error=result.error, error_type=result.error_type, duration_s=round(result.duration_s, 6),
                 timed_out=result.timed_out, restarted=result.restarted, observation=obs, repeat_of=repeat_of,
                 tables=result.tables)
