"""The run tree: a trajectory's events folded into one view model of a run, in O(1) per event.

Every view of a run reads this one fold: the static HTML and text views, the MIME bundle and the
live widget (which feeds it from the run's thread). The browser twin is the extension's `fold.ts`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..events import Event, Trajectory
from .format import quote_notes, running_time
from .nodes import GroupNode, RunNode, Totals, TurnNode
from .readings import TreeReadings

__all__ = ["RunTree", "as_tree"]

_METERS = ("meters",)


class RunTree(TreeReadings):
    """Events folded into a run tree: runs > turns > sub-call groups > calls, child runs under turns.

    `add(event)` is O(1) and thread-safe, so it can be an `on_event` subscriber; it records which
    parts changed (`take_changes()`) so a live view redraws only those. The `*_view` methods (in
    `readings.py`) return plain dicts that the renderers (and tests) read.
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
        self._changes: set[tuple[Any, ...]] = set()
        self._handlers: dict[str, Callable[[Any], None]] = {
            "run_started": self._run_started, "turn_started": self._turn_started,
            "model_reply": self._model_reply, "code_executed": self._code_executed,
            "batch_started": self._batch_started, "batch_finished": self._batch_finished,
            "sub_call_started": self._sub_started, "sub_call_finished": self._sub_finished,
            "sub_call_sent": self._sub_sent,
            "guard_rejected": self._guard_rejected, "submitted": self._submitted,
            "turns_trimmed": self._trimmed, "fallback": self._fallback,
            "attempt_verified": self._verified, "run_finished": self._run_finished,
            "map_started": self._map_started, "map_finished": self._map_finished,
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
            run.turns = existing.turns
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
            turn.reply, turn.reply_usage, turn.reply_latency = e.text, e.usage, e.latency_s
            turn.reasoning = getattr(e, "reasoning", "")
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
        self._note(e, "rejected", f"submit rejected ({e.guard}): {e.reason}")

    def _submitted(self, e: Any) -> None:
        self._turn(e.run_id, e.turn, e.ts).submitted = True
        self._changes.add(("turn", e.run_id, e.turn))

    def _trimmed(self, e: Any) -> None:
        dropped = ", ".join(str(t) for t in e.dropped)
        self._note(e, "info", f"older turns dropped from the model's context to fit it: {dropped}")

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

    def _run_finished(self, e: Any) -> None:
        run = self._run(e.run_id, e.ts)
        run.status, run.answer, run.reason, run.error = e.status, e.answer, e.reason, e.error
        run.usage, run.finished = e.usage, e.ts
        if e.run_id == self.root_id and e.usage:
            u = e.usage
            t = self.totals
            t.input_tokens, t.output_tokens = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
            t.cost, t.unpriced = float(u.get("cost_usd", 0.0)), int(u.get("unpriced_calls", 0))
            t.root_calls = int(u.get("root_calls", t.root_calls))
        self._changes.update((("run", e.run_id), ("meters",)))


def as_tree(source: Trajectory | RunTree) -> RunTree:
    """A RunTree of `source`, folding it only when it is a Trajectory."""
    return source if isinstance(source, RunTree) else RunTree.from_trajectory(source)
