"""Answer guards: `(answer, context) -> confidence | (confidence, reason)`, confidence in [0, 1].

Entry points: `RuleBased` (rules an answer must hold), `LLMJudge` (a model scores the answer against a
rubric through `context["call_model"]`), `AllOf` (the lowest confidence of several guards),
`interpret` (any guard's return value as a Verdict; anything malformed is confidence 0),
`describe_guard` / `guard_from_description` (a guard as recorded in a trajectory, and rebuilt for
replay) and `parse_judgement` (a judge's reply as a confidence). `QuotesFound` lives in quotes.py.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmnb._ground.errors import ConfigError
from rlmnb._ground.prompts import render
from rlmnb._guards.quotes import QuotesFound
from rlmnb._guards.schema import AnswerSchema

__all__ = ["AllOf", "Guard", "LLMJudge", "RuleBased", "Verdict", "describe_guard", "guard_from_description",
           "interpret", "parse_judgement"]

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


class RuleBased:
    """Confidence 1 when every rule holds, else 0 with the failed rules as the reason."""

    def __init__(self, *, min_chars: int | None = None, pattern: str | None = None, schema: Any = None) -> None:
        self.min_chars = min_chars
        self.pattern = re.compile(pattern) if pattern else None
        self.schema = None
        if schema is not None:
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
