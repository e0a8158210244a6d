"""Verify and revise: `Verifier.check(ctx, outcome, run_turns)` scores each answer; a low score sends the run back.

A guard (rlmnb._guards.rules) is a callable `(answer, context) -> confidence` or `-> (confidence,
reason)`, confidence in [0, 1]. Whatever a guard does (never confident, NaN, raising, hanging past
`verify_timeout`), a run ends within `max_revisions + 1` attempts: a bad score counts as confidence 0
for that attempt, the guard is consulted once per attempt, and after the last failed attempt the run
ends with its last answer, marked unverified, with no further model call. Attempt counters live in the
tree's metadata, keyed by run, so nested runs cannot loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from string import Template
from typing import Any

from rlmnb._engine.context import Outcome, RunContext
from rlmnb._engine.conversation import TurnRecord
from rlmnb._ground.concurrency import settle
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.prompts import render
from rlmnb._guards.rules import Guard, Verdict, describe_guard, interpret
from rlmnb.events import AttemptVerified

__all__ = ["Verifier"]


class Verifier:
    """Runs the guard after each answer of a run and decides: accept, revise, or give up."""

    def __init__(self, guard: Guard, *, min_confidence: float = 0.7, max_revisions: int = 3,
                 revision_prompt: str | None = None, timeout: float = 60.0) -> None:
        if not callable(guard):
            raise ConfigError("verify must be a callable (answer, context) -> confidence, or RuleBased/LLMJudge.")
        if not (isinstance(min_confidence, int | float) and 0.0 <= min_confidence <= 1.0):
            raise ConfigError(f"min_confidence must be between 0 and 1, got {min_confidence!r}.")
        if not isinstance(max_revisions, int) or isinstance(max_revisions, bool) or max_revisions < 0:
            raise ConfigError(f"max_revisions must be a whole number of 0 or more, got {max_revisions!r}.")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ConfigError(f"verify_timeout must be a positive number of seconds, got {timeout!r}.")
        self.guard = guard
        self.min_confidence = float(min_confidence)
        self.revision_prompt_text = revision_prompt
        self.max_revisions = max_revisions
        self.revision_prompt = revision_prompt
        self.timeout = float(timeout)

    def describe(self) -> dict[str, Any]:
        """The guard as recorded in a trajectory; built-in guards can be rebuilt from it (replay)."""
        return {**describe_guard(self.guard), "revision_prompt": self.revision_prompt_text}

    async def check(self, ctx: RunContext, outcome: Outcome,
                    run_turns: Callable[[RunContext], Awaitable[Outcome]]) -> tuple[Outcome, bool]:
        """Score answers until one passes or the attempts run out; returns the final outcome and verified."""
        attempts = _tree_attempts(ctx)
        while True:
            attempt = attempts.get(ctx.scope.run_id, 0) + 1
            attempts[ctx.scope.run_id] = attempt
            details: dict[str, Any] = {}
            verdict = await self._consult(ctx, outcome, attempt, details)
            accepted = verdict.confidence >= self.min_confidence
            ctx.bus.emit(AttemptVerified, ctx.scope, attempt=attempt, confidence=verdict.confidence,
                         reason=verdict.reason, accepted=accepted, details=details)
            if accepted:
                return outcome, True
            if attempt >= self.max_revisions + 1:
                return Outcome("submitted", outcome.answer,
                               f"unverified after {attempt} attempt(s): {verdict.reason or 'low confidence'}",
                               last_turn=outcome.last_turn), False
            message = self._revision_message(verdict, attempt)
            record = outcome.last_turn or TurnRecord(ctx.turn, "", "")
            ctx.conversation.add_turn(TurnRecord(record.turn, record.reply,
                                                 (record.observation + "\n\n" + message).strip(), error=True))
            if ctx.turn >= ctx.config.max_iterations:
                ctx.config = ctx.config.replace(max_iterations=ctx.turn + 1)  # one more turn to revise in
            outcome = await run_turns(ctx)
            if outcome.status not in ("submitted", "fallback"):
                return outcome, False

    def _revision_message(self, verdict: Verdict, attempt: int) -> str:
        values = {"confidence": f"{verdict.confidence:.2f}", "min_confidence": f"{self.min_confidence:.2f}",
                  "reason": verdict.reason or "no reason given", "attempt": attempt,
                  "max_attempts": self.max_revisions + 1}
        if self.revision_prompt:
            return Template(self.revision_prompt).safe_substitute({k: str(v) for k, v in values.items()})
        return render("revision", **values)

    async def _consult(self, ctx: RunContext, outcome: Outcome, attempt: int,
                       details: dict[str, Any] | None = None) -> Verdict:
        context = {
            "question": ctx.question, "attempt": attempt, "max_attempts": self.max_revisions + 1,
            "depth": ctx.scope.depth, "run_id": ctx.scope.run_id, "status": outcome.status,
            "metadata": _tree_metadata(ctx), "call_model": _model_caller(ctx),
            "inputs": tuple(ctx.extra.get("fields", ())),  # the run's bound inputs (Field), e.g. for QuotesFound
        }
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def work() -> None:  # a daemon thread: a guard that hangs forever cannot hold the run
            try:
                value: Any = self.guard(outcome.answer, context)
                if asyncio.iscoroutine(value):
                    value = asyncio.run(value)
                result: Any = ("ok", value)
            except BaseException as exc:  # an adversarial guard may raise anything
                result = ("error", exc)
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, done, result)

        threading.Thread(target=work, name="rlmnb-guard", daemon=True).start()
        try:
            kind, value = await asyncio.wait_for(asyncio.shield(done), self.timeout)
        except TimeoutError:
            return Verdict(0.0, f"the guard did not answer within {self.timeout:g} s")
        found = context.get("details")
        if details is not None and isinstance(found, dict):  # a guard's findings, for the views
            details.update(found)
        if kind == "error":
            return Verdict(0.0, f"the guard raised {type(value).__name__}: {value}")
        return interpret(value)


def _tree_metadata(ctx: RunContext) -> dict[str, Any]:
    return ctx.extra.setdefault("tree_metadata", {})  # type: ignore[no-any-return]


def _tree_attempts(ctx: RunContext) -> dict[str, int]:
    return _tree_metadata(ctx).setdefault("attempts", {})  # type: ignore[no-any-return]


def _model_caller(ctx: RunContext) -> Callable[[Any, str], str]:
    """A blocking, budgeted, recorded model call for guards such as LLMJudge (runs in the guard thread)."""
    loop = asyncio.get_running_loop()

    def call_model(model: Any, prompt: str) -> str:
        future = asyncio.run_coroutine_threadsafe(ctx.sub.query(prompt, model=model), loop)
        return str(future.result())

    return call_model
