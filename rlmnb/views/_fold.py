"""The run tree: a trajectory's events folded into one view model of a run, in O(1) per event.

Every view of a run reads this one fold: the static HTML and text views, the MIME bundle and the
live widget (which feeds it from the run's thread). The browser twin is the extension's `fold.ts`;
tests/views/test_fold_parity.py checks that both give the same figures.

Entry points: `RunTree` (`add` an event; `take_changes`; the `*_view` readings, plain dicts the
renderers and tests read) and `as_tree`. Invariants: only `RunTree` writes its nodes, under its lock;
readers get plain dicts, never a node, so a node can change while a view of it is being drawn; each
reading takes the lock for as long as it reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rlmnb.events import Event, Trajectory
from rlmnb.views._format import ASKED_AGAIN, percentile, policy_note, quote_notes, running_time

__all__ = ["GroupNode", "RunNode", "RunTree", "Totals", "TurnNode", "as_tree", "out_counts", "told_sentence"]

_METERS = ("meters",)
# a record made before policies were (no PolicyActed): the guards evidence_check turned off then, whose send-backs
# said so; a run that records policies says it on the PolicyActed send-back (views._format.policy_note)
EVIDENCE_GUARDS = frozenset({"evidence", "copy", "marked", "reading", "guessed", "partial"})
EVIDENCE_HINT = " (you can turn these checks off: RLM(..., evidence_check=False) or %config RLMMagics.evidence_check = False)"
STREAM_KEEP = 20_000  # characters of a turn's streamed output kept per stream (the sandbox streams 10,000)
_TOLD = ("[timeout] ", "[notice] ")
_ASKED_AGAIN_NOTES = frozenset(("info", text) for text in ASKED_AGAIN.values())


def _added(earlier: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """`usage` with each number of `earlier` added to it (None and missing count as 0)."""
    if not earlier:
        return dict(usage)
    out = dict(usage)
    for key, value in earlier.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value + (out.get(key) or 0)
    return out


def told_sentence(observation: str) -> str:
    """What a timed-out turn's observation told the model about it: its [timeout] and [notice] lines."""
    return "\n".join(line.split("] ", 1)[1] for line in (observation or "").splitlines() if line.startswith(_TOLD))


@dataclass
class TurnNode:
    run_id: str
    turn: int
    max_turns: int
    started: float
    reply: str | None = None
    reply_usage: dict[str, Any] = field(default_factory=dict)
    reply_latency: float | None = None
    reasoning: str = ""
    code: str | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    error_type: str | None = None
    duration: float | None = None
    timed_out: bool = False
    restarted: bool = False
    executed: bool = False
    submitted: bool = False
    tables: list[dict[str, Any]] = field(default_factory=list)  # DataFrames the code printed (CodeExecuted.tables)
    # what the code printed while it ran (CodeOutput pieces, up to STREAM_KEEP characters a stream): shown until
    # its CodeExecuted brings the whole output, and kept as its output when the turn was cut short
    streamed_stdout: str = ""
    streamed_stderr: str = ""
    told: str = ""  # a timed-out turn: the sentence the model was told (its observation's [timeout] and [notice])
    notes: list[tuple[str, str]] = field(default_factory=list)
    items: list[tuple[str, str]] = field(default_factory=list)  # ("group", key) | ("run", run_id)
    sent_back: list[str] = field(default_factory=list)  # policies whose send-back's GuardRejected is still to come


@dataclass
class GroupNode:
    """The sub-calls of one llm_query_batched call, or all single llm_query calls of a turn."""

    key: str
    kind: str  # "batch" | "single"
    run_id: str
    turn: int
    size: int = 0
    model: str = ""
    call_ids: list[str] = field(default_factory=list)
    finished: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    cached: int = 0
    journal: int = 0  # calls a resumed run served from its journal (of `cached`)
    cached_input_tokens: int = 0  # input tokens read from the provider's prompt cache
    saved: float = 0.0  # what those saved against the full input rate
    latencies: list[float] = field(default_factory=list)  # provider (running) time of each call that had one
    queued_times: list[float] = field(default_factory=list)  # time each call waited for its slot (when recorded)
    sent: int = 0  # calls that got a concurrency slot (SubCallSent)
    sent_finished: int = 0  # of those, calls that finished
    done: bool = False
    wall: float | None = None
    refused: str | None = None
    started: float = 0.0  # when the group's first call (or its batch) started: the base of its rate and ETA
    retried: int = 0  # calls that needed more than one attempt
    rate_limited: int = 0  # of those, calls answered "429 rate limited" at least once
    change: tuple[str, str] = ("group", "")
    map_info: dict[str, Any] | None = None  # kind "map": the llm_map's operator and packing figures

    def __post_init__(self) -> None:
        self.change = ("group", self.key)


@dataclass
class RunNode:
    run_id: str
    parent_run_id: str | None
    parent_turn: int | None
    depth: int
    label: str
    question: str
    model: str
    sub_model: str
    sandbox: str
    limits: dict[str, Any]
    started: float
    finished: float | None = None
    status: str = "running"
    answer: Any = None
    reason: str = ""
    error: str | None = None
    usage: dict[str, Any] | None = None
    fallback: bool = False
    fallback_reply: str | None = None
    confinement: dict[str, Any] | None = None  # RunStarted.confinement (kernel sandbox confinement)
    turns: dict[int, TurnNode] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    policies_recorded: bool = False  # a PolicyActed was seen: its notes replace the ModelReply's asked-again ones


@dataclass
class Totals:
    """Live counters of the whole run tree; replaced by the root's usage when it finishes."""

    root_calls: int = 0
    sub_started: int = 0
    sub_finished: int = 0
    sub_errors: int = 0
    sub_sent: int = 0  # calls that got a concurrency slot (SubCallSent)
    sub_sent_finished: int = 0  # of those, calls that finished
    queue_recorded: bool = False  # a SubCallSent or a queued_s was seen: in flight and queued can be told apart
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    cached_input_tokens: int = 0  # read from the provider's prompt cache
    saved: float = 0.0  # what the prompt cache saved

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        self.cached_input_tokens += int(usage.get("cached_input_tokens") or 0)
        self.saved += float(usage.get("saved_usd") or 0.0)
        cost = usage.get("cost_usd", 0.0)
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += float(cost)


class RunTree:
    """Events folded into a run tree: runs > turns > sub-call groups > calls, child runs under turns.

    `add(event)` is O(1) and thread-safe, so it can be an `on_event` subscriber; it records which
    parts changed (`take_changes()`) so a live view redraws only those. The `*_view` methods return
    plain dicts that the renderers (and tests) read.
    """

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, RunNode] = {}
        self.root_id: str | None = None
        self.groups: dict[str, GroupNode] = {}
        # call_id -> [SubCallStarted, SubCallFinished | None, GroupNode, SubCallSent | None]
        self.calls: dict[str, list[Any]] = {}
        self.totals = Totals()
        self.events: list[Event] = []  # every event added, in order (what the trajectory JSON is made of)
        # when the user's cell started (set by the live widget): the root run's time is the time the user
        # waited, set-up before its first event (importing litellm, binding inputs) included
        self.opened: float | None = None
        # the root and sub model's names, known before the run's first event (the live header shows them)
        self.expected_models: tuple[str, str] = ("", "")
        # a resumed run's mark (RunResumed): where it went live, and what the journal served (resumed_view)
        self.resumed: dict[str, Any] | None = None
        self._changes: set[tuple[Any, ...]] = set()
        self._handlers: dict[str, Callable[[Any], None]] = {
            "run_started": self._run_started, "turn_started": self._turn_started,
            "model_reply": self._model_reply, "code_executed": self._code_executed,
            "code_output": self._code_output,
            "batch_started": self._batch_started, "batch_finished": self._batch_finished,
            "sub_call_started": self._sub_started, "sub_call_finished": self._sub_finished,
            "sub_call_sent": self._sub_sent,
            "guard_rejected": self._guard_rejected, "policy_acted": self._policy_acted, "submitted": self._submitted,
            "turns_trimmed": self._trimmed, "fallback": self._fallback,
            "attempt_verified": self._verified, "run_finished": self._run_finished,
            "map_started": self._map_started, "map_finished": self._map_finished,
            "run_resumed": self._run_resumed,
        }
        for event in events:
            self.add(event)

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory) -> RunTree:
        return cls(trajectory.events)

    # ---- feeding ---------------------------------------------------------------------------------
    def add(self, event: Event) -> None:
        handler = self._handlers.get(event.kind)
        with self.lock:
            self.events.append(event)
            if handler is not None:
                handler(event)

    def take_changes(self) -> set[tuple[Any, ...]]:
        """The parts changed since the last call: ("run", id), ("turns", id), ("turn", id, n),
        ("items", id, n), ("group", key); ("meters",) when any counter moved."""
        with self.lock:
            changes, self._changes = self._changes, set()
            return changes

    def _run(self, run_id: str, ts: float) -> RunNode:
        run = self.runs.get(run_id)
        if run is None:  # events of a run whose start we never saw (a view attached late)
            run = RunNode(run_id, None, None, 0, "", "", "", "", "", {}, ts)
            self.runs[run_id] = run
            if self.root_id is None:
                self.root_id = run_id
        return run

    def _turn(self, run_id: str, turn: int, ts: float) -> TurnNode:
        run = self._run(run_id, ts)
        node = run.turns.get(turn)
        if node is None:
            node = TurnNode(run_id, turn, int(run.limits.get("max_iterations") or 0), ts)
            run.turns[turn] = node
            self._changes.add(("turns", run_id))
        return node

    def _run_started(self, e: Any) -> None:
        cfg = e.config or {}
        limits = {k: cfg.get(k) for k in ("max_iterations", "max_llm_calls", "max_cost", "max_time", "max_tokens")}
        existing = self.runs.get(e.run_id)
        run = RunNode(e.run_id, e.parent_run_id, e.parent_turn, e.depth, e.label, e.question, e.model, e.sub_model,
                   e.sandbox, limits, e.ts)
        run.confinement = getattr(e, "confinement", None)
        if existing is not None:
            run.turns, run.policies_recorded = existing.turns, existing.policies_recorded
        self.runs[e.run_id] = run
        if self.root_id is None:
            self.root_id = e.run_id
        if e.parent_run_id is not None:
            parent = self._run(e.parent_run_id, e.ts)
            turn_no = e.parent_turn if e.parent_turn is not None else (max(parent.turns) if parent.turns else 0)
            turn = self._turn(e.parent_run_id, turn_no, e.ts)
            turn.items.append(("run", e.run_id))
            self._changes.add(("items", e.parent_run_id, turn_no))
        self._changes.update((("run", e.run_id), ("meters",)))

    def _turn_started(self, e: Any) -> None:
        turn = self._turn(e.run_id, e.turn, e.ts)
        turn.max_turns = e.max_turns
        self._changes.update((("turn", e.run_id, e.turn), ("meters",)))

    def _model_reply(self, e: Any) -> None:
        self.totals.root_calls += 1
        self.totals.add_usage(e.usage)
        if e.purpose == "turn":
            turn = self._turn(e.run_id, e.turn, e.ts)
            # a turn asked again (an empty or repeated reply) made two calls: its chip counts both
            turn.reply, turn.reply_usage = e.text, _added(turn.reply_usage, e.usage or {})
            turn.reply_latency = (turn.reply_latency or 0.0) + e.latency_s if e.latency_s is not None else None
            turn.reasoning = getattr(e, "reasoning", "")
            if not self.runs[e.run_id].policies_recorded:  # else its PolicyActed said which policy asked again
                turn.notes.extend(("info", ASKED_AGAIN[n]) for n in getattr(e, "notes", None) or [] if n in ASKED_AGAIN)
            self._changes.add(("turn", e.run_id, e.turn))
        else:
            self._run(e.run_id, e.ts).fallback_reply = e.text
            self._changes.add(("run", e.run_id))
        self._changes.add(("meters",))

    def _code_executed(self, e: Any) -> None:
        turn = self._turn(e.run_id, e.turn, e.ts)
        turn.code, turn.stdout, turn.stderr = e.code, e.stdout, e.stderr
        turn.error, turn.error_type, turn.duration = e.error, e.error_type, e.duration_s
        turn.timed_out, turn.restarted, turn.executed = e.timed_out, e.restarted, True
        turn.tables = list(getattr(e, "tables", None) or [])
        turn.told = told_sentence(e.observation) if e.timed_out else ""
        self._changes.add(("turn", e.run_id, e.turn))

    def _code_output(self, e: Any) -> None:
        turn = self._turn(e.run_id, e.turn, e.ts)
        if turn.executed:
            return  # a piece that arrived after the turn's result, which holds it
        if e.stream == "stderr":
            turn.streamed_stderr = (turn.streamed_stderr + e.text)[:STREAM_KEEP]
        else:
            turn.streamed_stdout = (turn.streamed_stdout + e.text)[:STREAM_KEEP]
        self._changes.add(("turn", e.run_id, e.turn))

    def _group(self, key: str, kind: str, run_id: str, turn_no: int, ts: float) -> GroupNode:
        group = self.groups.get(key)
        if group is None:
            group = GroupNode(key, kind, run_id, turn_no, started=ts)
            self.groups[key] = group
            self._turn(run_id, turn_no, ts).items.append(("group", key))
            self._changes.add(("items", run_id, turn_no))
        return group

    def _batch_started(self, e: Any) -> None:
        mapped = self.groups.get(getattr(e, "group", None) or "")
        if mapped is not None and mapped.kind == "map":  # a round of an llm_map: its calls join the map's group
            self.groups[e.batch_id] = mapped
            mapped.size += e.size
            mapped.model = mapped.model or e.model
            self._changes.add(mapped.change)
            return
        group = self._group(e.batch_id, "batch", e.run_id, e.turn, e.ts)
        group.size, group.model = e.size, e.model
        self._changes.add(("group", e.batch_id))

    def _batch_finished(self, e: Any) -> None:
        mapped = self.groups.get(e.batch_id)
        if mapped is not None and mapped.kind == "map":
            mapped.refused = e.refused or mapped.refused
            self._changes.add(mapped.change)
            return
        group = self._group(e.batch_id, "batch", e.run_id, e.turn, e.ts)
        group.done, group.wall, group.refused = True, e.latency_s, e.refused
        self._changes.add(("group", e.batch_id))

    def _map_started(self, e: Any) -> None:
        group = self._group(e.map_id, "map", e.run_id, e.turn, e.ts)
        group.map_info = {"operator": e.operator, "items": e.items, "packs": 0, "reasks": 0, "failures": 0,
                          "pack_tokens": e.pack_tokens, "pack_items": e.pack_items, "stopped": None}
        self._changes.add(group.change)

    def _map_finished(self, e: Any) -> None:
        group = self._group(e.map_id, "map", e.run_id, e.turn, e.ts)
        group.map_info = {**(group.map_info or {}), "items": e.items, "packs": e.packs, "reasks": e.reasks,
                          "failures": e.failures, "stopped": e.stopped}
        group.done, group.wall = True, e.latency_s
        self._changes.add(group.change)

    # the two handlers below run once per sub-call: keep them lean (no allocation beyond the record)
    def _sub_started(self, e: Any) -> None:
        key = e.batch_id
        group = self.groups.get(key) if key is not None else None
        if group is None:
            if key is None:
                key = f"{e.run_id}:t{e.turn}:single"
                group = self.groups.get(key) or self._group(key, "single", e.run_id, e.turn, e.ts)
            else:
                group = self._group(key, "batch", e.run_id, e.turn, e.ts)
        group.call_ids.append(e.call_id)
        if group.kind == "single":
            group.size += 1
            if not group.model:
                group.model = e.model
        self.calls[e.call_id] = [e, None, group, None]
        self.totals.sub_started += 1
        changes = self._changes
        changes.add(group.change)
        changes.add(_METERS)

    def _sub_sent(self, e: Any) -> None:
        record = self.calls.get(e.call_id)
        if record is None:
            return
        record[3] = e
        group: GroupNode = record[2]
        group.sent += 1
        totals = self.totals
        totals.sub_sent += 1
        totals.queue_recorded = True
        changes = self._changes
        changes.add(group.change)
        changes.add(_METERS)

    def _sub_finished(self, e: Any) -> None:
        record = self.calls.get(e.call_id)
        if record is None:
            return
        record[1] = e
        group: GroupNode = record[2]
        group.finished += 1
        if record[3] is not None:
            group.sent_finished += 1
            self.totals.sub_sent_finished += 1
        queued = getattr(e, "queued_s", None)
        if queued is not None:
            group.queued_times.append(queued)
            self.totals.queue_recorded = True
        usage = e.usage
        totals = self.totals
        tokens_in = usage.get("input_tokens") or 0
        tokens_out = usage.get("output_tokens") or 0
        group.input_tokens += tokens_in
        group.output_tokens += tokens_out
        totals.input_tokens += tokens_in
        totals.output_tokens += tokens_out
        if "cached_input_tokens" in usage:  # a prompt-cache read (its saving is recorded only then)
            prompt_cached, saved = usage["cached_input_tokens"] or 0, usage.get("saved_usd") or 0.0
            group.cached_input_tokens += prompt_cached
            totals.cached_input_tokens += prompt_cached
            group.saved += saved
            totals.saved += saved
        cost = usage.get("cost_usd", 0.0)
        if cost is None:
            group.unpriced += 1
            totals.unpriced += 1
        elif cost:
            group.cost += cost
            totals.cost += cost
        if e.cached:
            group.cached += 1
        meta = e.meta
        if meta and meta.get("resumed"):
            group.journal += 1
        if meta and meta.get("retries"):
            group.retried += 1
            if meta.get("rate_limited"):
                group.rate_limited += 1
        running = running_time(e.latency_s, queued, e.cached)
        if running is not None:
            group.latencies.append(running)
        totals.sub_finished += 1
        if e.error is not None:
            group.errors += 1
            totals.sub_errors += 1
        changes = self._changes
        changes.add(group.change)
        changes.add(_METERS)

    def _note(self, e: Any, kind: str, text: str) -> None:
        self._turn(e.run_id, e.turn, e.ts).notes.append((kind, text))
        self._changes.add(("turn", e.run_id, e.turn))

    def _guard_rejected(self, e: Any) -> None:
        turn = self._turn(e.run_id, e.turn, e.ts)
        if e.guard in turn.sent_back:  # a policy's send-back: its PolicyActed note said it, with the switch
            turn.sent_back.remove(e.guard)
            return
        hint = EVIDENCE_HINT if e.guard in EVIDENCE_GUARDS else ""
        self._note(e, "rejected", f"submit rejected ({e.guard}): {e.reason}{hint}")

    def _policy_acted(self, e: Any) -> None:
        """A policy's note on its turn (views._format.policy_note). Said once: the first PolicyActed of a run drops
        its turn's asked-again notes from the ModelReply (later ones are not added), and a send-back's GuardRejected,
        which follows it, adds no note of its own."""
        run = self._run(e.run_id, e.ts)
        turn = self._turn(e.run_id, e.turn, e.ts)
        if not run.policies_recorded:
            run.policies_recorded = True
            turn.notes = [note for note in turn.notes if note not in _ASKED_AGAIN_NOTES]
        if e.action == "send_back":
            turn.sent_back.append(e.policy)
        turn.notes.append(policy_note(e.policy, e.action, e.detail or ""))
        self._changes.add(("turn", e.run_id, e.turn))

    def _submitted(self, e: Any) -> None:
        self._turn(e.run_id, e.turn, e.ts).submitted = True
        self._changes.add(("turn", e.run_id, e.turn))

    def _trimmed(self, e: Any) -> None:
        said = [f"older turns dropped from the model's context to fit it: {', '.join(str(t) for t in e.dropped)}"
                ] if e.dropped else []
        clipped = getattr(e, "clipped", None) or []
        if clipped:
            said.append(f"outputs cut in the middle to fit the model's context: turn {', '.join(map(str, clipped))}")
        self._note(e, "info", "; ".join(said))

    def _fallback(self, e: Any) -> None:
        run = self._run(e.run_id, e.ts)
        run.fallback = True
        run.notes.append(f"fallback: {e.reason}")
        self._changes.add(("run", e.run_id))

    def _verified(self, e: Any) -> None:
        run = self._run(e.run_id, e.ts)
        verdict = "accepted" if e.accepted else "rejected"
        run.notes.append(f"attempt {e.attempt} {verdict} (confidence {e.confidence:.2f}) {e.reason}".strip())
        run.notes.extend(quote_notes(getattr(e, "details", None) or {}))
        self._changes.add(("run", e.run_id))

    def _run_resumed(self, e: Any) -> None:
        """The mark sits before the turn whose root request went live, inside it (after its reply, before its
        sub-calls) when one of its sub-calls did, and after the last turn when nothing went live."""
        run = self._run(e.run_id, e.ts)
        turn = max(run.turns) if run.turns and getattr(e, "live", True) else None
        within = turn is not None and run.turns[turn].reply is not None
        self.resumed = {"source": e.source, "root_answers": e.root_answers, "sub_answers": e.sub_answers,
                        "served_root": e.served_root, "served_sub": e.served_sub, "live": getattr(e, "live", True),
                        "run_id": e.run_id, "turn": turn, "within": within}
        self._changes.update((("turns", e.run_id), ("run", e.run_id), ("meters",)))
        self._changes.update(("turn", e.run_id, n) for n in run.turns)  # turns before it read "from the journal"
        if turn is not None:
            self._changes.add(("items", e.run_id, turn))

    def _run_finished(self, e: Any) -> None:
        run = self._run(e.run_id, e.ts)
        run.status, run.answer, run.reason, run.error = e.status, e.answer, e.reason, e.error
        run.usage, run.finished = e.usage, e.ts
        if e.run_id == self.root_id and e.usage:
            u = e.usage
            t = self.totals
            t.input_tokens, t.output_tokens = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
            t.cost, t.unpriced = float(u.get("cost_usd", 0.0)), int(u.get("unpriced_calls", 0))
            t.cached_input_tokens = int(u.get("cached_input_tokens") or 0)
            t.saved = float(u.get("saved_usd") or 0.0)
            t.root_calls = int(u.get("root_calls", t.root_calls))
        self._changes.update((("run", e.run_id), ("meters",)))

    # ---- reading ---------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        root = self.runs.get(self.root_id or "")
        return root is not None and root.status != "running"

    def run_view(self, run_id: str | None = None, now: float | None = None) -> dict[str, Any]:
        with self.lock:
            run = self.runs.get(run_id or self.root_id or "")
            if run is None:
                waited = (now if now is not None else time.time()) - self.opened if self.opened is not None else 0.0
                model, sub = self.expected_models
                return {"run_id": None, "status": "waiting", "question": "", "model": model, "sub_model": sub,
                        "label": "", "elapsed": max(0.0, waited), "setup": 0.0, "depth": 0, "turns": 0, "answer": None, "has_answer": False,
                        "reason": "", "error": None, "notes": [], "fallback": False, "sandbox": ""}
            opened = self.opened if run.run_id == self.root_id and self.opened is not None else None
            if run.finished is not None:
                elapsed = (run.usage or {}).get("wall_s") or (run.finished - run.started)
                if opened is not None:
                    elapsed = max(elapsed, run.finished - opened)
            else:
                elapsed = (now if now is not None else time.time()) - (opened if opened is not None else run.started)
            setup = max(0.0, run.started - opened) if opened is not None else 0.0
            has_answer = run.status in ("submitted", "fallback") or run.answer is not None
            return {"run_id": run.run_id, "status": run.status, "question": run.question, "model": run.model,
                    "sub_model": run.sub_model, "label": run.label, "sandbox": run.sandbox,
                    "elapsed": max(0.0, float(elapsed)), "depth": run.depth, "turns": len(run.turns),
                    "answer": run.answer, "has_answer": has_answer, "reason": run.reason, "error": run.error,
                    "notes": list(run.notes), "fallback": run.fallback, "parent_run_id": run.parent_run_id,
                    "confinement": run.confinement,
                    "setup": setup}

    def meters_view(self, now: float | None = None) -> dict[str, Any]:
        """Budget meters of the whole tree: limits come from the root run's settings."""
        elapsed = self.run_view(now=now)["elapsed"]
        with self.lock:
            root = self.runs.get(self.root_id or "")
            limits = root.limits if root is not None else {}
            t = self.totals
            turns = max((n for n in root.turns), default=0) if root is not None else 0
            max_turns = limits.get("max_iterations")
            if root is not None and root.turns:
                max_turns = root.turns[max(root.turns)].max_turns or max_turns
            return {"turns": turns, "max_turns": max_turns,
                    "sub_calls": t.sub_started, "sub_calls_done": t.sub_finished, "sub_errors": t.sub_errors,
                    **dict(zip(("sub_calls_in_flight", "sub_calls_queued"),
                               out_counts(t.sub_started, t.sub_finished, t.sub_sent, t.sub_sent_finished,
                                    t.queue_recorded), strict=True)),
                    "max_llm_calls": limits.get("max_llm_calls"), "root_calls": t.root_calls,
                    "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
                    "max_tokens": limits.get("max_tokens"), "cost": t.cost, "unpriced": t.unpriced,
                    "cached_input_tokens": t.cached_input_tokens, "saved": t.saved,
                    "max_cost": limits.get("max_cost"), "elapsed": elapsed,
                    "max_time": limits.get("max_time"),
                    "ended": root is not None and root.status != "running"}

    def resumed_view(self, run_id: str | None = None) -> dict[str, Any] | None:
        """A resumed run's mark, when `run_id` (default: the root run) has one: `source` (the journal),
        `served_root` / `served_sub` (what it served before the mark), `live` (False: nothing went live),
        and where it sits: before turn `turn`, inside it when `within`, after the last turn when `turn` is None."""
        with self.lock:
            mark = self.resumed
            if mark is None or mark["run_id"] != (run_id or self.root_id):
                return None
            return dict(mark)

    def turn_numbers(self, run_id: str | None = None) -> list[int]:
        with self.lock:
            run = self.runs.get(run_id or self.root_id or "")
            return sorted(run.turns) if run is not None else []

    def turn_view(self, run_id: str, turn: int) -> dict[str, Any]:
        with self.lock:
            node = self.runs[run_id].turns[turn]
            return {"run_id": run_id, "turn": node.turn, "max_turns": node.max_turns, "reply": node.reply,
                    "reply_usage": dict(node.reply_usage), "reply_latency": node.reply_latency,
                    "code": node.code, "stdout": node.stdout, "stderr": node.stderr, "error": node.error,
                    "error_type": node.error_type, "duration": node.duration, "timed_out": node.timed_out,
                    "restarted": node.restarted, "executed": node.executed, "submitted": node.submitted,
                    "notes": list(node.notes), "reasoning": node.reasoning, "tables": list(node.tables),
                    "streamed_stdout": node.streamed_stdout, "streamed_stderr": node.streamed_stderr,
                    "told": node.told}

    def turn_items(self, run_id: str, turn: int) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.runs[run_id].turns[turn].items)

    def group_view(self, key: str, now: float | None = None) -> dict[str, Any]:
        """A group's figures; while a batch runs, also its rate (replies a second) and ETA, as tqdm shows them."""
        with self.lock:
            g = self.groups[key]
            latencies = list(g.latencies)
            view: dict[str, Any] = {
                    "key": g.key, "kind": g.kind, "run_id": g.run_id, "turn": g.turn, "size": g.size,
                    "model": g.model, "started": len(g.call_ids), "finished": g.finished, "errors": g.errors,
                    "input_tokens": g.input_tokens, "output_tokens": g.output_tokens, "cost": g.cost,
                    "unpriced": g.unpriced, "cached": g.cached, "journal": g.journal,
                    "cached_input_tokens": g.cached_input_tokens, "saved": g.saved, "done": g.done, "wall": g.wall,
                    "refused": g.refused, "map": dict(g.map_info) if g.map_info is not None else None,
                    "retried": g.retried, "rate_limited": g.rate_limited,
                    "rate": None, "eta": None}
            view["in_flight"], view["queued"] = out_counts(len(g.call_ids), g.finished, g.sent, g.sent_finished,
                                                     self.totals.queue_recorded)
            owner = self.runs.get(g.run_id)
            view["ended"] = owner is not None and owner.status != "running"  # its calls out are cancelled
            queued_times = sorted(g.queued_times)
            running = not g.done and g.finished < max(g.size, len(g.call_ids)) and \
                self.runs.get(g.run_id) is not None and self.runs[g.run_id].status == "running"
            if running and g.finished:
                spent = (now if now is not None else time.time()) - g.started
                if spent > 0:
                    rate = g.finished / spent
                    view["rate"], view["eta"] = rate, (max(g.size, len(g.call_ids)) - g.finished) / rate
        latencies.sort()
        view["p50"], view["p95"] = percentile(latencies, 50), percentile(latencies, 95)
        view["queued_p50"], view["queued_p95"] = percentile(queued_times, 50), percentile(queued_times, 95)
        return view

    def call_views(self, key: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """Calls of one group, in the order they started (index is 1-based within the group)."""
        with self.lock:
            ids = self.groups[key].call_ids[start:stop]
            records = [self.calls[i] for i in ids]
            recorded = self.totals.queue_recorded
        out = []
        for index, (s, f, _group, sent) in enumerate(records, start=start + 1):
            usage = f.usage if f is not None else {}
            queued = getattr(f, "queued_s", None) if f is not None else None
            out.append({"index": index, "call_id": s.call_id, "model": s.model, "prompt": s.prompt,
                        "prompt_chars": s.prompt_chars, "done": f is not None,
                        "images": list(getattr(s, "images", None) or []),
                        "reply": f.reply if f is not None else None, "error": f.error if f is not None else None,
                        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                        "cost": usage.get("cost_usd"),
                        "cached_input_tokens": int(usage.get("cached_input_tokens") or 0),
                        "saved": float(usage.get("saved_usd") or 0.0),
                        # latency: the provider's time (None: it had none, or no reply yet); queued: the wait
                        # for a slot (None: not recorded, in runs saved before it was)
                        "latency": running_time(f.latency_s, queued, bool(f.cached)) if f is not None else None,
                        "queued": queued, "sent": sent is not None,
                        "waiting": recorded and f is None and sent is None,  # queued for a slot right now
                        "cached": bool(f.cached) if f is not None else False,
                        "journal": bool((f.meta or {}).get("resumed")) if f is not None else False,
                        "retries": int((f.meta or {}).get("retries") or 0) if f is not None else 0,
                        "rate_limited": int((f.meta or {}).get("rate_limited") or 0) if f is not None else 0,
                        "started": s.ts, "finished": f.ts if f is not None else None,
                        "run_id": s.run_id, "turn": s.turn})
        return out

    def all_call_views(self) -> list[dict[str, Any]]:
        """Every sub-call of the tree, group by group in the order the groups started (for the trace view:
        built on demand, never per event)."""
        with self.lock:
            keys = list(self.groups)
        out: list[dict[str, Any]] = []
        for key in keys:
            out.extend(self.call_views(key))
        return out


def as_tree(source: Trajectory | RunTree) -> RunTree:
    """A RunTree of `source`, folding it only when it is a Trajectory."""
    return source if isinstance(source, RunTree) else RunTree.from_trajectory(source)


def out_counts(started: int, finished: int, sent: int, sent_finished: int, recorded: bool) -> tuple[int, int]:
    """(in flight, queued): calls holding a concurrency slot, and calls started but still waiting for one.
    A trajectory saved before slots were recorded counts every unfinished call as in flight, as it did."""
    if not recorded:
        return started - finished, 0
    in_flight = sent - sent_finished
    return in_flight, max(0, started - finished - in_flight)
