"""Verify and revise: a guard scores each answer; a low score sends the run back to work.

A guard is a callable `(answer, context) -> confidence` or `-> (confidence, reason)`, confidence in
[0, 1]. Built in: `RuleBased`, `LLMJudge` and `QuotesFound` (quotes checked against the inputs,
rlmnb/quotes_guard.py). Whatever a guard does (never confident, NaN, raising, hanging past
`verify_timeout`), a run ends within `max_revisions + 1` attempts: a bad score counts as confidence 0 for that attempt, the guard is consulted once per attempt, and after the last failed
attempt the run ends with its last answer, marked unverified, with no further model call.
Attempt counters live in the tree's metadata, keyed by run, so nested runs cannot loop.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlmnb._engine.conversation import TurnRecord
from rlmnb._ground.concurrency import settle
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.prompts import render
from rlmnb._guards.quotes_guard import QuotesFound
from rlmnb.events import AttemptVerified

if TYPE_CHECKING:
    from rlmnb._engine.loop import Outcome, RunContext

Guard = Callable[[Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class Verdict:
    confidence: float
    reason: str


def interpret(value: Any) -> Verdict:
    """A guard's return value as a Verdict; anything malformed is confidence 0 with the reason why."""
    reason = ""
    if isinstance(value, tuple) and len(value) == 2:
        value, reason = value
    try:
        confidence = float(value)
    except (TypeError, ValueError):
        return Verdict(0.0, f"the guard returned {value!r}, not a number")
    if math.isnan(confidence):
        return Verdict(0.0, "the guard returned NaN")
    if not 0.0 <= confidence <= 1.0:
        return Verdict(0.0, f"the guard returned {confidence:g}, outside [0, 1]")
    return Verdict(confidence, str(reason or ""))


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
                from rlmnb._engine.loop import Outcome

                return Outcome("submitted", outcome.answer,
                               f"unverified after {attempt} attempt(s): {verdict.reason or 'low confidence'}",
                               record=outcome.record), False
            message = self._revision_message(verdict, attempt)
            record = outcome.record or TurnRecord(ctx.turn, "", "")
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
            from string import Template

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


class RuleBased:
    """Confidence 1 when every rule holds, else 0 with the failed rules as the reason."""

    def __init__(self, *, min_chars: int | None = None, pattern: str | None = None, schema: Any = None) -> None:
        self.min_chars = min_chars
        self.pattern = re.compile(pattern) if pattern else None
        self.schema = None
        if schema is not None:
            from rlmnb._guards.schema import AnswerSchema

            self.schema = AnswerSchema(schema)

    def __call__(self, answer: Any, context: dict[str, Any]) -> tuple[float, str]:
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        failures = []
        if self.min_chars is not None and len(text) < self.min_chars:
            failures.append(f"the answer has {len(text)} characters, fewer than {self.min_chars}")
        if self.pattern is not None and not self.pattern.search(text):
            failures.append(f"the answer does not match /{self.pattern.pattern}/")
        if self.schema is not None:
            try:
                self.schema.validate(answer)
            except ValueError as exc:
                failures.append(f"the answer does not match {self.schema.name}: {exc}")
        return (0.0, "; ".join(failures)) if failures else (1.0, "all rules hold")

    def __repr__(self) -> str:
        parts = [f"min_chars={self.min_chars}" if self.min_chars else "",
                 f"pattern={self.pattern.pattern!r}" if self.pattern else "",
                 f"schema={self.schema.name}" if self.schema else ""]
        return "RuleBased(" + ", ".join(p for p in parts if p) + ")"


class LLMJudge:
    """A model scores the answer against a rubric; its calls are sub-calls on the run's budget."""

    def __init__(self, model: Any, rubric: str = "The answer is correct, complete and supported by the data.") -> None:
        self.model = model
        self.rubric = rubric

    def __call__(self, answer: Any, context: dict[str, Any]) -> tuple[float, str]:
        prompt = render("judge", question=context.get("question", ""), rubric=self.rubric,
                        answer=answer if isinstance(answer, str) else json.dumps(answer, default=str))
        reply = context["call_model"](self.model, prompt)
        return parse_judgement(reply)

    def __repr__(self) -> str:
        name = self.model if isinstance(self.model, str) else getattr(self.model, "name", type(self.model).__name__)
        return f"LLMJudge({name!r})"


def parse_judgement(reply: str) -> tuple[float, str]:
    """'{"confidence": 0.8, "reason": "..."}' or 'confidence: 0.8' in free text."""
    try:
        data = json.loads(reply[reply.index("{"): reply.rindex("}") + 1])
        return float(data.get("confidence", 0.0)), str(data.get("reason", ""))
    except (ValueError, AttributeError):
        match = re.search(r"confidence\W+([01](?:\.\d+)?)", reply, re.IGNORECASE)
        if match:
            return float(match.group(1)), reply.strip()[:500]
    return 0.0, f"the judge's reply had no confidence: {reply[:200]!r}"


class AllOf:
    """Several guards at once: the lowest confidence wins, the reasons are joined."""

    def __init__(self, guards: list[Guard]) -> None:
        if not guards:
            raise ConfigError("AllOf needs at least one guard.")
        self.guards = list(guards)

    def __call__(self, answer: Any, context: dict[str, Any]) -> tuple[float, str]:
        verdicts = [interpret(guard(answer, context)) for guard in self.guards]
        worst = min(v.confidence for v in verdicts)
        return worst, "; ".join(v.reason for v in verdicts if v.reason)

    def __repr__(self) -> str:
        return "AllOf(" + ", ".join(repr(g) for g in self.guards) + ")"


def describe_guard(guard: Any) -> dict[str, Any]:
    """A JSON description of a guard: built-ins fully, anything else by name."""
    if isinstance(guard, RuleBased):
        return {"kind": "rule_based", "min_chars": guard.min_chars,
                "pattern": guard.pattern.pattern if guard.pattern else None,
                "schema": guard.schema.name if guard.schema else None}
    if isinstance(guard, LLMJudge):
        name = guard.model if isinstance(guard.model, str) else getattr(guard.model, "name", repr(guard.model))
        return {"kind": "llm_judge", "model": str(name), "rubric": guard.rubric}
    if isinstance(guard, AllOf):
        return {"kind": "all_of", "guards": [describe_guard(g) for g in guard.guards]}
    if isinstance(guard, QuotesFound):
        return {"kind": "quotes_found", "min_chars": guard.min_chars, "max_quotes": guard.max_quotes,
                "time_limit": guard.time_limit}
    return {"kind": "callable", "name": getattr(guard, "__qualname__", type(guard).__name__)}


def guard_from_description(data: dict[str, Any]) -> Guard | None:
    """Rebuild a built-in guard from its description; None when the user must pass it again."""
    kind = data.get("kind")
    if kind == "rule_based" and not data.get("schema"):
        return RuleBased(min_chars=data.get("min_chars"), pattern=data.get("pattern"))
    if kind == "llm_judge":
        return LLMJudge(str(data.get("model")), str(data.get("rubric", "")))
    if kind == "quotes_found":
        return QuotesFound(min_chars=int(data.get("min_chars", 20)), max_quotes=int(data.get("max_quotes", 100)),
                           time_limit=float(data.get("time_limit", 20.0)))
    if kind == "all_of":
        parts = [guard_from_description(g) for g in data.get("guards", [])]
        return AllOf([p for p in parts if p is not None]) if all(p is not None for p in parts) else None
    return None
