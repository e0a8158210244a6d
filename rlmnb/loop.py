"""The turn loop of one run: ask the root model, run its code, guard submissions, build observations.

It renders nothing and owns no resources: `RunContext` brings the models, sandbox, budget and event
bus; the caller (`api.py`) starts and closes them. Recoverable trouble (bad code, timeouts, rejected
submissions, exhausted sub-call budget) goes back to the model; terminal trouble raises.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from . import observation
from .budget import Budget
from .compaction import summarize_dropped
from .config import RLMConfig
from .conversation import Conversation, TurnRecord
from .errors import BudgetExhausted
from .events import (
    CodeExecuted,
    EventBus,
    Fallback,
    GuardRejected,
    ModelReply,
    RunScope,
    Submitted,
    TurnStarted,
    TurnsTrimmed,
)
from .jsonable import recordable
from .limits import RunLimits, run_limits
from .models import LM, Completion, Message, model_label
from .parsing import final_call
from .prompt_cache import mark_prefix, needs_cache_marks
from .prompts import load, render
from .repeats import Repeats
from .replies import STOP_SEQUENCES, Step, read_step, split_reasoning
from .sandbox.base import ExecResult, Sandbox
from .schema import AnswerSchema
from .subcalls import SubCaller
from .usage import CallUsage


@dataclass
class RunContext:
    """Everything one run's loop needs. Created and torn down by api.py."""

    question: str
    config: RLMConfig
    root_lm: LM
    sub: SubCaller
    sandbox: Sandbox
    budget: Budget
    bus: EventBus
    scope: RunScope
    conversation: Conversation
    schema: AnswerSchema | None = None
    turn: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    limits: RunLimits | None = None  # None: the config's ceilings, fitted to root_lm and sub.lm on first use
    repeats: Repeats = field(default_factory=Repeats)

    def run_limits(self) -> RunLimits:
        if self.limits is None:
            self.limits = run_limits(self.config, self.root_lm, self.sub.lm)
        return self.limits


@dataclass(frozen=True)
class Outcome:
    status: str  # "submitted" | "fallback" | "budget_exhausted"
    answer: Any
    reason: str
    record: TurnRecord | None = None  # the submitting turn (verification may send the run back to it)


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


def first_prompt(question: str, summary_text: str, config: RLMConfig, schema: AnswerSchema | None) -> str:
    extra = []
    if config.max_tokens:
        extra.append(f"{config.max_tokens:,} tokens")
    if config.max_cost:
        extra.append(f"${config.max_cost:g}")
    if config.max_time:
        extra.append(f"{config.max_time:g} s")
    text = render("first_user", question=question.strip(), summary=summary_text,
                  max_iterations=config.max_iterations, max_llm_calls=config.max_llm_calls,
                  extra_limits="".join(", " + e for e in extra))
    if config.sandbox == "kernel" and config.confinement != "off" and (config.allow_paths or config.allow_network):
        reach = [*(f"files under {p}" for p in config.allow_paths), *(f"TCP {n}" for n in config.allow_network)]
        text += render("reach", reach=", ".join(reach))
    if schema is not None:
        text += render("schema", schema=schema.json_schema_text())
    return text


def request_sha(messages: list[Message]) -> str:
    """A short hash of what a request sends (roles and contents); replay matches requests by it."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(str(message.get("role", "")).encode())
        digest.update(b"\x00")
        digest.update(str(message.get("content", "")).encode("utf-8", "surrogatepass"))
        digest.update(b"\x01")
    return digest.hexdigest()[:16]


async def root_call(ctx: RunContext, messages: list[Message], *, purpose: str,
                    retry_empty: bool = False) -> tuple[Completion, Step]:
    """One root request: budget checked first (BudgetExhausted spends nothing), usage settled after.

    The reply is read as one step (`replies.read_step`); a turn's request carries the stop sequences
    where the provider takes them, so generation ends where the model starts writing output itself.
    """
    reservation = ctx.budget.reserve(ctx.scope.run_id, 1, charged=ctx.scope.depth > 0)
    params: dict[str, Any] = {}
    if purpose == "turn" and await _supports_stop(ctx):
        params["stop"] = list(STOP_SEQUENCES)
    started = time.perf_counter()
    try:
        completion = await ctx.root_lm.acomplete(cache_marked(ctx, messages), **params)
    except BaseException:
        ctx.budget.settle(reservation, CallUsage(), root=True)
        raise
    ctx.budget.settle(reservation, completion.usage, root=True)
    finish = completion.finish_reason or completion.meta.get("finish_reason")
    step = read_step(completion.text, finish_reason=finish)
    notes = step.notes + (["empty_retried"] if step.empty and retry_empty else [])
    reasoning = "\n\n".join(r for r in (completion.reasoning, step.reasoning) if r)
    ctx.bus.emit(ModelReply, ctx.scope, turn=ctx.turn, text=completion.text, usage=completion.usage.to_dict(),
                 latency_s=round(time.perf_counter() - started, 6), purpose=purpose,
                 request_sha=request_sha(messages), finish_reason=finish, reasoning=reasoning, notes=notes)
    return completion, step


async def _compact_call(ctx: RunContext, request: list[Message]) -> str:
    completion, _ = await root_call(ctx, request, purpose="compact")
    return completion.text


def cache_marked(ctx: RunContext, messages: list[Message]) -> list[Message]:
    """The request with Anthropic-style cache marks on its stable prefix where the root model needs them."""
    if not needs_cache_marks(model_label(ctx.root_lm)):
        return messages
    return mark_prefix(messages, 1 + len(ctx.conversation.opening))


async def _supports_stop(ctx: RunContext) -> bool:
    """Whether the root model takes stop sequences (asked once per run, off the event loop)."""
    if "supports_stop" not in ctx.extra:
        ctx.extra["supports_stop"] = bool(await asyncio.to_thread(getattr, ctx.root_lm, "supports_stop", False))
    return bool(ctx.extra["supports_stop"])


async def run_turns(ctx: RunContext) -> Outcome:
    """The loop. Returns how the run ended; raises ModelError/SandboxError for terminal trouble."""
    cfg = ctx.config
    limits = ctx.run_limits()
    max_turns = cfg.max_iterations
    while ctx.turn < max_turns:
        ctx.turn += 1
        turn = ctx.turn
        ctx.bus.emit(TurnStarted, ctx.scope, turn=turn, max_turns=max_turns)
        before = ctx.conversation.tokens()
        dropped = ctx.conversation.trim(limits.context_tokens)
        if dropped and cfg.compaction == "summarize" and await summarize_dropped(
                ctx.conversation, dropped, lambda request: _compact_call(ctx, request)):
            dropped += ctx.conversation.trim(limits.context_tokens)  # the summary itself must fit
        if dropped:
            ctx.bus.emit(TurnsTrimmed, ctx.scope, turn=turn, dropped=dropped,
                         tokens_before=before, tokens_after=ctx.conversation.tokens())
        messages = ctx.conversation.messages()
        try:
            completion, step = await root_call(ctx, messages, purpose="turn", retry_empty=True)
            if step.empty:  # asked again once, without costing a turn; the empty reply stays out of the history
                retry = [*messages, {"role": "user", "content": load("empty_retry")}]
                completion, step = await root_call(ctx, retry, purpose="turn")
        except BudgetExhausted as exc:
            return Outcome("budget_exhausted", None, str(exc))
        reply = step.kept or load("empty_kept")
        reply_notes = observation.reply_notes(step, getattr(ctx.root_lm, "max_output_tokens", None))
        if step.code is None:
            ctx.conversation.add_turn(TurnRecord(turn, reply, observation.no_code(turn, max_turns, reply_notes)))
            continue
        calls_before = ctx.budget.run_usage(ctx.scope.run_id).sub_calls
        timeout = limits.snippet_timeout
        left = ctx.budget.time_left()
        if left is not None:
            timeout = max(0.1, min(timeout, left))
        result = await ctx.sandbox.execute(step.code, timeout, turn=turn)
        if ctx.sub.fatal is not None:
            raise ctx.sub.fatal
        notes: list[str] = []
        outcome: Outcome | None = None
        if result.submitted:
            rejection = _guard(ctx, result)
            if rejection is None:
                answer = _validated(ctx, result.answer)
                if isinstance(answer, _Rejected):
                    rejection = ("schema", render("reject_schema", error=answer.message))
                else:
                    recorded = result.answer
                    ctx.bus.emit(Submitted, ctx.scope, turn=turn, answer=recorded)
                    outcome = Outcome("submitted", answer, "submit() was called")
            if rejection is not None:
                guard, message = rejection
                ctx.bus.emit(GuardRejected, ctx.scope, turn=turn, guard=guard, reason=message)
                notes.append("[rejected] " + message)
        rejected = bool(notes)
        repeat_of = ctx.repeats.check(turn, step.code, observation.output_of(result))
        obs = observation.build(result, turn=turn, max_turns=max_turns, max_chars=limits.output_chars,
                                timeout=timeout, extra=reply_notes + notes, nudge=outcome is None,
                                repeat_of=repeat_of if outcome is None else None)
        _emit_code(ctx, turn, step.code, result, obs, repeat_of)
        if outcome is not None:
            return Outcome(outcome.status, outcome.answer, outcome.reason, TurnRecord(turn, reply, obs))
        made_calls = ctx.budget.run_usage(ctx.scope.run_id).sub_calls > calls_before
        ctx.conversation.add_turn(TurnRecord(turn, reply, obs, error=not result.ok or rejected,
                                             findings=made_calls))
    return await fallback(ctx)


class _Rejected:
    def __init__(self, message: str) -> None:
        self.message = message


def _guard(ctx: RunContext, result: ExecResult) -> tuple[str, str] | None:
    """Why a submission must be rejected, or None."""
    if result.submit_during_exception:
        return "exception", render("reject_exception", error_type=result.submit_during_exception)
    if result.submit_error:
        return "jsonable", render("reject_unjsonable", error=result.submit_error)
    if ctx.turn == 1 and not ctx.config.allow_first_turn_submit and not ctx.conversation.turns:
        return "first_turn", load("reject_first_turn")
    return None


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
                 timed_out=result.timed_out, restarted=result.restarted, observation=obs, repeat_of=repeat_of)


async def fallback(ctx: RunContext) -> Outcome:
    """The turns ran out: one last root call for the best answer from the history."""
    messages = ctx.conversation.messages()
    messages.append({"role": "user", "content": render("fallback", max_iterations=ctx.config.max_iterations)})
    try:
        completion, _ = await root_call(ctx, messages, purpose="fallback")
    except BudgetExhausted as exc:
        return Outcome("budget_exhausted", None, f"turns ran out and no budget was left for a final answer: {exc}")
    answer = final_text(split_reasoning(completion.text)[0])
    if ctx.schema is not None:
        with contextlib.suppress(ValueError):  # unvalidated text stays text; status "fallback" says so
            answer = ctx.schema.validate(_maybe_json(answer))
    reason = f"no submit() within {ctx.config.max_iterations} turns"
    ctx.bus.emit(Fallback, ctx.scope, answer=recordable(answer), reason=reason)
    return Outcome("fallback", answer, reason)


def final_text(text: str) -> Any:
    """The answer in a fallback reply: the literal inside FINAL(...) if there is one, else the text."""
    call = final_call(text)
    if call and call.startswith("FINAL("):
        try:
            node = ast.parse(call, mode="eval").body
            if isinstance(node, ast.Call) and len(node.args) == 1:
                return ast.literal_eval(node.args[0])
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



