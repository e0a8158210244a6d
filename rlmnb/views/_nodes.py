"""The mutable nodes of a run tree: runs, turns, sub-call groups and the tree's live totals.

Only `RunTree` (views/fold.py) writes them, under its lock; readers get plain dicts from its `*_view`
methods, never a node, so a node can change while a view of it is being drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroupNode", "RunNode", "Totals", "TurnNode"]


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
    notes: list[tuple[str, str]] = field(default_factory=list)
    items: list[tuple[str, str]] = field(default_factory=list)  # ("group", key) | ("run", run_id)


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

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        cost = usage.get("cost_usd", 0.0)
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += float(cost)
