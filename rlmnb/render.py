"""Static views of a trajectory: a script-free HTML tree, a terminal text view and a MIME bundle.

Nothing here needs a kernel or a widget library, so the CLI, saved notebooks and the JupyterLab
extension share it with the live widget. `RunTree` folds events into a run tree in O(1) per event
(the widget feeds it live from the run's thread); the `render_*` functions read it.

Public: `render_html(trajectory, full_page=False)`, `render_text(trajectory)`,
`mime_bundle(trajectory)`, `summary_line(trajectory)`, `TrajectoryView`, `RunTree`.
"""

from __future__ import annotations

import html
import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .events import MIME_TYPE, Event, Trajectory

__all__ = ["MIME_TYPE", "RunTree", "TrajectoryView", "compact_trajectory", "mime_bundle", "render_html",
           "render_text", "summary_line"]

# ---- limits of the static views ------------------------------------------------------------------
CALLS_SHOWN = 20          # sub-calls listed per group in the static HTML (the JSON part has them all)
TEXT_CHARS = 20_000       # reply, code and output characters shown per turn
CALL_TEXT_CHARS = 2_000   # prompt and reply characters shown per sub-call
JSON_CALL_CHARS = 1_000   # prompt and reply characters kept per sub-call in the saved MIME JSON
JSON_TEXT_CHARS = 20_000  # other strings kept in the saved MIME JSON

_METERS = ("meters",)
_CALL_TEXT_FIELDS = ("prompt",)  # replies and errors stay whole: replay serves them from the record
_REPLAY_FIELDS = {"model_reply": ("text",)}  # root replies stay whole for the same reason

STATUS_COLORS = {"running": "#1976d2", "submitted": "#2e7d32", "fallback": "#ef6c00",
                 "budget_exhausted": "#ef6c00", "interrupted": "#757575", "error": "#c62828"}
STATUS_LABELS = {"running": "running", "submitted": "answered", "fallback": "fallback answer",
                 "budget_exhausted": "budget exhausted", "interrupted": "interrupted", "error": "error"}


# ==================================================================================================
# formatting helpers


def fmt_count(n: int | float | None) -> str:
    """12,345 below 100k, then 123.4k / 1.23M."""
    if n is None:
        return "?"
    n = int(n)
    if n < 100_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1e3:.1f}k"
    return f"{n / 1e6:.2f}M"


def fmt_cost(cost: float | None, unpriced: int = 0) -> str:
    text = "$?" if cost is None else f"${cost:.4f}"
    if unpriced:
        text += f" (+{unpriced:,} unpriced)"
    return text


def fmt_secs(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    minutes, secs = divmod(int(round(s)), 60)
    return f"{minutes} min {secs:02d} s"


def clip(text: str, limit: int) -> str:
    """Head and tail of a long text with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n… [{len(text) - limit:,} characters not shown] …\n{text[-tail:]}"


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[rank]


def answer_text(answer: Any) -> str:
    if isinstance(answer, str):
        return answer
    try:
        return json.dumps(answer, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(answer)


# ==================================================================================================
# the run tree


@dataclass
class _Turn:
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
class _Group:
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
    latencies: list[float] = field(default_factory=list)
    done: bool = False
    wall: float | None = None
    refused: str | None = None
    change: tuple[str, str] = ("group", "")

    def __post_init__(self) -> None:
        self.change = ("group", self.key)


@dataclass
class _Run:
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
    turns: dict[int, _Turn] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Totals:
    """Live counters of the whole run tree; replaced by the root's usage when it finishes."""

    root_calls: int = 0
    sub_started: int = 0
    sub_finished: int = 0
    sub_errors: int = 0
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


class RunTree:
    """Events folded into a run tree: runs > turns > sub-call groups > calls, child runs under turns.

    `add(event)` is O(1) and thread-safe, so it can be an `on_event` subscriber; it records which
    parts changed (`take_changes()`) so a live view redraws only those. The `*_view` methods return
    plain dicts that the renderers (and tests) read.
    """

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, _Run] = {}
        self.root_id: str | None = None
        self.groups: dict[str, _Group] = {}
        self.calls: dict[str, list[Any]] = {}  # call_id -> [SubCallStarted, SubCallFinished | None, _Group]
        self.totals = _Totals()
        self.events: list[Event] = []  # every event added, in order (what the trajectory JSON is made of)
        self._changes: set[tuple[Any, ...]] = set()
        self._handlers: dict[str, Callable[[Any], None]] = {
            "run_started": self._run_started, "turn_started": self._turn_started,
            "model_reply": self._model_reply, "code_executed": self._code_executed,
            "batch_started": self._batch_started, "batch_finished": self._batch_finished,
            "sub_call_started": self._sub_started, "sub_call_finished": self._sub_finished,
            "guard_rejected": self._guard_rejected, "submitted": self._submitted,
            "turns_trimmed": self._trimmed, "fallback": self._fallback,
            "attempt_verified": self._verified, "run_finished": self._run_finished,
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

    def _run(self, run_id: str, ts: float) -> _Run:
        run = self.runs.get(run_id)
        if run is None:  # events of a run whose start we never saw (a view attached late)
            run = _Run(run_id, None, None, 0, "", "", "", "", "", {}, ts)
            self.runs[run_id] = run
            if self.root_id is None:
                self.root_id = run_id
        return run

    def _turn(self, run_id: str, turn: int, ts: float) -> _Turn:
        run = self._run(run_id, ts)
        node = run.turns.get(turn)
        if node is None:
            node = _Turn(run_id, turn, int(run.limits.get("max_iterations") or 0), ts)
            run.turns[turn] = node
            self._changes.add(("turns", run_id))
        return node

    def _run_started(self, e: Any) -> None:
        cfg = e.config or {}
        limits = {k: cfg.get(k) for k in ("max_iterations", "max_llm_calls", "max_cost", "max_time", "max_tokens")}
        existing = self.runs.get(e.run_id)
        run = _Run(e.run_id, e.parent_run_id, e.parent_turn, e.depth, e.label, e.question, e.model, e.sub_model,
                   e.sandbox, limits, e.ts)
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

    def _group(self, key: str, kind: str, run_id: str, turn_no: int, ts: float) -> _Group:
        group = self.groups.get(key)
        if group is None:
            group = _Group(key, kind, run_id, turn_no)
            self.groups[key] = group
            self._turn(run_id, turn_no, ts).items.append(("group", key))
            self._changes.add(("items", run_id, turn_no))
        return group

    def _batch_started(self, e: Any) -> None:
        group = self._group(e.batch_id, "batch", e.run_id, e.turn, e.ts)
        group.size, group.model = e.size, e.model
        self._changes.add(("group", e.batch_id))

    def _batch_finished(self, e: Any) -> None:
        group = self._group(e.batch_id, "batch", e.run_id, e.turn, e.ts)
        group.done, group.wall, group.refused = True, e.latency_s, e.refused
        self._changes.add(("group", e.batch_id))

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
        self.calls[e.call_id] = [e, None, group]
        self.totals.sub_started += 1
        changes = self._changes
        changes.add(group.change)
        changes.add(_METERS)

    def _sub_finished(self, e: Any) -> None:
        record = self.calls.get(e.call_id)
        if record is None:
            return
        record[1] = e
        group: _Group = record[2]
        group.finished += 1
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
        group.latencies.append(e.latency_s)
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

    # ---- reading ---------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        root = self.runs.get(self.root_id or "")
        return root is not None and root.status != "running"

    def run_view(self, run_id: str | None = None, now: float | None = None) -> dict[str, Any]:
        with self.lock:
            run = self.runs.get(run_id or self.root_id or "")
            if run is None:
                return {"run_id": None, "status": "waiting", "question": "", "model": "", "sub_model": "",
                        "label": "", "elapsed": 0.0, "depth": 0, "turns": 0, "answer": None, "has_answer": False,
                        "reason": "", "error": None, "notes": [], "fallback": False, "sandbox": ""}
            if run.finished is not None:
                elapsed = (run.usage or {}).get("wall_s") or (run.finished - run.started)
            else:
                elapsed = (now if now is not None else time.time()) - run.started
            has_answer = run.status in ("submitted", "fallback") or run.answer is not None
            return {"run_id": run.run_id, "status": run.status, "question": run.question, "model": run.model,
                    "sub_model": run.sub_model, "label": run.label, "sandbox": run.sandbox,
                    "elapsed": max(0.0, float(elapsed)), "depth": run.depth, "turns": len(run.turns),
                    "answer": run.answer, "has_answer": has_answer, "reason": run.reason, "error": run.error,
                    "notes": list(run.notes), "fallback": run.fallback, "parent_run_id": run.parent_run_id}

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
                    "max_llm_calls": limits.get("max_llm_calls"), "root_calls": t.root_calls,
                    "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
                    "max_tokens": limits.get("max_tokens"), "cost": t.cost, "unpriced": t.unpriced,
                    "max_cost": limits.get("max_cost"), "elapsed": elapsed,
                    "max_time": limits.get("max_time")}

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
                    "notes": list(node.notes), "reasoning": node.reasoning}

    def turn_items(self, run_id: str, turn: int) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.runs[run_id].turns[turn].items)

    def group_view(self, key: str) -> dict[str, Any]:
        with self.lock:
            g = self.groups[key]
            latencies = list(g.latencies)
            view = {"key": g.key, "kind": g.kind, "run_id": g.run_id, "turn": g.turn, "size": g.size,
                    "model": g.model, "started": len(g.call_ids), "finished": g.finished, "errors": g.errors,
                    "input_tokens": g.input_tokens, "output_tokens": g.output_tokens, "cost": g.cost,
                    "unpriced": g.unpriced, "cached": g.cached, "done": g.done, "wall": g.wall,
                    "refused": g.refused}
        latencies.sort()
        view["p50"], view["p95"] = percentile(latencies, 50), percentile(latencies, 95)
        return view

    def call_views(self, key: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """Calls of one group, in the order they started (index is 1-based within the group)."""
        with self.lock:
            ids = self.groups[key].call_ids[start:stop]
            records = [self.calls[i] for i in ids]
        out = []
        for index, (s, f, _group) in enumerate(records, start=start + 1):
            usage = f.usage if f is not None else {}
            out.append({"index": index, "call_id": s.call_id, "model": s.model, "prompt": s.prompt,
                        "prompt_chars": s.prompt_chars, "done": f is not None,
                        "reply": f.reply if f is not None else None, "error": f.error if f is not None else None,
                        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                        "cost": usage.get("cost_usd"), "latency": f.latency_s if f is not None else None,
                        "cached": bool(f.cached) if f is not None else False})
        return out


# ==================================================================================================
# HTML pieces (inline styles only: they survive notebook sanitisers; no scripts, no event handlers)

FONT = "font-family:var(--jp-ui-font-family,system-ui,-apple-system,'Segoe UI',sans-serif);font-size:13px;line-height:1.45"
PRE = ("margin:3px 0;padding:6px 8px;background:rgba(127,127,127,0.09);border-radius:4px;white-space:pre-wrap;"
       "word-break:break-word;font-family:var(--jp-code-font-family,ui-monospace,Menlo,Consolas,monospace);"
       "font-size:12px;line-height:1.4;max-height:28em;overflow:auto")
MUTED = "opacity:0.72"
SUMMARY = "cursor:pointer"
TURN_BOX = "border-left:3px solid rgba(127,127,127,0.35);padding:2px 0 2px 10px;margin:6px 0"
CHILD_BOX = "border-left:3px solid rgba(25,118,210,0.45);padding:2px 0 2px 10px;margin:6px 0 6px 4px"

_esc = html.escape


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#757575")
    label = STATUS_LABELS.get(status, status)
    return (f'<span style="display:inline-block;padding:0 7px;border-radius:9px;border:1px solid {color};'
            f'color:{color};font-size:12px">{_esc(label)}</span>')


def _chip(text: str, color: str) -> str:
    return f'<span style="color:{color};font-size:12px;margin-left:6px">{_esc(text)}</span>'


def _pre(text: str, style: str = "") -> str:
    return f'<pre style="{PRE};{style}">{_esc(text)}</pre>'


_lexer: Any = None

# Token colours follow the notebook's theme: JupyterLab's editor colour variables, with light-theme
# fallbacks where those variables do not exist (exported HTML, other front ends).
_TOKEN_COLOURS = (
    ("Comment", "comment", "#408080"), ("Keyword", "keyword", "#008000"), ("Operator.Word", "keyword", "#aa22ff"),
    ("Name.Builtin", "builtin", "#008000"), ("Name.Function", "def", "#0000ff"), ("Name.Class", "def", "#0000ff"),
    ("Literal.String", "string", "#ba2121"), ("Literal.Number", "number", "#080"), ("Operator", "operator", "#aa22ff"),
)


def _colour(token: Any) -> str | None:
    name = str(token).removeprefix("Token.")
    for prefix, var, fallback in _TOKEN_COLOURS:
        if name == prefix or name.startswith(prefix + "."):
            return f"var(--jp-mirror-editor-{var}-color,{fallback})"
    return None


def highlight_python(code: str) -> str:
    """Syntax-highlighted code as a <pre> with inline, theme-aware colours, or plain escaped text."""
    global _lexer
    try:
        if _lexer is None:
            from pygments.lexers import PythonLexer

            _lexer = PythonLexer()
        runs: list[tuple[str | None, str]] = []  # neighbouring tokens of one colour share a span
        for token, text in _lexer.get_tokens(code):
            colour = _colour(token)
            if runs and runs[-1][0] == colour:
                runs[-1] = (colour, runs[-1][1] + text)
            else:
                runs.append((colour, text))
        body = "".join(f'<span style="color:{c}">{_esc(t)}</span>' if c else _esc(t) for c, t in runs).rstrip("\n")
    except Exception:  # pygments missing or failing: plain text is still correct
        body = _esc(code)
    return f'<pre style="{PRE}">{body}</pre>'


def header_html(run: dict[str, Any], *, title: str = "RLM", inline: bool = False) -> str:
    """Title, status badge, models, elapsed time and the question (`inline`: on one line)."""
    models = _esc(run["model"] or "?")
    if run.get("sub_model") and run["sub_model"] != run["model"]:
        models += f' <span style="{MUTED}">→ sub</span> {_esc(run["sub_model"])}'
    label = run.get("label") or ""
    label = f' <span style="{MUTED}">{_esc(label)}</span>' if label and label != title else ""
    question = clip(run.get("question") or "", 400)
    line = (f'<b>{_esc(title)}</b> {_badge(run["status"])}{label} <span style="margin-left:8px">{models}</span> '
            f'<span style="{MUTED};margin-left:8px">{fmt_secs(run["elapsed"])}</span>')
    if inline:  # one line, e.g. inside a <summary>
        short = clip(question, 160).replace("\n", " ")
        return f'<span style="{FONT}">{line} <span style="{MUTED}">— {_esc(short)}</span></span>'
    return (f'<div style="{FONT}"><div>{line}</div>'
            f'<div style="{MUTED};white-space:pre-wrap">{_esc(question)}</div></div>')


def _meter(label: str, used: str, limit: str | None, fraction: float | None) -> str:
    bar = ""
    if fraction is not None:
        pct = max(0.0, min(1.0, fraction)) * 100
        color = "#c62828" if pct >= 100 else "#1976d2"
        bar = (f'<div style="height:4px;background:rgba(127,127,127,0.2);border-radius:2px;margin-top:2px">'
               f'<div style="height:4px;width:{pct:.1f}%;background:{color};border-radius:2px"></div></div>')
    value = used + (f' <span style="{MUTED}">/ {limit}</span>' if limit else "")
    return (f'<div style="display:inline-block;min-width:110px;margin:2px 14px 2px 0;vertical-align:top">'
            f'<div style="{MUTED};font-size:11px">{_esc(label)}</div><div>{value}</div>{bar}</div>')


def _fraction(used: float, limit: float | None) -> float | None:
    return used / limit if limit else None


def meters_html(m: dict[str, Any], *, counts: bool = True) -> str:
    """The budget meters; `counts=False` leaves out turns and sub-calls (the widget shows those as bars)."""
    parts = []
    if counts:
        parts.append(_meter("turns", f"{m['turns']:,}", _opt_int(m["max_turns"]),
                            _fraction(m["turns"], m["max_turns"])))
        errors = f' <span style="color:#c62828">({m["sub_errors"]:,} failed)</span>' if m["sub_errors"] else ""
        parts.append(_meter("sub-calls", f"{m['sub_calls']:,}{errors}", _opt_int(m["max_llm_calls"]),
                            _fraction(m["sub_calls"], m["max_llm_calls"])))
    tokens = m["input_tokens"] + m["output_tokens"]
    parts.append(_meter("tokens in / out", f"{fmt_count(m['input_tokens'])} / {fmt_count(m['output_tokens'])}",
                        _opt_int(m["max_tokens"]), _fraction(tokens, m["max_tokens"])))
    max_cost = f"${m['max_cost']:g}" if m["max_cost"] else None
    parts.append(_meter("cost", fmt_cost(m["cost"], m["unpriced"]), max_cost, _fraction(m["cost"], m["max_cost"])))
    max_time = fmt_secs(m["max_time"]) if m["max_time"] else None
    parts.append(_meter("time", fmt_secs(m["elapsed"]), max_time, _fraction(m["elapsed"], m["max_time"])))
    return f'<div style="{FONT}">{"".join(parts)}</div>'


def _opt_int(value: Any) -> str | None:
    return f"{value:,}" if isinstance(value, int) and value else None


def turn_html(t: dict[str, Any], *, text_chars: int = TEXT_CHARS) -> str:
    """One turn: title line, the reply (collapsed), the code, the output, notes (the caller draws the box)."""
    usage = t["reply_usage"]
    bits = []
    if t["reply_latency"] is not None:
        bits.append(f"reply {fmt_secs(t['reply_latency'])}")
    if usage:
        bits.append(f"{fmt_count(usage.get('input_tokens'))} → {fmt_count(usage.get('output_tokens'))} tokens")
    if t["duration"] is not None:
        bits.append(f"code {fmt_secs(t['duration'])}")
    chips = ""
    if not t["executed"]:
        chips += _chip("waiting for the model…" if t["reply"] is None else "running…", "#1976d2")
    if t["error"]:
        chips += _chip(t["error_type"] or "error", "#c62828")
    if t["timed_out"]:
        chips += _chip("timed out", "#c62828")
    if t["restarted"]:
        chips += _chip("sandbox restarted", "#ef6c00")
    if t["submitted"]:
        chips += _chip("submitted", "#2e7d32")
    limit = f"/{t['max_turns']}" if t["max_turns"] else ""
    out = [f'<div style="{FONT}"><div><b>Turn {t["turn"]}{limit}</b> '
           f'<span style="{MUTED}">{" · ".join(bits)}</span>{chips}</div>']
    if t["reply"] is not None:
        out.append(f'<details><summary style="{SUMMARY};{MUTED}">model reply ({len(t["reply"]):,} characters)'
                   f'</summary>{_pre(clip(t["reply"], text_chars))}</details>')
    if t.get("reasoning"):
        out.append(f'<details><summary style="{SUMMARY};{MUTED}">model reasoning ({len(t["reasoning"]):,} '
                   f'characters)</summary>{_pre(clip(t["reasoning"], text_chars))}</details>')
    code = t["code"]
    if code is None and t["reply"] is not None:
        from .parsing import extract_code

        code = extract_code(t["reply"]).code
        if code is None:
            out.append(f'<div style="{MUTED}">(no code in this reply)</div>')
    if code is not None:
        out.append(highlight_python(clip(code, text_chars)))
    if t["executed"]:
        output = t["stdout"]
        if output:
            out.append(f'<div style="{MUTED};font-size:11px">output</div>' + _pre(clip(output, text_chars)))
        errors = "\n".join(s for s in (t["stderr"], t["error"] or "") if s)
        if errors:
            out.append(_pre(clip(errors, text_chars), "color:#c62828"))
        if not output and not errors:
            out.append(f'<div style="{MUTED};font-size:11px">(no output)</div>')
    for kind, note in t["notes"]:
        color = "#ef6c00" if kind == "rejected" else "inherit"
        out.append(f'<div style="color:{color};font-size:12px">{_esc(note)}</div>')
    out.append("</div>")
    return "".join(out)


def group_summary_html(g: dict[str, Any]) -> str:
    """One row for a batch (or a turn's single calls): count, errors, latency p50/p95, tokens, cost."""
    name = "llm_query_batched" if g["kind"] == "batch" else "llm_query"
    count = g["size"] if g["kind"] == "batch" else g["started"]
    parts = [f"<b>{name}</b> × {count:,}"]
    if g["finished"] < g["started"] or (g["kind"] == "batch" and not g["done"]):
        parts.append(f'{g["finished"]:,} done')
    if g["errors"]:
        parts.append(f'<span style="color:#c62828">{g["errors"]:,} failed</span>')
    if g["p50"] is not None:
        parts.append(f'p50 {fmt_secs(g["p50"])} · p95 {fmt_secs(g["p95"])}')
    parts.append(f'{fmt_count(g["input_tokens"])} → {fmt_count(g["output_tokens"])} tokens')
    parts.append(fmt_cost(g["cost"], g["unpriced"]))
    if g["cached"]:
        parts.append(f'{g["cached"]:,} cached')
    if g["wall"] is not None:
        parts.append(f'wall {fmt_secs(g["wall"])}')
    refused = f'<div style="color:#c62828;font-size:12px">{_esc(g["refused"])}</div>' if g["refused"] else ""
    return f'<span style="{FONT}">{" · ".join(parts)}</span>{refused}'


def call_html(c: dict[str, Any], *, text_chars: int = CALL_TEXT_CHARS) -> str:
    """One sub-call, collapsed to a line; expands to its prompt, reply, tokens, latency and cost."""
    if not c["done"]:
        state = '<span style="color:#1976d2">running</span>'
    elif c["error"]:
        state = '<span style="color:#c62828">failed</span>'
    else:
        state = "ok"
    reply = c["error"] if c["error"] else (c["reply"] or "")
    preview = reply.strip().replace("\n", " ")[:80]
    bits = [f"#{c['index']:,}", state]
    if c["latency"] is not None:
        bits.append(fmt_secs(c["latency"]))
    if c["input_tokens"] is not None:
        bits.append(f"{fmt_count(c['input_tokens'])} → {fmt_count(c['output_tokens'])} tokens")
    if c["done"]:
        bits.append(fmt_cost(c["cost"], 1 if c["cost"] is None else 0).replace(" (+1 unpriced)", " unpriced"))
    if c["cached"]:
        bits.append("cached")
    prompt = c["prompt"] or ""
    shown_chars = f"{c['prompt_chars']:,} characters" + ("" if len(prompt) >= c["prompt_chars"] else
                                                            f", {len(prompt):,} recorded")
    body = (f'<div style="{MUTED};font-size:11px">prompt ({shown_chars})</div>{_pre(clip(prompt, text_chars))}'
            f'<div style="{MUTED};font-size:11px">{"error" if c["error"] else "reply"}</div>'
            f'{_pre(clip(reply, text_chars), "color:#c62828" if c["error"] else "")}')
    return (f'<details style="{FONT};margin-left:8px"><summary style="{SUMMARY}">{" · ".join(bits)} '
            f'<span style="{MUTED}">{_esc(preview)}</span></summary>{body}</details>')


def answer_html(run: dict[str, Any]) -> str:
    """The box that closes a run's tree: the answer, or why there is none."""
    status = run["status"]
    if status == "running":
        return ""
    color = STATUS_COLORS.get(status, "#757575")
    title = {"submitted": "Answer", "fallback": "Answer (fallback: no submit() before the turns ran out)",
             "budget_exhausted": "Budget exhausted", "interrupted": "Interrupted",
             "error": "Run failed"}.get(status, status)
    body = ""
    if run["has_answer"] and run["answer"] is not None:
        body += _pre(clip(answer_text(run["answer"]), TEXT_CHARS))
    if status not in ("submitted",) and (run["error"] or run["reason"]):
        body += f'<div style="font-size:12px">{_esc(run["error"] or run["reason"])}</div>'
    if status == "interrupted":
        body += f'<div style="{MUTED};font-size:12px">The partial trajectory above is kept.</div>'
    for note in run["notes"]:
        body += f'<div style="{MUTED};font-size:12px">{_esc(note)}</div>'
    return (f'<div style="{FONT};border:1px solid {color};border-radius:5px;padding:6px 10px;margin:8px 0 2px">'
            f'<b style="color:{color}">{_esc(title)}</b>{body}</div>')


# ==================================================================================================
# whole-trajectory renderers


def _as_tree(source: Trajectory | RunTree) -> RunTree:
    return source if isinstance(source, RunTree) else RunTree.from_trajectory(source)


def render_html(trajectory: Trajectory | RunTree, *, full_page: bool = False, calls_shown: int = CALLS_SHOWN,
                title: str = "RLM") -> str:
    """A script-free HTML tree of a run (collapsible <details>); `full_page` wraps it in a document.

    Args:
        trajectory: a Trajectory (or an already built RunTree).
        full_page: return a standalone `<!doctype html>` page instead of a fragment.
        calls_shown: sub-calls listed per group (default 20); the rest are counted, not shown.
    """
    tree = _as_tree(trajectory)
    root = tree.run_view()
    parts = [f'<div class="rlmnb-trajectory" style="{FONT}">', header_html(root, title=title),
             meters_html(tree.meters_view())]
    if root["run_id"] is not None:
        parts.append(_run_body_html(tree, root["run_id"], calls_shown))
        parts.append(answer_html(root))
    parts.append("</div>")
    fragment = "".join(parts)
    if not full_page:
        return fragment
    question = clip(root.get("question") or "", 80).replace("\n", " ")
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}: {_esc(question)}</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<style>body{max-width:1100px;margin:24px auto;padding:0 16px}"
            "@media (prefers-color-scheme: dark){body{background:#1e1e1e;color:#ddd}}</style>"
            f"</head><body>{fragment}</body></html>\n")


def _run_body_html(tree: RunTree, run_id: str, calls_shown: int) -> str:
    parts = []
    for number in tree.turn_numbers(run_id):
        parts.append(f'<div style="{TURN_BOX}">{turn_html(tree.turn_view(run_id, number))}')
        for kind, key in tree.turn_items(run_id, number):
            parts.append(_group_static_html(tree, key, calls_shown) if kind == "group"
                         else _child_static_html(tree, key, calls_shown))
        parts.append("</div>")
    return "".join(parts)


def _group_static_html(tree: RunTree, key: str, calls_shown: int) -> str:
    view = tree.group_view(key)
    calls = tree.call_views(key, 0, calls_shown)
    more = view["started"] - len(calls)
    rest = (f'<div style="{MUTED};font-size:12px;margin-left:8px">… {more:,} more calls not listed here '
            f'(the trajectory JSON has them all)</div>') if more > 0 else ""
    return (f'<details style="{FONT};margin:2px 0"><summary style="{SUMMARY}">{group_summary_html(view)}</summary>'
            f'{"".join(call_html(c) for c in calls)}{rest}</details>')


def _child_static_html(tree: RunTree, run_id: str, calls_shown: int) -> str:
    run = tree.run_view(run_id)
    return (f'<details open style="{CHILD_BOX}"><summary style="{SUMMARY}">'
            f'{header_html(run, title="child run", inline=True)}'
            f'</summary>{_run_body_html(tree, run_id, calls_shown)}{answer_html(run)}</details>')


def summary_line(trajectory: Trajectory | RunTree) -> str:
    """One stable line (no times, no ids): status, turns, sub-calls, tokens, answer."""
    tree = _as_tree(trajectory)
    run = tree.run_view()
    m = tree.meters_view()
    if run["run_id"] is None:
        return "RLM run (no events yet)"
    text = (f"RLM run · {STATUS_LABELS.get(run['status'], run['status'])} · {m['turns']} turn(s) · "
            f"{m['sub_calls']:,} sub-call(s) · {m['input_tokens']:,} → {m['output_tokens']:,} tokens · "
            f"{fmt_cost(m['cost'], m['unpriced'])}")
    if run["has_answer"] and run["answer"] is not None:
        answer = answer_text(run["answer"]).replace("\n", " ")
        text += f" · answer: {answer[:200] + '…' if len(answer) > 200 else answer}"
    elif run["status"] in ("error", "interrupted", "budget_exhausted") and (run["error"] or run["reason"]):
        text += f" · {run['error'] or run['reason']}"
    return text


def render_text(trajectory: Trajectory | RunTree, *, width: int = 100, calls_shown: int = 3,
                text_chars: int = 2_000) -> str:
    """A readable terminal view: header, budget, each turn's code, output and sub-calls, the answer.

    Args:
        width: line width of the rules between turns (default 100).
        calls_shown: sub-calls shown per group with their prompt and reply heads (default 3).
        text_chars: characters of each code, output and reply shown (default 2,000).
    """
    tree = _as_tree(trajectory)
    root = tree.run_view()
    if root["run_id"] is None:
        return "RLM run (no events yet)\n"
    lines: list[str] = []
    m = tree.meters_view()
    models = root["model"] + (f" (sub-calls: {root['sub_model']})" if root["sub_model"] != root["model"] else "")
    lines.append(f"RLM run · {STATUS_LABELS.get(root['status'], root['status'])} · {models} · "
                 f"{fmt_secs(root['elapsed'])}")
    lines.append(f"Question: {clip(root['question'], 1_000)}")

    def limit(value: Any) -> str:
        return f"/{value:,}" if isinstance(value, int) and value else ""

    budget = (f"Budget: turns {m['turns']}{limit(m['max_turns'])} · sub-calls {m['sub_calls']:,}"
              f"{limit(m['max_llm_calls'])}")
    if m["sub_errors"]:
        budget += f" ({m['sub_errors']:,} failed)"
    budget += (f" · tokens {fmt_count(m['input_tokens'])} in / {fmt_count(m['output_tokens'])} out"
               f" · cost {fmt_cost(m['cost'], m['unpriced'])}"
               + (f" of ${m['max_cost']:g}" if m["max_cost"] else "")
               + f" · time {fmt_secs(m['elapsed'])}" + (f" of {fmt_secs(m['max_time'])}" if m["max_time"] else ""))
    lines.append(budget)
    _run_text(tree, root["run_id"], lines, "", width, calls_shown, text_chars)
    lines.append("=" * width)
    lines.extend(_answer_text(root, ""))
    return "\n".join(lines) + "\n"


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.rstrip("\n").split("\n")]


def _run_text(tree: RunTree, run_id: str, lines: list[str], pad: str, width: int, calls_shown: int,
              text_chars: int) -> None:
    for number in tree.turn_numbers(run_id):
        t = tree.turn_view(run_id, number)
        title = f"── Turn {number}" + (f"/{t['max_turns']}" if t["max_turns"] else "") + " "
        flags = [f for f, on in (("error", bool(t["error"])), ("timed out", t["timed_out"]),
                                 ("submitted", t["submitted"])) if on]
        if flags:
            title += "(" + ", ".join(flags) + ") "
        lines.append(pad + title + "─" * max(0, width - len(pad) - len(title)))
        code = t["code"]
        if code is None and t["reply"] is not None:
            from .parsing import extract_code

            code = extract_code(t["reply"]).code
        if code is None and t["reply"] is not None:
            lines.append(pad + "  reply (no code):")
            lines.extend(_indent(clip(t["reply"], text_chars), pad + "    "))
        elif code is not None:
            lines.append(pad + "  code:")
            lines.extend(_indent(clip(code, text_chars), pad + "    "))
        if t["executed"]:
            output = "\n".join(s for s in (t["stdout"], t["stderr"], t["error"] or "") if s)
            lines.append(pad + "  output:" + ("" if output else " (none)"))
            if output:
                lines.extend(_indent(clip(output, text_chars), pad + "    "))
        for _kind, note in t["notes"]:
            lines.append(pad + "  note: " + note.replace("\n", " "))
        for kind, key in tree.turn_items(run_id, number):
            if kind == "group":
                g = tree.group_view(key)
                lines.append(pad + "  sub-calls: " + _group_text(g))
                for c in tree.call_views(key, 0, calls_shown):
                    reply = (c["error"] or c["reply"] or "").strip().replace("\n", " ")
                    prompt = (c["prompt"] or "").strip().replace("\n", " ")
                    lines.append(f"{pad}    #{c['index']}: {prompt[:60]!r} -> {reply[:60]!r}")
                if g["started"] > calls_shown:
                    lines.append(f"{pad}    … {g['started'] - calls_shown:,} more")
            else:
                child = tree.run_view(key)
                lines.append(f"{pad}  child run: {clip(child['question'], 200)!r} "
                             f"[{STATUS_LABELS.get(child['status'], child['status'])}]")
                _run_text(tree, key, lines, pad + "    ", width, calls_shown, text_chars)
                lines.extend(_answer_text(child, pad + "    "))


def _group_text(g: dict[str, Any]) -> str:
    name = "llm_query_batched" if g["kind"] == "batch" else "llm_query"
    count = g["size"] if g["kind"] == "batch" else g["started"]
    text = f"{name} × {count:,}"
    if g["errors"]:
        text += f", {g['errors']:,} failed"
    if g["p50"] is not None:
        text += f", p50 {fmt_secs(g['p50'])} / p95 {fmt_secs(g['p95'])}"
    text += f", {fmt_count(g['input_tokens'])} in / {fmt_count(g['output_tokens'])} out tokens"
    text += f", {fmt_cost(g['cost'], g['unpriced'])}"
    if g["refused"]:
        text += f" (refused: {g['refused']})"
    return text


def _answer_text(run: dict[str, Any], pad: str) -> list[str]:
    status = run["status"]
    if status == "running":
        return [pad + "(still running)"]
    label = {"submitted": "Answer", "fallback": "Answer (fallback)"}.get(status)
    lines = []
    if label and run["answer"] is not None:
        text = answer_text(run["answer"])
        if "\n" in text:
            lines.append(f"{pad}{label}:")
            lines.extend(_indent(text, pad + "  "))
        else:
            lines.append(f"{pad}{label}: {text}")
    else:
        lines.append(f"{pad}{STATUS_LABELS.get(status, status).capitalize()}: "
                     f"{run['error'] or run['reason'] or 'no answer'}")
    return lines


# ==================================================================================================
# MIME bundle


def compact_trajectory(trajectory: Trajectory, *, call_chars: int = JSON_CALL_CHARS,
                       text_chars: int = JSON_TEXT_CHARS) -> dict[str, Any]:
    """`trajectory.to_dict()` with long strings clipped, so a saved notebook stays a sensible size.

    Sub-call prompts keep `call_chars`, other strings `text_chars`; model replies (root and sub) are
    kept whole, with every request hash, so a saved notebook's run can still be replayed. `"clipped": true`
    is set when anything was cut (`%rlm export` and `RunResult.save` keep everything). Built from
    each event's attributes directly: this runs once per displayed run over every event.
    """
    from .events import SCHEMA_VERSION

    clipped = False

    def cut(value: Any, limit: int) -> Any:
        nonlocal clipped
        if isinstance(value, str):
            if len(value) > limit:
                clipped = True
                return clip(value, limit)
            return value
        if isinstance(value, dict):
            return {k: cut(v, limit) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [cut(v, limit) for v in value]
        return value

    events = []
    for event in trajectory.events:
        attributes = getattr(event, "__dict__", None)
        data = {"kind": event.kind, **attributes} if attributes is not None else event.to_dict()
        if event.kind.startswith("sub_call"):  # thousands of these: look at their long strings only
            for key in _CALL_TEXT_FIELDS:
                value = data.get(key)
                if value is not None and len(value) > call_chars:
                    data[key] = clip(value, call_chars)
                    clipped = True
        else:
            keep = _REPLAY_FIELDS.get(event.kind, ())
            data = {key: value if key in keep else cut(value, text_chars) for key, value in data.items()}
        events.append(data)
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "events": events}
    if clipped:
        out["clipped"] = True
    return out


def mime_bundle(trajectory: Trajectory, *, calls_shown: int = CALLS_SHOWN) -> dict[str, Any]:
    """`text/plain` (one stable line), script-free `text/html` and the trajectory JSON under MIME_TYPE."""
    tree = RunTree.from_trajectory(trajectory)
    return {"text/plain": summary_line(tree), "text/html": render_html(tree, calls_shown=calls_shown),
            MIME_TYPE: compact_trajectory(trajectory)}


class TrajectoryView:
    """Displays a trajectory statically (no widget): `display(TrajectoryView(traj))`."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mime_bundle(self.trajectory)

    def __repr__(self) -> str:
        return summary_line(self.trajectory)
