"""The live record of one run and its root call: `RunContext`, `Outcome`, `Session`, `root_call`.

`RunContext` is everything a run's turns and policies share (models, sandbox, budget, events, conversation, the
policies and their counters); `root_call` is the one way the root model is asked (budget checked first, usage
settled after, the reply read as one step); `Outcome` is how a run ended; `Session` what a finished run leaves open
for `continue_from`. Created and torn down by runs.execute_run. Why a module of its own: the turn and the policies
both need it, and the policies sit below the turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmnb._engine.budget import Budget
from rlmnb._engine.cache import request_sha
from rlmnb._engine.conversation import Conversation, TurnRecord
from rlmnb._engine.evidence import Reading, steps_of
from rlmnb._engine.limits import RunLimits, run_limits
from rlmnb._engine.prompt_cache import mark_prefix, needs_cache_marks
from rlmnb._engine.replies import STOP_SEQUENCES, Repeats, Step, echoes, read_step, without_copied_head
from rlmnb._engine.subcalls import SubCaller
from rlmnb._ground.blocking import run_coroutine_blocking
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import BudgetExhausted
from rlmnb._ground.usage import CallUsage
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM, Completion, Message, model_label
from rlmnb._sandbox.base import Sandbox
from rlmnb.events import EventBus, ModelReply, RunScope, RunStatus, TurnsTrimmed

if TYPE_CHECKING:
    from rlmnb.inputs import Field

__all__ = ["Outcome", "RunContext", "Session", "cache_marked", "out_of_budget", "root_call"]


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
    policies: Any = None  # the run's `policies.Policies` (a layer above: typed loosely), set by runs.execute_run
    acted: int = 0  # policy actions so far in this run (a re-ask's seed)
    stalled: int | None = None  # this turn's step repeated that turn's (same code, same output)
    reading: Reading | None = None  # the first reading the root was shown (policy first_read), if any

    async def fit_conversation(self, max_tokens: int,
                               summarize: Callable[[list[int]], Awaitable[bool]] | None = None) -> None:
        """Trim the conversation to `max_tokens` (`Conversation.trim`) and say what went in one `TurnsTrimmed`;
        with `summarize`, turns the trim dropped are summarised (True when a summary was kept) and the conversation
        trimmed again so that the summary fits too."""
        before, cut = self.conversation.tokens(), len(self.conversation.clipped)
        dropped = self.conversation.trim(max_tokens)
        if dropped and summarize is not None and await summarize(dropped):
            dropped += self.conversation.trim(max_tokens)
        clipped = self.conversation.clipped[cut:]
        if dropped or clipped:
            self.bus.emit(TurnsTrimmed, self.scope, turn=self.turn, dropped=dropped, clipped=list(clipped),
                          tokens_before=before, tokens_after=self.conversation.tokens())

    def run_limits(self) -> RunLimits:
        if self.limits is None:
            self.limits = run_limits(self.config, self.root_lm, self.sub.lm)
        return self.limits

    async def supports(self, param: str) -> bool:
        """Whether the root model takes `param` ("stop", "seed"): its `supports_<param>`, asked once per run, off
        the event loop (a LiteLLM imports litellm to answer)."""
        key = f"supports_{param}"
        if key not in self.extra:
            self.extra[key] = bool(await asyncio.to_thread(getattr, self.root_lm, key, False))
        return bool(self.extra[key])


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
    """How a run ends when the budget refuses a root call: "budget_exhausted", no answer, `reason` (a first
    reading is evidence for the root, never an answer of its own: issue 44)."""
    return Outcome("budget_exhausted", None, reason)


async def root_call(ctx: RunContext, messages: list[Message], *, purpose: str, cache_marks: bool = True,
                    **sampling: Any) -> tuple[Completion, Step]:
    """One root request: budget checked first (BudgetExhausted spends nothing), usage settled after.

    The reply is read as one step (`replies.read_step`); a turn's request carries the stop sequences
    where the provider takes them, so generation ends where the model starts writing output itself.
    `sampling` goes to the model (a re-ask's temperature and seed). `cache_marks=False`
    sends a one-off request (a re-ask's prefix is read by no later call) without prompt-cache marks.
    """
    tokens, cost = ctx.budget.estimate(ctx.root_lm, sum(len(str(m.get("content") or "")) for m in messages) // 4)
    reservation = ctx.budget.reserve(ctx.scope.run_id, 1, charged=ctx.scope.depth > 0, est_tokens=tokens,
                                     est_cost=cost)
    params: dict[str, Any] = dict(sampling)
    if purpose == "turn" and await ctx.supports("stop"):
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
    notes = list(step.notes)
    reasoning = "\n\n".join(r for r in (completion.reasoning, step.reasoning) if r)
    ctx.bus.emit(ModelReply, ctx.scope, turn=ctx.turn, text=completion.text, usage=completion.usage.to_dict(),
                 latency_s=round(time.perf_counter() - started, 6), purpose=purpose,
                 request_sha=request_sha(messages), finish_reason=finish, reasoning=reasoning, notes=notes)
    return completion, step


def cache_marked(ctx: RunContext, messages: list[Message]) -> list[Message]:
    """The request with Anthropic-style cache marks on its stable prefix where the root model needs them."""
    if not needs_cache_marks(model_label(ctx.root_lm)):
        return messages
    return mark_prefix(messages, 1 + len(ctx.conversation.opening))


def _given(messages: list[Message]) -> str:
    """The instructions a reply that echoes copies: the request's last user message and its system prompt (outputs
    aside: a prose answer may quote what the code printed)."""
    texts = [_text(m) for m in messages if m.get("role") == "system"]
    for message in reversed(messages):
        if message.get("role") == "user":
            texts.append(_text(message))
            break
    return "\n".join(texts)


def _text(message: Message) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


