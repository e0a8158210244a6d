"""Typed, frozen event records, the `Trajectory` that holds them, and the bus that emits them.

One JSON format (`Trajectory.to_dict`) serves the widget, the HTML view, export files, the JupyterLab
renderer and replay. Every event names its run (`run_id`, `parent_run_id`, `root_run_id`, `depth`)
so child runs nest into one tree. Bump SCHEMA_VERSION on any incompatible change.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

SCHEMA_VERSION = 1
MIME_TYPE = "application/vnd.rlmnb.trajectory+json"

RunStatus = Literal["submitted", "fallback", "budget_exhausted", "error", "interrupted"]
"""How a run ended: an accepted submit(), the fallback answer after the turns ran out, the budget ran out,
terminal trouble, or the user interrupted it."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event carries."""

    kind: ClassVar[str] = "event"
    seq: int
    ts: float
    run_id: str
    parent_run_id: str | None = None
    root_run_id: str
    depth: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind}
        out.update({name: getattr(self, name) for name in _field_names(type(self))})
        return out


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """An event class's field names, looked up once (to_dict runs for every event a journal writes)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    question: str
    model: str
    sub_model: str
    sandbox: str
    inputs: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    parent_turn: int | None = None
    label: str = ""
    schema: dict[str, Any] | None = None  # {"name": ..., "json_schema": ...} when answers are validated
    verify: dict[str, Any] | None = None  # the guard's description (verify.describe_guard)
    confinement: dict[str, Any] | None = None  # sandbox.confinement.Confinement.to_dict(); None in older runs


@dataclass(frozen=True, kw_only=True)
class TurnStarted(Event):
    kind: ClassVar[str] = "turn_started"
    turn: int
    max_turns: int


@dataclass(frozen=True, kw_only=True)
class ModelReply(Event):
    kind: ClassVar[str] = "model_reply"
    turn: int
    text: str
    usage: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    purpose: str = "turn"  # "turn" | "fallback" | "judge"
    request_sha: str = ""
    finish_reason: str | None = None  # the provider's: "stop", "length" (cut at max_tokens), "content_filter"...
    reasoning: str = ""  # thinking returned beside the answer, or found in <think> blocks (not kept in the history)
    notes: list[str] = field(default_factory=list)  # how the harness read it: replies.Step.notes, "empty_retried"


@dataclass(frozen=True, kw_only=True)
class CodeExecuted(Event):
    kind: ClassVar[str] = "code_executed"
    turn: int
    code: str
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    error_type: str | None = None
    duration_s: float = 0.0
    timed_out: bool = False
    restarted: bool = False
    observation: str = ""
    repeat_of: int | None = None  # the earlier turn whose code (comments aside) and output this repeats
    # DataFrames and Series the code printed, each with the text it wrote to stdout (the views draw them as
    # tables where they find that text; the model reads the text): _sandbox/runner.table_record
    tables: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class CodeOutput(Event):
    """A piece of what a turn's code printed, sent while the code still runs (the sandbox's output stream).

    Pieces arrive in order, a few a second at most, each a few thousand characters at most, and only the
    first part of a long output is streamed. The turn's CodeExecuted holds its whole output when the code
    returns; a turn cut short (the stop button, a lost kernel) keeps these pieces as what it printed.
    Trajectories saved before this event existed have none.
    """

    kind: ClassVar[str] = "code_output"
    turn: int
    text: str
    stream: str = "stdout"  # "stdout" | "stderr"


@dataclass(frozen=True, kw_only=True)
class BatchStarted(Event):
    kind: ClassVar[str] = "batch_started"
    batch_id: str
    turn: int
    size: int
    model: str = ""
    group: str | None = None  # the llm_map this batch belongs to (its map_id), if any


@dataclass(frozen=True, kw_only=True)
class BatchFinished(Event):
    kind: ClassVar[str] = "batch_finished"
    batch_id: str
    turn: int
    size: int
    errors: int = 0
    latency_s: float = 0.0
    refused: str | None = None


@dataclass(frozen=True, kw_only=True)
class SubCallStarted(Event):
    kind: ClassVar[str] = "sub_call_started"
    call_id: str
    batch_id: str | None = None
    turn: int
    model: str = ""
    prompt: str = ""
    prompt_chars: int = 0
    prompt_sha: str = ""
    images: list[dict[str, Any]] = field(default_factory=list)  # Image.describe() of each image sent


@dataclass(frozen=True, kw_only=True)
class SubCallSent(Event):
    """A sub-call got its concurrency slot and went to the provider (its queued time ends here).

    Cached calls and calls served by an identical call in flight are never sent. Trajectories saved
    before this event existed have none: views then count a started call as in flight, as they did.
    """

    kind: ClassVar[str] = "sub_call_sent"
    call_id: str  # its batch and turn are on its SubCallStarted (one event a call: kept small)


@dataclass(frozen=True, kw_only=True)
class SubCallFinished(Event):
    kind: ClassVar[str] = "sub_call_finished"
    call_id: str
    batch_id: str | None = None
    turn: int
    reply: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    # the provider's time: from the slot to the reply, retries and the "asked again" call included;
    # 0.0 for a call never sent (cached, or served by an identical call in flight)
    latency_s: float = 0.0
    cached: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # seconds from SubCallStarted to the slot (waiting for the concurrency limit; for a call never sent,
    # the whole wait). None in trajectories saved before it existed: their latency_s includes the queue.
    queued_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class GuardRejected(Event):
    kind: ClassVar[str] = "guard_rejected"
    turn: int
    guard: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class PolicyActed(Event):
    """A turn-loop policy acted (`RLMConfig.policies`): `action` is one of "note" (a line added to the turn's
    observation), "send_back" (a submitted answer went back to the model; a GuardRejected with the policy's name
    follows), "ask_again" (a reply was not used and the model was asked again), "answer" (a reply without code
    ended the run as its answer), "end_turns" (the turns ended; the final answer follows) or "read_first" (evidence
    gathered before the first turn). `detail` is what the model was told, or why."""
    kind: ClassVar[str] = "policy_acted"
    turn: int
    policy: str
    action: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Submitted(Event):
    kind: ClassVar[str] = "submitted"
    turn: int
    answer: Any = None


@dataclass(frozen=True, kw_only=True)
class TurnsTrimmed(Event):
    kind: ClassVar[str] = "turns_trimmed"
    turn: int
    dropped: list[int] = field(default_factory=list)
    clipped: list[int] = field(default_factory=list)  # kept turns whose observation was cut in the middle to fit
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(frozen=True, kw_only=True)
class ConcurrencyChanged(Event):
    kind: ClassVar[str] = "concurrency_changed"
    limit: int
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Fallback(Event):
    kind: ClassVar[str] = "fallback"
    answer: Any = None
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class AttemptVerified(Event):
    kind: ClassVar[str] = "attempt_verified"
    attempt: int
    confidence: float
    reason: str = ""
    accepted: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # e.g. QuotesFound's per-quote findings


@dataclass(frozen=True, kw_only=True)
class MapStarted(Event):
    """An llm_map / llm_classify / llm_filter began; its batches carry `group=map_id`."""

    kind: ClassVar[str] = "map_started"
    map_id: str
    turn: int
    operator: str = "llm_map"
    instruction: str = ""
    output: str = ""
    items: int | None = None  # None when a streamed table's length is not known up front
    pack_tokens: int = 0
    pack_items: int = 0


@dataclass(frozen=True, kw_only=True)
class MapFinished(Event):
    """The packing figures of one map: what a view shows for the group."""

    kind: ClassVar[str] = "map_finished"
    map_id: str
    turn: int
    items: int = 0
    packs: int = 0
    reasks: int = 0
    failures: int = 0
    calls: int = 0
    latency_s: float = 0.0
    stopped: str | None = None  # why the map ended early (e.g. the budget ran out)
    errors: list[dict[str, Any]] = field(default_factory=list)  # the first failed items: {"item", "reason"}


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    status: RunStatus
    answer: Any = None
    usage: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    error: str | None = None
    verified: bool | None = None


@dataclass(frozen=True, kw_only=True)
class RunResumed(Event):
    """A resumed run (api.RLM.resume) sent its first live request here; what came before was served from
    the journal `source`, which held `root_answers` root replies and `sub_answers` sub-call answers.
    A resumed run that never sent a live request emits it as its first round ends, with `live` False."""

    kind: ClassVar[str] = "run_resumed"
    source: str
    root_answers: int = 0
    sub_answers: int = 0
    served_root: int = 0  # served from the journal before this point
    served_sub: int = 0
    live: bool = True  # False: every request of the run was served from the journal


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (RunStarted, TurnStarted, ModelReply, CodeExecuted, CodeOutput, BatchStarted, BatchFinished,
                SubCallStarted, SubCallSent, SubCallFinished, GuardRejected, PolicyActed, Submitted, TurnsTrimmed, ConcurrencyChanged, Fallback,
                AttemptVerified, RunFinished, MapStarted, MapFinished, RunResumed)
}

E = TypeVar("E", bound=Event)


def event_from_dict(data: dict[str, Any]) -> Event:
    kind = data.get("kind")
    cls = EVENT_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


class Trajectory:
    """The append-only record of a run tree. Safe to append from several threads."""

    def __init__(self, events: list[Event] | None = None) -> None:
        self._events: list[Event] = list(events or [])
        self._lock = threading.Lock()

    # ---- building --------------------------------------------------------------------------------
    def append(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def of(self, cls: type[E], run_id: str | None = None) -> list[E]:
        return [e for e in self.events if isinstance(e, cls) and (run_id is None or e.run_id == run_id)]

    # ---- reading ---------------------------------------------------------------------------------
    @property
    def root_run_id(self) -> str | None:
        starts = self.of(RunStarted)
        return starts[0].root_run_id if starts else None

    def run_ids(self) -> list[str]:
        return [e.run_id for e in self.of(RunStarted)]

    def children(self, run_id: str) -> list[RunStarted]:
        return [e for e in self.of(RunStarted) if e.parent_run_id == run_id]

    def final(self, run_id: str | None = None) -> RunFinished | None:
        rid = run_id or self.root_run_id
        done = [e for e in self.of(RunFinished) if e.run_id == rid]
        return done[-1] if done else None

    def sub_calls(self) -> list[dict[str, Any]]:
        """One dict per sub-call, start and finish joined (the shape of `to_frame()`).

        `cached_input_tokens` / `saved_usd`: input tokens the provider read from its prompt cache and
        what that saved; `cached`: answered by rlmnb's response cache (or, with `journal`, by the
        journal of a resumed run), so nothing was sent.
        """
        finished = {e.call_id: e for e in self.of(SubCallFinished)}
        rows = []
        for s in self.of(SubCallStarted):
            f = finished.get(s.call_id)
            usage = f.usage if f else {}
            rows.append({
                "run_id": s.run_id, "depth": s.depth, "turn": s.turn, "batch_id": s.batch_id,
                "call_id": s.call_id, "model": s.model, "prompt": s.prompt, "prompt_chars": s.prompt_chars,
                "reply": f.reply if f else None, "error": f.error if f else None,
                "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                "cached_input_tokens": usage.get("cached_input_tokens", 0) if f else None,
                "cost_usd": usage.get("cost_usd"), "saved_usd": usage.get("saved_usd", 0.0) if f else None,
                "cached": f.cached if f else False, "journal": bool(f.meta.get("resumed")) if f else False,
                "latency_s": f.latency_s if f else None,
                "queued_s": f.queued_s if f else None,
            })
        return rows

    def root_calls(self) -> list[dict[str, Any]]:
        """One dict per root-model reply (turns, fallbacks, judges; child runs' too), in order: its tokens,
        the part read from the provider's prompt cache, cost, saving and time."""
        rows = []
        for r in self.of(ModelReply):
            usage = r.usage
            rows.append({
                "run_id": r.run_id, "depth": r.depth, "turn": r.turn, "purpose": r.purpose,
                "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                "cached_input_tokens": usage.get("cached_input_tokens", 0), "cost_usd": usage.get("cost_usd"),
                "saved_usd": usage.get("saved_usd", 0.0), "cached": bool(usage.get("cached")),
                "latency_s": r.latency_s, "finish_reason": r.finish_reason,
            })
        return rows

    def to_frame(self, calls: Literal["sub", "root", "all"] = "sub") -> Any:
        """A pandas DataFrame with one row per sub-call (`calls="sub"`), per root-model reply (`"root"`), or
        both (`"all"`, with a `call` column saying which: root replies first)."""
        import pandas as pd

        if calls == "sub":
            return pd.DataFrame(self.sub_calls())
        if calls == "root":
            return pd.DataFrame(self.root_calls())
        if calls == "all":
            rows = [{"call": "root", **row} for row in self.root_calls()]
            rows += [{"call": "sub", **row} for row in self.sub_calls()]
            return pd.DataFrame(rows)
        raise ValueError(f"to_frame(calls={calls!r}): say 'sub' (one row per sub-call), 'root' or 'all'.")

    # ---- serialising -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "events": [e.to_dict() for e in self.events]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"trajectory schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
        # events of a kind this version does not know (written by a newer rlmnb) are skipped, not fatal
        return cls([event_from_dict(e) for e in data.get("events", []) if e.get("kind") in EVENT_TYPES])

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        source = Path(path)
        if not source.is_file():
            raise FileNotFoundError(f"No trajectory file at {source}; check the path.")
        data = json.loads(source.read_text(encoding="utf-8"))
        if "trajectory" in data and "events" not in data:  # a saved RunResult
            data = data["trajectory"]
        return cls.from_dict(data)

    def __repr__(self) -> str:
        return f"Trajectory({len(self)} events, {len(self.run_ids())} run(s))"


Subscriber = Callable[[Event], None]


class EventBus:
    """Numbers events, appends them to the trajectory and hands them to subscribers.

    A subscriber that raises is dropped after its first error, so a broken view never stops a run; the
    error is logged once (logger "rlmnb", with its traceback) and kept in `subscriber_errors`, which
    RunResult reports.
    """

    def __init__(self, trajectory: Trajectory | None = None) -> None:
        self.trajectory = trajectory if trajectory is not None else Trajectory()
        self._seq = itertools.count(len(self.trajectory))
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self.subscriber_errors: list[str] = []

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def emit(self, cls: type[E], scope: RunScope, **fields: Any) -> E:
        with self._lock:
            event = cls(seq=next(self._seq), ts=time.time(), run_id=scope.run_id, parent_run_id=scope.parent_run_id,
                        root_run_id=scope.root_run_id, depth=scope.depth, **fields)
            self.trajectory.append(event)
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(event)
            except Exception as exc:  # a view must never break the run
                import logging
                import traceback

                text = "".join(traceback.format_exception(exc))
                name = getattr(fn, "__qualname__", None) or type(fn).__name__
                self.subscriber_errors.append(f"{name} at a {event.kind} event: {text}")
                logging.getLogger("rlmnb").error("The event subscriber %s raised at a %s event and gets no more "
                                                 "events of this run:\n%s", name, event.kind, text)
                with self._lock:
                    if fn in self._subscribers:
                        self._subscribers.remove(fn)
        return event


@dataclass(frozen=True)
class RunScope:
    """Where an event belongs in the run tree."""

    run_id: str
    root_run_id: str
    parent_run_id: str | None = None
    depth: int = 0


__all__ = [
    "AttemptVerified", "BatchFinished", "BatchStarted", "CodeExecuted", "CodeOutput", "ConcurrencyChanged",
    "EVENT_TYPES", "Event", "EventBus", "Fallback", "GuardRejected", "MIME_TYPE", "MapFinished", "PolicyActed",
    "MapStarted", "ModelReply", "RunFinished", "RunResumed", "RunScope", "RunStarted", "RunStatus", "SCHEMA_VERSION",
    "SubCallFinished", "SubCallSent", "SubCallStarted", "Submitted", "Trajectory", "TurnStarted",
    "TurnsTrimmed", "event_from_dict",
]
