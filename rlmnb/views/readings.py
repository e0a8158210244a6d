"""Reading the run tree: the plain dicts every view draws from (a run, its meters, a turn, a group, calls).

`RunTree` (fold.py) folds events into nodes; these are its read side, kept apart so that folding
and reading each stay one screen of code. Each method takes the tree's lock for as long as it reads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .format import percentile, running_time
from .nodes import GroupNode, RunNode, Totals


class TreeReadings:
    """The read side of `RunTree`: views of its runs, meters, turns, groups and calls."""

    lock: threading.Lock
    runs: dict[str, RunNode]
    root_id: str | None
    groups: dict[str, GroupNode]
    calls: dict[str, list[Any]]
    totals: Totals
    opened: float | None
    expected_models: tuple[str, str]

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
                               _out(t.sub_started, t.sub_finished, t.sub_sent, t.sub_sent_finished,
                                    t.queue_recorded), strict=True)),
                    "max_llm_calls": limits.get("max_llm_calls"), "root_calls": t.root_calls,
                    "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
                    "max_tokens": limits.get("max_tokens"), "cost": t.cost, "unpriced": t.unpriced,
                    "max_cost": limits.get("max_cost"), "elapsed": elapsed,
                    "max_time": limits.get("max_time"),
                    "ended": root is not None and root.status != "running"}

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

    def group_view(self, key: str, now: float | None = None) -> dict[str, Any]:
        """A group's figures; while a batch runs, also its rate (replies a second) and ETA, as tqdm shows them."""
        with self.lock:
            g = self.groups[key]
            latencies = list(g.latencies)
            view: dict[str, Any] = {
                    "key": g.key, "kind": g.kind, "run_id": g.run_id, "turn": g.turn, "size": g.size,
                    "model": g.model, "started": len(g.call_ids), "finished": g.finished, "errors": g.errors,
                    "input_tokens": g.input_tokens, "output_tokens": g.output_tokens, "cost": g.cost,
                    "unpriced": g.unpriced, "cached": g.cached, "done": g.done, "wall": g.wall,
                    "refused": g.refused, "map": dict(g.map_info) if g.map_info is not None else None,
                    "retried": g.retried, "rate_limited": g.rate_limited,
                    "rate": None, "eta": None}
            view["in_flight"], view["queued"] = _out(len(g.call_ids), g.finished, g.sent, g.sent_finished,
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
                        "reply": f.reply if f is not None else None, "error": f.error if f is not None else None,
                        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                        "cost": usage.get("cost_usd"),
                        # latency: the provider's time (None: it had none, or no reply yet); queued: the wait
                        # for a slot (None: not recorded, in runs saved before it was)
                        "latency": running_time(f.latency_s, queued, bool(f.cached)) if f is not None else None,
                        "queued": queued, "sent": sent is not None,
                        "waiting": recorded and f is None and sent is None,  # queued for a slot right now
                        "cached": bool(f.cached) if f is not None else False,
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


def _out(started: int, finished: int, sent: int, sent_finished: int, recorded: bool) -> tuple[int, int]:
    """(in flight, queued): calls holding a concurrency slot, and calls started but still waiting for one.
    A trajectory saved before slots were recorded counts every unfinished call as in flight, as it did."""
    if not recorded:
        return started - finished, 0
    in_flight = sent - sent_finished
    return in_flight, max(0, started - finished - in_flight)
