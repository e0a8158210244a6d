"""OpenTelemetry spans for runs, turns, sub-calls and verification attempts; a no-op without the API.

Spans are made from the event stream after the fact (events carry their own timestamps), so
tracing adds nothing to the loop's hot path beyond one subscriber call per event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlmnb.events import Event, EventBus

__all__ = ["TRACER_NAME", "SpanRecorder", "attach"]

TRACER_NAME = "rlmnb"


def _tracer() -> Any:
    """rlmnb's tracer, or None when spans would go nowhere (no opentelemetry, or no SDK provider set)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    if type(trace.get_tracer_provider()).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        return None  # the API alone records nothing: skip the per-event work entirely
    return trace.get_tracer(TRACER_NAME)


def _ns(ts: float) -> int:
    return int(ts * 1e9)


class SpanRecorder:
    """Subscribes to a bus and turns events into spans nested run > turn > sub-call / attempt."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer
        self.runs: dict[str, Any] = {}
        self.turns: dict[str, Any] = {}
        self.calls: dict[str, Any] = {}

    def _context(self, span: Any) -> Any:
        return self._trace.set_span_in_context(span) if span is not None else None

    def __call__(self, event: Event) -> None:
        kind = event.kind
        base = {"rlmnb.run_id": event.run_id, "rlmnb.root_run_id": event.root_run_id, "rlmnb.depth": event.depth}
        if kind == "run_started":
            parent = self.turns.get(event.parent_run_id or "") or self.runs.get(event.parent_run_id or "")
            self.runs[event.run_id] = self.tracer.start_span(
                "rlm.run", context=self._context(parent), start_time=_ns(event.ts),
                attributes={**base, "rlmnb.model": getattr(event, "model", ""),
                            "rlmnb.label": getattr(event, "label", "")})
        elif kind == "turn_started":
            self._end_turn(event.run_id, event.ts)
            self.turns[event.run_id] = self.tracer.start_span(
                "rlm.turn", context=self._context(self.runs.get(event.run_id)), start_time=_ns(event.ts),
                attributes={**base, "rlmnb.turn": getattr(event, "turn", 0)})
        elif kind == "sub_call_started":
            parent = self.turns.get(event.run_id) or self.runs.get(event.run_id)
            self.calls[event.call_id] = self.tracer.start_span(  # type: ignore[attr-defined]
                "rlm.sub_call", context=self._context(parent), start_time=_ns(event.ts),
                attributes={**base, "rlmnb.model": getattr(event, "model", "")})
        elif kind == "sub_call_finished":
            span = self.calls.pop(event.call_id, None)  # type: ignore[attr-defined]
            if span is not None:
                usage = getattr(event, "usage", {}) or {}
                span.set_attribute("rlmnb.input_tokens", int(usage.get("input_tokens") or 0))
                span.set_attribute("rlmnb.output_tokens", int(usage.get("output_tokens") or 0))
                span.set_attribute("rlmnb.cost_usd", float(usage.get("cost_usd") or 0.0))
                span.set_attribute("rlmnb.cached", bool(getattr(event, "cached", False)))
                if getattr(event, "error", None):
                    span.set_attribute("rlmnb.error", str(event.error))  # type: ignore[attr-defined]
                span.end(end_time=_ns(event.ts))
        elif kind == "attempt_verified":
            parent = self.runs.get(event.run_id)
            span = self.tracer.start_span(
                "rlm.attempt", context=self._context(parent), start_time=_ns(event.ts),
                attributes={**base, "rlmnb.attempt": getattr(event, "attempt", 0),
                            "rlmnb.confidence": float(getattr(event, "confidence", 0.0)),
                            "rlmnb.accepted": bool(getattr(event, "accepted", False))})
            span.end(end_time=_ns(event.ts))
        elif kind == "run_finished":
            self._end_turn(event.run_id, event.ts)
            span = self.runs.pop(event.run_id, None)
            if span is not None:
                usage = getattr(event, "usage", {}) or {}
                for key in ("root_calls", "sub_calls", "input_tokens", "output_tokens"):
                    span.set_attribute(f"rlmnb.{key}", int(usage.get(key) or 0))
                span.set_attribute("rlmnb.cost_usd", float(usage.get("cost_usd") or 0.0))
                span.set_attribute("rlmnb.status", str(getattr(event, "status", "")))
                span.end(end_time=_ns(event.ts))

    def _end_turn(self, run_id: str, ts: float) -> None:
        span = self.turns.pop(run_id, None)
        if span is not None:
            span.end(end_time=_ns(ts))


def attach(bus: EventBus) -> Callable[[], None]:
    """Record spans for this bus's events when opentelemetry is installed; returns the detach function."""
    tracer = _tracer()
    if tracer is None:
        return lambda: None
    return bus.subscribe(SpanRecorder(tracer))
