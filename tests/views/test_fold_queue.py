"""Queued time apart from running time: a sub-call's latency is the provider's time, the wait for a
concurrency slot is recorded as `queued_s` (and a `sub_call_sent` event), and every view counts in flight
only the calls holding a slot. Runs saved before this still load and show as they did."""

from __future__ import annotations

import json
import re
from typing import Any

from sandbox_support import code

from rlmnb import RLM
from rlmnb.events import SubCallFinished, SubCallSent, SubCallStarted, Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, render_html, render_text
from rlmnb.views._html import meters_html
from rlmnb.views._timeline import queue_levels, timeline_svg

CALL_S = 0.2  # the scripted sub-model's time per call
CALLS = 8


class CacheableScripted(ScriptedLM):
    """A scripted sub-model that opts in to the response cache, as LiteLLM does."""

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}


def _queued_run() -> Any:
    root = ScriptedLM([code(f"r = llm_query_batched([f'q{{i}}' for i in range({CALLS})])"), code("submit(len(r))")])
    return RLM(root, ScriptedLM(lambda m: "x", name="sub", latency=CALL_S, count_usage=False),
               sandbox="local", max_concurrency=2,
               min_concurrency=1, cache=False).run("q", text="t")


def test_queued_time_is_apart_from_latency_and_in_flight_never_exceeds_the_limit() -> None:
    result = _queued_run()
    events = result.trajectory.events
    finished = sorted(result.trajectory.of(SubCallFinished), key=lambda e: int(e.call_id.rsplit("c", 1)[1]))
    assert len(result.trajectory.of(SubCallSent)) == CALLS
    assert all(e.latency_s >= CALL_S * 0.9 for e in finished)  # the provider's own time (asyncio may round)
    # with 2 slots, the last two calls wait for three waves of calls before them
    assert all(e.queued_s is not None and e.queued_s >= 2 * CALL_S for e in finished[-2:])
    assert finished[0].queued_s is not None and finished[0].queued_s < CALL_S
    assert all(e.latency_s < e.queued_s for e in finished[-2:])  # the queue is not counted as latency

    tree, peak_flying, peak_queued = RunTree(), 0, 0
    for event in events:  # the live view model, event by event
        tree.add(event)
        m = tree.meters_view()
        peak_flying, peak_queued = max(peak_flying, m["sub_calls_in_flight"]), max(peak_queued, m["sub_calls_queued"])
        assert m["sub_calls_in_flight"] + m["sub_calls_queued"] == m["sub_calls"] - m["sub_calls_done"]
    assert peak_flying == 2 and peak_queued == CALLS - 2

    group = tree.group_view(next(iter(tree.groups)))
    assert group["p95"] is not None and group["p95"] < group["queued_p95"]  # p50/p95 over running time
    assert group["queued_p50"] is not None and group["queued_p50"] > 0
    calls = tree.all_call_views()
    assert all(c["sent"] and c["queued"] is not None for c in calls) and calls[-1]["queued"] > calls[-1]["latency"]

    svg = timeline_svg(events)
    assert re.search(r'data-lanes="(\d+)"', svg).group(1) == "2"  # type: ignore[union-attr]
    assert re.search(r'data-queued="(\d+)"', svg).group(1) == str(CALLS - 2)  # type: ignore[union-attr]
    assert "peak 2 calls in flight · peak 6 queued" in svg and 'class="rlmnb-queue"' in svg
    assert "queued (waiting for a slot)" in svg

    page, text = render_html(result.trajectory), render_text(result.trajectory)
    assert "queued p50" in page and "queued p50" in text
    frame = result.to_frame()
    assert list(frame["queued_s"].notna()) == [True] * CALLS and (frame["queued_s"] >= 0).all()


def test_meters_say_in_flight_and_queued_while_a_batch_waits() -> None:
    events = _queued_run().trajectory.events
    tree = RunTree()
    for event in events:
        tree.add(event)
        m = tree.meters_view()
        if m["sub_calls_queued"] == CALLS - 2 and m["sub_calls_in_flight"] == 2:
            break
    assert "0 (+2 in flight, +6 queued)" in meters_html(m)
    page = render_html(tree)
    assert "2 in flight · 6 queued" in page and ">queued</span>" in page  # the group line and a waiting call


def _old(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory as rlmnb wrote it before slots were recorded: no sub_call_sent, no queued_s."""
    data = json.loads(trajectory.to_json())
    data["events"] = [e for e in data["events"] if e["kind"] != "sub_call_sent"]
    for e in data["events"]:
        if e["kind"] == "sub_call_finished":
            e.pop("queued_s")
            e["latency_s"] = 0.5  # then, latency included the queue
    return data


def test_an_old_trajectory_loads_and_shows_as_before(tmp_path: Any) -> None:
    result = _queued_run()
    path = tmp_path / "old.rlmnb.json"
    path.write_text(json.dumps(_old(result.trajectory)), encoding="utf-8")
    old = Trajectory.load(path)
    assert all(e.queued_s is None for e in old.of(SubCallFinished))
    tree = RunTree.from_trajectory(old)
    group = tree.group_view(next(iter(tree.groups)))
    assert group["p50"] == 0.5 and group["queued_p50"] is None and group["queued"] == 0
    calls = tree.all_call_views()
    assert all(c["latency"] == 0.5 and c["queued"] is None and not c["waiting"] for c in calls)
    svg = timeline_svg(old.events)
    assert 'data-queued="0"' in svg and "rlmnb-queue" not in svg and svg.count("<rect") == CALLS + 4
    assert "queued p50" not in render_html(old) and "queued" not in render_text(old)
    assert old.to_frame()["queued_s"].isna().all()
    # an old run cut short: its unfinished calls are in flight, as they were
    cut = Trajectory.from_dict({**_old(result.trajectory), "events": [
        e for e in _old(result.trajectory)["events"] if e["kind"] not in ("sub_call_finished", "run_finished")]})
    m = RunTree.from_trajectory(cut).meters_view()
    assert (m["sub_calls_in_flight"], m["sub_calls_queued"]) == (CALLS, 0)


def test_a_trajectory_from_a_newer_rlmnb_skips_kinds_it_does_not_know() -> None:
    data = json.loads(_queued_run().trajectory.to_json())
    data["events"].insert(3, {**data["events"][3], "kind": "something_new"})
    assert len(Trajectory.from_dict(data)) == len(data["events"]) - 1


def test_cached_calls_have_no_provider_time() -> None:
    sub = CacheableScripted(lambda m: "same", name="sub", latency=0.05)

    def run() -> Any:
        root = ScriptedLM([code("r = llm_query_batched(['p1', 'p2', 'p1'])"), code("submit(r)")])
        return RLM(root, sub, sandbox="local").run("q", text="t")

    first, second = run(), run()
    twin = next(e for e in first.trajectory.of(SubCallFinished) if e.cached)  # served by p1 in flight
    assert twin.latency_s == 0.0 and twin.queued_s is not None and twin.queued_s > 0
    assert len(first.trajectory.of(SubCallSent)) == 2 and second.trajectory.of(SubCallSent) == []
    calls = RunTree.from_trajectory(second.trajectory).all_call_views()
    assert all(c["latency"] is None and c["cached"] and c["done"] for c in calls)
    page = render_html(second.trajectory)
    assert "no provider time" in page
    group = RunTree.from_trajectory(second.trajectory).group_view(
        next(iter(RunTree.from_trajectory(second.trajectory).groups)))
    assert group["p50"] is None  # no provider time to take a percentile of
    assert "cached, no provider time" in timeline_svg(second.trajectory.events)
    assert len(second.trajectory.of(SubCallStarted)) == 3


def test_queue_levels_take_the_peak_of_each_slice() -> None:
    changes = [(0.0, 1), (0.0, 1), (0.5, -1), (1.0, -1), (1.0, 1), (2.0, -1)]
    assert queue_levels(changes, 0.0, 2.0, columns=4) == [2, 2, 1, 1]
    assert queue_levels([], 0.0, 1.0, columns=3) == [0, 0, 0]
