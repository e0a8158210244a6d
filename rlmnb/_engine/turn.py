"""One turn of a run: `run_turn(ctx) -> Outcome | Stall | None` (None: the run goes on to the next turn).

A turn is: the root call (budget checked first), the reply read as one step (`replies.read_step`; an empty
reply or one that only copies the request is asked again once; one whose code an earlier turn already ran cleanly
or failed with twice the same way is not run, and asked again up to `repeat_asks` times a run, after which the
next such reply ends the turns with a `Stall`; short prose stating a shown value, said again as the model's next
statement, is the answer), its code executed in the sandbox, a submission guarded (exception, JSON-ability,
first turn, schema, evidence: a short value the model typed that nothing it saw held goes back once,
`evidence.unevidenced`; marked, copy, partial: see the guards below), and the
observation added to the conversation (a repeated step's with the stall note, pointing at the latest different
output; a step that worked on a typed copy of the preview with a note saying so). Recoverable trouble (bad
code, timeouts, rejected submissions, exhausted sub-call budget) goes back to the model; terminal trouble
raises. Also here: the records a run's turns share, `RunContext` (the live run) and `Outcome` (how a run
ended).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmnb._engine.budget import Budget
from rlmnb._engine.cache import request_sha
from rlmnb._engine.compaction import summarize_dropped
from rlmnb._engine.conversation import Conversation, TurnRecord, build, no_code, output_of, reply_notes
from rlmnb._engine.evidence import (
    ECHOED,
    NOT_HELD,
    RESTATE_CHARS,
    Reading,
    answer_strings,
    bare_sub_calls,
    boxed_answer,
    copied_from,
    guessed_by_sub_call,
    held_by,
    last_lines,
    latest_other,
    partly_holds,
    prints_own_text,
    prints_positions,
    prose_answer,
    restated,
    same_words,
    says_nothing,
    states_shown_value,
    steps_of,
    typed_data,
    unevidenced,
)
from rlmnb._engine.limits import RunLimits, run_limits
from rlmnb._engine.prompt_cache import mark_prefix, needs_cache_marks
from rlmnb._engine.replies import (
    EMPTY_KEPT,
    STOP_SEQUENCES,
    Repeats,
    Step,
    echoes,
    read_step,
    without_code,
    without_copied_head,
)
from rlmnb._engine.subcalls import SubCaller
from rlmnb._ground.blocking import run_coroutine_blocking
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.jsonable import recordable
from rlmnb._ground.prompts import load, render
from rlmnb._ground.text import clip
from rlmnb._ground.usage import CallUsage
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM, Completion, Message, model_label
from rlmnb._sandbox.base import ExecResult, Sandbox
from rlmnb.events import (
    CodeExecuted,
    EventBus,
    Fallback,
    GuardRejected,
    ModelReply,
    RunScope,
    RunStatus,
    Submitted,
    TurnStarted,
    TurnsTrimmed,
)

if TYPE_CHECKING:
    from rlmnb.inputs import Field

__all__ = ["Outcome", "RunContext", "Session", "Stall", "out_of_budget", "root_call", "run_turn"]


@dataclass
class RunContext:
    """Everything one run's turns need. Created and torn down by runs.execute_run."""

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
    sent_back: set[str] = field(default_factory=set)  # the evidence check's guards that sent an answer back (once each)
    noted: set[str] = field(default_factory=set)  # the once-per-run notes already given (`_partial_output`)
    reading: Reading | None = None  # the first reading the root was shown (first_read.py), if any

    def run_limits(self) -> RunLimits:
        if self.limits is None:
            self.limits = run_limits(self.config, self.root_lm, self.sub.lm)
        return self.limits


@dataclass
class Session:
    """What a finished run leaves open for `continue_from`: its sandbox, conversation and inputs."""

    sandbox: Sandbox
    conversation: Conversation
    fields: list[Field]
    closed: bool = False

    def close(self) -> None:
        """Close the sandbox (for a kernel sandbox: stop its process)."""
        if not self.closed:
            self.closed = True
            run_coroutine_blocking(self.sandbox.close())


@dataclass(frozen=True)
class Stall:
    """A turn whose reply would repeat turn `earlier` after the run's asks for another step were used up
    (`RLMConfig.repeat_asks`): the turns end there and the fallback answers."""

    turn: int
    earlier: int


@dataclass(frozen=True)
class Outcome:
    """How a run ended: from its turns, then its verification, refinement and run (RunResult is the root's)."""

    status: RunStatus
    answer: Any
    reason: str = ""
    last_turn: TurnRecord | None = None
    """The submitting turn (verification may send the run back to it)."""
    run_id: str = ""
    error: str | None = None
    verified: bool | None = None
    session: Session | None = None


def out_of_budget(ctx: RunContext, exc: BudgetExhausted, reason: str) -> Outcome:
    """How a run ends when the budget refuses a root call: "budget_exhausted", no answer, `reason`; or, when the
    first reading's answers agree (one answer, none marked) and there is no answer schema, "fallback" with that
    answer, the reason saying the model did not check it: the reading is paid-for output, as the fallback's
    outputs are. Recorded (bench/realmodel.py's needle on 31f41fc, `max_time` 300 s, Qwen2.5-Coder 1.5B on this
    CPU): the reading and the plain asking both said "2204211" in 454 s, and the run ended with no answer."""
    values = ctx.reading.values if ctx.reading is not None else ()
    if len(values) != 1 or ctx.schema is not None:
        return Outcome("budget_exhausted", None, reason)
    why = f"{exc} The answer is the first reading's; the model did not check it."
    ctx.bus.emit(Fallback, ctx.scope, answer=recordable(values[0]), reason=why)
    return Outcome("fallback", values[0], why)


async def root_call(ctx: RunContext, messages: list[Message], *, purpose: str, retry_empty: bool = False,
                    on_repeat: str = "", cache_marks: bool = True, **sampling: Any) -> tuple[Completion, Step]:
    """One root request: budget checked first (BudgetExhausted spends nothing), usage settled after.

    The reply is read as one step (`replies.read_step`); a turn's request carries the stop sequences
    where the provider takes them, so generation ends where the model starts writing output itself.
    `retry_empty` marks the reply's event when the caller will ask again because it is empty; `on_repeat` is the
    note it gets when it repeats an earlier turn (`_repeated`: "repeat_reasked", or "repeat_ended" when the run's
    asks are used up); `sampling` goes to the model (a re-ask's temperature and seed). `cache_marks=False`
    sends a one-off request (a re-ask's prefix is read by no later call) without prompt-cache marks.
    """
    tokens, cost = ctx.budget.estimate(ctx.root_lm, sum(len(str(m.get("content") or "")) for m in messages) // 4)
    reservation = ctx.budget.reserve(ctx.scope.run_id, 1, charged=ctx.scope.depth > 0, est_tokens=tokens,
                                     est_cost=cost)
    params: dict[str, Any] = dict(sampling)
    if purpose == "turn" and await _supports(ctx, "stop"):
        params["stop"] = list(STOP_SEQUENCES)
    started = time.perf_counter()
    try:
        completion = await ctx.root_lm.acomplete(cache_marked(ctx, messages) if cache_marks else messages, **params)
    except BaseException:
        ctx.budget.settle(reservation, CallUsage(), root=True)
        raise
    ctx.budget.settle(reservation, completion.usage, root=True)
    finish = completion.finish_reason or completion.meta.get("finish_reason")
    step = read_step(completion.text, finish_reason=finish)
    if purpose == "turn" and step.code is None and not step.empty and echoes(
            step.kept, _given(messages), outputs=[s.text for s in steps_of(ctx.bus.trajectory, ctx.scope.run_id)]):
        step = Step(None, "", reasoning=step.reasoning, empty=True, echoed=True)
    if purpose == "turn":
        step = without_copied_head(step, "\n".join([ctx.conversation.system, *ctx.conversation.given()]))
    notes = step.notes + ([("echo" if step.echoed else "empty") + "_retried"] if step.empty and retry_empty else [])
    if on_repeat and _repeated(ctx, step) is not None:
        notes.append(on_repeat)
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


async def _supports(ctx: RunContext, param: str) -> bool:
    """Whether the root model takes `param` ("stop", "seed"): its `supports_<param>`, asked once per run, off the
    event loop (a LiteLLM imports litellm to answer)."""
    key = f"supports_{param}"
    if key not in ctx.extra:
        ctx.extra[key] = bool(await asyncio.to_thread(getattr, ctx.root_lm, key, False))
    return bool(ctx.extra[key])


async def run_turn(ctx: RunContext) -> Outcome | Stall | None:
    """Run turn `ctx.turn + 1`: ask, read the step, execute, guard, observe.

    Returns:
        The Outcome when the run ended in this turn (an accepted submission, or the budget ran out before
        the root call); a Stall when the reply repeats an earlier turn and the run's asks are used up (the turns
        end, nothing added); else None with the turn added to the conversation.

    Raises:
        ModelError, SandboxError: terminal trouble (a sub-call's terminal error is raised after the snippet).
    """
    ctx.turn += 1
    turn = ctx.turn
    max_turns = ctx.config.max_iterations
    limits = ctx.run_limits()
    ctx.bus.emit(TurnStarted, ctx.scope, turn=turn, max_turns=max_turns)
    before = ctx.conversation.tokens()
    dropped = ctx.conversation.trim(limits.context_tokens)
    if dropped and ctx.config.compaction == "summarize" and await summarize_dropped(
            ctx.conversation, dropped, lambda request: _compact_call(ctx, request)):
        dropped += ctx.conversation.trim(limits.context_tokens)  # the summary itself must fit
    if dropped:
        ctx.bus.emit(TurnsTrimmed, ctx.scope, turn=turn, dropped=dropped,
                     tokens_before=before, tokens_after=ctx.conversation.tokens())
    messages = ctx.conversation.messages()
    try:
        completion, step = await root_call(ctx, messages, purpose="turn", retry_empty=True, on_repeat=_repeat_note(ctx))
        if step.empty:  # asked again once, without costing a turn; the empty reply stays out of the history
            retry = [*messages, {"role": "user", "content": load("echo_retry" if step.echoed else "empty_retry")}]
            completion, step = await root_call(ctx, retry, purpose="turn", on_repeat=_repeat_note(ctx))
        while (earlier := _repeated(ctx, step)) is not None:  # the repeat stays out of the history
            if ctx.repeats.asked >= ctx.config.repeat_asks:
                return Stall(turn, earlier)
            ctx.repeats.asked += 1
            if step.code is not None:
                ask = _repeat_ask(ctx, earlier, failed=ctx.repeats.failed(step.code))
                retry = _reask_request(messages, [step.code, *ctx.repeats.ran_codes()], ask)
            else:  # the same long prose again
                ask = render("repeat_prose_ask", turn=earlier) + _reading_listed(ctx)
                retry = _reask_request(messages, ctx.repeats.ran_codes(), ask)
            completion, step = await root_call(ctx, retry, purpose="turn", cache_marks=False,
                                               on_repeat=_repeat_note(ctx), **await _reask_sampling(ctx))
        if step.code is None and (partial := _partial_prose(ctx, step)) is not None:  # asked once, as above
            ctx.bus.emit(GuardRejected, ctx.scope, turn=turn, guard="partial", reason=partial)
            retry = _reask_request(messages, ctx.repeats.ran_codes(), partial)
            completion, step = await root_call(ctx, retry, purpose="turn", cache_marks=False,
                                               **await _reask_sampling(ctx))
    except BudgetExhausted as exc:
        return out_of_budget(ctx, exc, str(exc))
    reply = step.kept or EMPTY_KEPT
    notes_of_reply = reply_notes(step, getattr(ctx.root_lm, "max_output_tokens", None))
    if step.code is None:
        answer = _prose_answer(ctx, step.kept)
        if answer is not None:
            ctx.bus.emit(Submitted, ctx.scope, turn=turn, answer=answer)
            return Outcome("submitted", answer, "answered in prose with a value its outputs showed",
                           TurnRecord(turn, reply, ""))
        stated = (turn > 1 or bool(_reading(ctx))) and states_shown_value(
            step.kept, trajectory=ctx.bus.trajectory, run_id=ctx.scope.run_id, seen=_reading(ctx),
            question=ctx.question)
        if stated and _stated_again(ctx, turn, step.kept):
            ctx.bus.emit(Submitted, ctx.scope, turn=turn, answer=step.kept.strip())
            return Outcome("submitted", step.kept.strip(), "stated the same answer in prose twice, with values real "
                           "output showed", TurnRecord(turn, reply, ""))
        if not step.empty:
            ctx.repeats.said(turn, step.kept)
        ctx.conversation.add_turn(TurnRecord(turn, reply, no_code(turn, max_turns, notes_of_reply, states_found=stated,
                                                                  after=_reading_unsaid(ctx, step.kept))))
        return None
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
                rejection = _evidence(ctx, result, step.code)
            if rejection is None:
                ctx.bus.emit(Submitted, ctx.scope, turn=turn, answer=result.answer)
                outcome = Outcome("submitted", answer, "submit() was called")
        if rejection is not None:
            guard, message = rejection
            ctx.bus.emit(GuardRejected, ctx.scope, turn=turn, guard=guard, reason=message)
            notes.append("[rejected] " + message)
    rejected = bool(notes)
    shown = output_of(result)
    clean = result.ok and "[error]" not in shown and not result.submitted  # a rejected submit may be sent again
    repeat_of = ctx.repeats.check(turn, step.code, shown, clean=clean, submitted=result.submitted)
    stalled = repeat_of if outcome is None else None
    obs = build(result, turn=turn, max_turns=max_turns, max_chars=limits.output_chars, timeout=timeout,
                extra=notes_of_reply + notes + _typed_data(ctx, step.code) + _bare_calls(ctx, turn)
                + _partial_output(ctx, shown, outcome is None and not rejected) + _same_error(ctx, step.code, result, stalled)
                + _reading_again(ctx, stalled),
                nudge=outcome is None, repeat_of=stalled,
                latest=_latest_other(ctx, stalled) if stalled is not None else None)
    _emit_code(ctx, turn, step.code, result, obs, repeat_of)
    if outcome is not None:
        return Outcome(outcome.status, outcome.answer, outcome.reason, TurnRecord(turn, reply, obs))
    made_calls = ctx.budget.run_usage(ctx.scope.run_id).sub_calls > calls_before
    ctx.conversation.add_turn(TurnRecord(turn, reply, obs, error=not result.ok or rejected, findings=made_calls,
                                         repeat=stalled is not None))
    return None


class _Rejected:
    def __init__(self, message: str) -> None:
        self.message = message


def _guard(ctx: RunContext, result: ExecResult) -> tuple[str, str] | None:
    """Why a submission must be rejected, or None."""
    if result.submit_during_exception:
        return "exception", render("reject_exception", error_type=result.submit_during_exception)
    if result.submit_error:
        return "jsonable", render("reject_unjsonable", error=result.submit_error)
    if (ctx.turn == 1 and not ctx.config.allow_first_turn_submit and not ctx.conversation.turns
            and ctx.reading is None):  # a first reading is output the root has seen
        return "first_turn", load("reject_first_turn")
    return None


def _prose_answer(ctx: RunContext, text: str) -> str | None:
    """A reply that is only a short value real output showed, prose restating a first reading's answer, or prose
    whose last `\\boxed{...}` holds a value real output showed, ends the run as a submission (not on the first turn
    before any output, nor with an answer schema, which needs submit())."""
    if ctx.schema is not None or (ctx.turn == 1 and not _reading(ctx) and not ctx.config.allow_first_turn_submit):
        return None
    if ctx.reading is not None:  # affirming the reading's answer
        answer = restated(text, ctx.reading.values)
        if answer is not None:
            return answer
    trajectory, run_id, seen = ctx.bus.trajectory, ctx.scope.run_id, _reading(ctx)
    answer = (prose_answer(text, trajectory=trajectory, run_id=run_id, seen=seen)
              or boxed_answer(text, trajectory=trajectory, run_id=run_id, seen=seen))
    if answer is not None and guessed_by_sub_call(answer, trajectory=trajectory, run_id=run_id, question=ctx.question,
                                                  opening=ctx.conversation.given()) is not None:
        return None  # a sub-model's guess (`_guessed`) is no value real output showed
    return answer


def _stated_again(ctx: RunContext, turn: int, text: str) -> bool:
    """Whether the model's previous statement (short prose without code, stating a value real output showed) was
    this same prose, said at the turn before or with only code steps and other prose between.

    Recorded (RULER niah_multivalue 8k): the root stated the numbers in prose at turn 2, was told to end the run
    with `submit(...)`, and sent the same sentence at turns 3 to 6; its answer was then lost to the fallback.
    Recorded (RULER cwe 8k, on 9beaedc): the root counted the words with code at turn 2, stated the ten words and
    their counts at turn 3, ran a check at turn 4, and stated the same ten again at turn 5; then it submitted a
    list of its own making. A statement made twice is the model's answer. Not with an answer schema (that needs
    `submit()`), not for long prose (reasoning, not an answer)."""
    said = " ".join(text.split())
    earlier = ctx.extra.get("stated_prose")
    ctx.extra["stated_prose"] = (turn, said)
    return (ctx.schema is None and len(said) <= RESTATE_CHARS and earlier is not None
            and earlier[0] < turn and earlier[1] == said)


def _given(messages: list[Message]) -> str:
    """The instructions a reply that echoes copies: the request's last user message and its system prompt.

    Recorded (`rlmnb eval` oolong_pairs 8k): turns 7 and 8 replied with the system prompt's paragraph on
    `llm_map` / `llm_classify` / `llm_filter` word for word and one line of their own, and no code. Earlier
    outputs are not included: a prose answer may quote what the code printed.
    """
    texts = [_text(m) for m in messages if m.get("role") == "system"]
    for message in reversed(messages):
        if message.get("role") == "user":
            texts.append(_text(message))
            break
    return "\n".join(texts)


def _text(message: Message) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _same_error(ctx: RunContext, code: str, result: ExecResult, stalled: int | None) -> list[str]:
    """The note for a step whose error the same line raised at an earlier turn with other code around it
    (`Repeats.same_error`); a stalled step (same code) has the stall note instead."""
    if result.ok or result.timed_out:
        return []
    earlier = ctx.repeats.same_error(ctx.turn, code, result.error)
    if earlier is None or stalled is not None:
        return []
    turn, line = earlier
    return ["[note] " + render("same_error", turn=turn, line=line if len(line) <= 160 else line[:157] + "...")]


def _reading_unsaid(ctx: RunContext, prose: str) -> list[str]:
    """A reply without code that holds none of the first reading's answers is shown them again, last (as a stalled
    step is). Recorded (RULER niah_single_2 at 8K, instance 0, on a562385): both readings said "7067228"; the root
    said "The special magic number ... is 4." (a number in the preview) at turns 1, 4, 7 and 8, its code printed
    "is: 7067228" at turn 6, and the run ended in the fallback. A reply that holds one, or whose words
    say nothing beyond the question (`held_by` undecided), gets no note."""
    reading = ctx.reading
    if reading is None or not reading.values:
        return []
    if any(held_by(value, prose, question=ctx.question) is not False for value in reading.values):
        return []
    return [render("repeated_reading", answers=reading.answers_text)]


def _reading_again(ctx: RunContext, stalled: int | None) -> list[str]:
    """A stalled step is shown the first reading's answers again (recorded: the reading held the needle and the
    root looped on a comment-only step until the fallback)."""
    if stalled is None or ctx.reading is None:
        return []
    return [render("repeated_reading", answers=ctx.reading.answers_text)]


def _repeated(ctx: RunContext, step: Step) -> int | None:
    """The earlier turn this reply repeats (its code, `_repeats_code`, or its long prose, `_repeats_prose`), or None.

    Such a reply is not run. The model is asked for another step (`_reask_request`) up to `config.repeat_asks`
    times per run; the run's next repeat ends the turns (`stalled`). Recorded (RULER at 8K and 32K, Qwen2.5-Coder
    1.5B): runs asked again two to five times wandered to the last turn, about 3,500 tokens a root call, and the
    fallback gave the answer the outputs already held (docs/decisions/evidence-check-and-stall-breaker.md)."""
    if step.code is not None:
        return _repeats_code(ctx, step)
    return _repeats_prose(ctx, step)


def _repeat_note(ctx: RunContext) -> str:
    """The note a reply gets when it repeats an earlier turn: asked again, or (asks used up) the turns end."""
    return "repeat_reasked" if ctx.repeats.asked < ctx.config.repeat_asks else "repeat_ended"


def _repeats_code(ctx: RunContext, step: Step) -> int | None:
    """The earlier turn whose code this step would run again, or None.

    Recorded (RULER at 8K, Qwen2.5-Coder 1.5B): the root ran the system prompt's example step on 7 turns in a
    row, each time shown the stall note after the fact; it copies its own last reply, so the note never took.
    A step that failed is run again once (the retry may be the point); recorded, the same model then sent a step
    that raised the same TypeError (or NameError) a third and fourth time, so after two identical failures it is
    asked too (`Repeats.ran`).
    The step is not run: the model is asked once more (`_repeat_ask`) in a request that shows none of its earlier
    replies (`_reask_request`), while the run has asks left (`_repeated`).
    """
    return ctx.repeats.ran(step.code) if step.code is not None and not step.empty else None


def _repeats_prose(ctx: RunContext, step: Step) -> int | None:
    """The earlier turn whose reply without code this one repeats word for word (`Repeats.said_before`), for prose
    longer than `RESTATE_CHARS`; or None. Short prose said twice is the model's answer (`_stated_again`);
    long prose said again is a stall: at temperature 0 the same request gives the same reply. Asked once, as a
    repeated step is (`_reask_request`, at `REASK_TEMPERATURE`), while the run has asks left (`_repeated`)."""
    if step.code is not None or step.empty or len(" ".join(step.kept.split())) <= RESTATE_CHARS:
        return None
    return ctx.repeats.said_before(step.kept)


def _reask_request(messages: list[Message], codes: list[str], ask: str) -> list[Message]:
    """The re-ask's request: the system prompt with the code of every step that already ran left out, then one user
    message holding the opening, every output so far and `ask`; none of the model's own replies.

    Recorded (RULER vt and cwe, 8k): asked again with its earlier reply in view, the model sent those 800 tokens
    again word for word; with only that code left out it sent the system prompt's example step, then its first
    step again; with each earlier reply replaced by a placeholder line it sent the placeholder as its next reply.
    A small model copies its own earlier replies, so the re-ask shows none: the outputs carry what they found.
    """
    placeholder = load("repeat_left_out")
    system: list[Message] = []
    said: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "system":
            if isinstance(content, str):
                for code in codes:
                    content = without_code(content, code, placeholder)
            system.append({**message, "content": content})
        elif message.get("role") == "user":
            if not isinstance(content, str):  # images or parts: the request keeps its own shape
                return [*system, *(m for m in messages if m.get("role") != "assistant" and m.get("role") != "system"),
                        {"role": "user", "content": ask}]
            said.append(content)
    return [*system, {"role": "user", "content": "\n\n".join([*said, ask])}]


def _repeat_ask(ctx: RunContext, earlier: int, *, failed: bool) -> str:
    """What the re-ask after a repeated step says: the output (or the error, for a step that `failed` the same way
    twice) is already above, take another step."""
    return render("repeat_error_ask" if failed else "repeat_ask", turn=earlier) + _reading_listed(ctx)


def _reading_listed(ctx: RunContext) -> str:
    """The first reading's answers, on a new line, for a re-ask; "" without a reading."""
    return "\n" + render("repeated_reading", answers=ctx.reading.answers_text) if ctx.reading is not None else ""


REASK_TEMPERATURE = 0.7
"""Temperature of the re-ask after a repeated step, for a root model built with a lower one: at 0 the same
request prefix gives the same reply."""


async def _reask_sampling(ctx: RunContext) -> dict[str, Any]:
    """Sampling for the re-ask: a higher temperature only where the model was given a temperature (a model built
    without one may refuse the parameter, as reasoning models do), with a seed where the provider takes one, so
    a re-run of the same run samples the same re-asks (the seed counts the run's re-asks and the guards and notes
    it has used, so two re-asks of one run differ).

    Recorded (RULER at 8K, Qwen2.5-Coder 1.5B on llama.cpp, unseeded): on a rerun, four of twelve instances'
    re-asks went somewhere new and each scored a whole point apart from its last run; unseeded, a run cannot be
    repeated to tell a change to the harness from the sampling."""
    temperature = getattr(ctx.root_lm, "temperature", None)
    if not (isinstance(temperature, int | float) and not isinstance(temperature, bool)
            and temperature < REASK_TEMPERATURE):
        return {}
    if await _supports(ctx, "seed"):
        return {"temperature": REASK_TEMPERATURE, "seed": ctx.repeats.asked + len(ctx.sent_back) + len(ctx.noted)}
    return {"temperature": REASK_TEMPERATURE}


def _typed_data(ctx: RunContext, code: str) -> list[str]:
    """The note for a step whose string literals copy the data the opening showed (`evidence.typed_data`), that
    prints only its own literals (`prints_own_text`) or only positions (`prints_positions`): output that is no
    finding about the input."""
    shown = [*ctx.conversation.given(), *(s.text for s in steps_of(ctx.bus.trajectory, ctx.scope.run_id))]
    copied = typed_data(code, shown)
    if copied:
        return ["[note] " + render("typed_data", chars=f"{copied:,}")]
    if prints_own_text(code):
        return ["[note] " + load("own_text")]
    return ["[note] " + load("positions")] if prints_positions(code) else []


def _reading(ctx: RunContext) -> list[str]:
    """The first reading's message, when the run had one (output the root has seen)."""
    return [ctx.reading.message] if ctx.reading is not None else []


def _evidence(ctx: RunContext, result: ExecResult, code: str) -> tuple[str, str] | None:
    """The evidence check: a short answer the model typed, which nothing it saw contained, goes back once; so
    does an answer that says nothing was found when the first reading found one (recorded, RULER 8k on
    Qwen2.5-Coder 1.5B: the reading named two magic numbers, the root printed "No special magic numbers found."
    from a string in its code and submitted None; on vt the reading named a variable and the root submitted []).

    Never on the last turn (sending it back there would end the run in the fallback), and at most once
    per run: the next submission is accepted whatever it is. With it, once each: a reading line the harness marked
    made up (`_marked`), an answer without the one answer a whole text gave read twice (`_contradicts_reading`) and
    an answer holding only some of the reading's named-place answers (`_partial`). A copy of a text input
    (`_copied`) goes back every time, the last turn too.
    """
    copied = _copied(ctx, result.answer)  # every time, the last turn too
    if copied is not None:
        return "copy", copied
    if not _may_send_back(ctx, "evidence"):
        return None
    if ctx.reading is not None and ctx.reading.values and says_nothing(result.answer):
        ctx.sent_back.add("evidence")
        return "evidence", render("reject_empty", value=repr(result.answer), answers=ctx.reading.answers_text)
    marked = _marked(ctx, result.answer)
    if marked is not None:
        return "marked", marked
    contradicted = _contradicts_reading(ctx, result.answer)
    if contradicted is not None:
        return "reading", contradicted
    guessed = _guessed(ctx, result.answer)
    if guessed is not None:
        return "guessed", guessed
    partial = _partial(ctx, result.answer)
    if partial is not None:
        return "partial", partial
    found = unevidenced(result.answer, turn=ctx.turn, trajectory=ctx.bus.trajectory, run_id=ctx.scope.run_id,
                        code=code, opening=ctx.conversation.given())
    if found is None:
        return None
    ctx.sent_back.add("evidence")
    return "evidence", render("reject_evidence", value=repr(found.value), turn=found.typed_turn)


def _contradicts_reading(ctx: RunContext, answer: Any) -> str | None:
    """The note sending back, once per run, an answer that does not hold the one answer a whole text gave read with
    both prompts (`Reading.twice`), or None. Recorded (RULER niah_single_2 at 8K, instance 0, on 879f369): both
    readings said "7067228"; the root counted the word "regrets" in the text, printed "The special magic number ...
    is: 4" and submitted the count; a value the code computed passes the evidence check. The next submission is
    taken, whatever it is: the code may have shown the reading wrong."""
    reading = ctx.reading
    if reading is None or not reading.twice or len(reading.values) != 1 or not _may_send_back(ctx, "reading"):
        return None
    said = " ".join(str(a) for a in answer) if isinstance(answer, list | tuple) else str(answer)
    if held_by(reading.values[0], said, question=ctx.question) is not False:
        return None
    ctx.sent_back.add("reading")
    return render("reject_reading", value=clip(repr(answer), 200), reading=reading.values[0])


def _guessed(ctx: RunContext, answer: Any) -> str | None:
    """The note sending back, once per run, an answer that came from a sub-call given only the question
    (`evidence.guessed_by_sub_call`), or None: the sub-model saw none of the input, so its reply is a guess,
    whether the code typed it into `submit()` or passed it on. The next submission is taken, whatever it is."""
    if not _may_send_back(ctx, "guessed"):
        return None
    turn = guessed_by_sub_call(answer, trajectory=ctx.bus.trajectory, run_id=ctx.scope.run_id, question=ctx.question,
                               opening=ctx.conversation.given())
    if turn is None:
        return None
    ctx.sent_back.add("guessed")
    return render("reject_guessed", value=clip(repr(answer), 200), turn=turn)


def _partial_output(ctx: RunContext, shown: str, going_on: bool) -> list[str]:
    """The note, once per run, for a step whose output shows some but not all of the first reading's named answers
    (`evidence.partly_holds`), naming those it lacks; only while the run goes on and no guard sent an answer back
    (that note says it). Recorded (RULER vt at 8K, instance 0, on a562385): the plain asking named the five
    variables of the chain; turn 1's regex printed ['HZYVC'], the one assigned the value directly, and the root then
    said no variable matched; it never submitted, and the run ended in the fallback."""
    reading = ctx.reading
    if not going_on or reading is None or "partial_output" in ctx.noted:
        return []
    held = partly_holds(shown, reading.named)
    if held is None:
        return []
    ctx.noted.add("partial_output")
    missing = [n for n in reading.named if n not in held]
    return ["[note] " + render("partial_output", held=len(held), count=len(reading.named), where=reading.named_where,
                               shown=", ".join(held), missing=", ".join(missing))]


def _bare_calls(ctx: RunContext, turn: int) -> list[str]:
    """The note for a step whose sub-calls were given only the question (`evidence.asks_only_the_question`): the
    sub-model sees nothing but its prompt, so the reply is a guess; said where the model sees the reply."""
    count = bare_sub_calls(ctx.bus.trajectory, ctx.scope.run_id, turn, ctx.question)
    return ["[note] " + render("bare_sub_call", calls="call" if count == 1 else f"{count} calls")] if count else []


def _may_send_back(ctx: RunContext, guard: str) -> bool:
    """Whether the evidence check's `guard` may still send an answer back: the check is on, that guard has not
    sent one back in this run, and this is not the last turn (sending back there ends the run in the fallback)."""
    return ctx.config.evidence_check and guard not in ctx.sent_back and ctx.turn < ctx.config.max_iterations


def _partial(ctx: RunContext, answer: Any) -> str | None:
    """The note sending back, once per run, an answer that holds some but not all of the answers the first reading's
    named places gave, or of the items a whole text's reading listed (`evidence.partly_holds`), or None. The model
    decides: it may send the same answer again (a question asking for one value), which is then accepted.

    Recorded (RULER niah_multivalue at 32K, instance 1, Qwen2.5-Coder 1.5B): each of the four places naming the
    question's key, read alone, gave its number, and the reading listed all four first; the root's turn 1 reasoned
    "We will focus on the first occurrence for simplicity" and boxed one (0.25). Never on the last turn, nor with
    the evidence check off."""
    if ctx.reading is None or not _may_send_back(ctx, "partial"):
        return None
    held = partly_holds(answer, ctx.reading.named)
    if held is None:
        return None
    ctx.sent_back.add("partial")
    return render("reject_partial", value=clip(repr(answer), 200), held=len(held), count=len(ctx.reading.named),
                  answers=", ".join(ctx.reading.named), where=ctx.reading.named_where)


def _marked(ctx: RunContext, answer: Any) -> str | None:
    """The note sending back, once per run, an answer quoting a first reading's answer together with the mark the
    harness put on it (`NOT_HELD`, `ECHOED`: not in the text), or made of that marked answer's words, or None.

    Recorded (RULER cwe at 8K, instance 1, on 9beaedc, Qwen2.5-Coder 1.5B): the reading answered five words of the
    question's worked example, marked "[not in the text: the question's own words]"; at turn 6 the root submitted
    that reading line whole, mark included, and it was accepted. Recorded (cwe at 32K, 099dc39): the root sent
    `submit(['ketchup', 'fresh', ...])`, the marked answer's five words as a list."""
    if ctx.reading is None or not _may_send_back(ctx, "marked"):
        return None
    strings = answer_strings(answer)
    marks = [f"[{mark}]" for mark in (NOT_HELD, ECHOED)]
    quoted = next((m for v in strings for m in marks if m in v), None)
    if quoted is None:
        said = " ".join(strings)
        quoted = next((f"[{mark}]" for text, mark in ctx.reading.marked if same_words(said, text)), None)
    if quoted is None:
        return None
    ctx.sent_back.add("marked")
    return render("reject_marked", mark=quoted)


MAX_COPY_CHECK_CHARS = 50_000_000
"""Text inputs larger than this are not searched for a copied answer (the check reads each text it searches)."""


def _copied(ctx: RunContext, answer: Any) -> str | None:
    """The note sending back an answer that is a long verbatim copy of a text input, or None: every time, the last
    turn too (the fallback answers from the outputs instead); the other guards send back once.

    Recorded (RULER vt at 32K, instance 1, Qwen2.5-Coder 1.5B): turn 3 ran `if "97939" in inputs["context"]:
    submit(inputs["context"])`, the whole 28,000-character text; a metric counting the references found in the
    answer scored it 1.0. The input holds the answer; it is not one. Recorded (RULER cwe at 8K, instance 0, on
    1704f9e): sent back once at turn 5, the same submission came again at turn 7 and was taken."""
    if not ctx.config.evidence_check:
        return None
    # lazy: `copied_from` loads no input for a short answer
    texts = ((f.name, value) for f in ctx.extra.get("fields", ())
             if f.info.kind in ("text", "text_file") and (f.info.size_chars or 0) <= MAX_COPY_CHECK_CHARS
             and isinstance(value := f.load(), str))
    found = copied_from(answer, texts)
    if found is None:
        return None
    return render("reject_copy", field=found[0], chars=f"{found[1]:,}")


def _partial_prose(ctx: RunContext, step: Step) -> str | None:
    """`_partial` for a reply without code whose prose is an answer (`_prose_answer`). Its ask goes as a re-ask
    (`_reask_request`: none of the model's replies in view), not as the turn's note: recorded (the same instance),
    shown the note after its reply, the model sent that reply again nearly word for word, boxing the same one."""
    answer = _prose_answer(ctx, step.kept)
    return _partial(ctx, answer) if answer is not None else None


def _latest_other(ctx: RunContext, repeat_of: int) -> tuple[int, list[str]] | None:
    """The stall note's pointer: the most recent different output of this run, as (turn, last lines)."""
    step = latest_other(steps_of(ctx.bus.trajectory, ctx.scope.run_id), repeat_of)
    return (step.turn, last_lines(step.text)) if step is not None else None


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
