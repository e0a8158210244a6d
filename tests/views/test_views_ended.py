"""An ended run has nothing in flight or queued: after the stop button, its calls out read "cancelled" and
"not sent" (meters, the batch line, the text view), never "+2 in flight, +6 queued"."""

from __future__ import annotations

from test_fold_queue import CALLS, _queued_run

from rlmnb.events import Event, RunFinished, Trajectory
from rlmnb.views import RunTree, render_html, render_text
from rlmnb.views._html import meters_html


def _stopped() -> Trajectory:
    """The queued run cut where 2 calls are in flight and 6 wait, then ended as the stop button ends it."""
    events = _queued_run().trajectory.events
    tree, cut = RunTree(), 0
    for i, event in enumerate(events):
        tree.add(event)
        m = tree.meters_view()
        if m["sub_calls_queued"] == CALLS - 2 and m["sub_calls_in_flight"] == 2:
            cut = i + 1
            break
    last: Event = events[cut - 1]
    end = RunFinished(seq=last.seq + 1, ts=last.ts + 0.1, run_id=last.root_run_id, root_run_id=last.root_run_id,
                      status="interrupted", reason="interrupted by the user")
    return Trajectory([*events[:cut], end])


def test_an_ended_run_says_cancelled_and_not_sent() -> None:
    trajectory = _stopped()
    tree = RunTree.from_trajectory(trajectory)
    m = tree.meters_view()
    assert m["ended"] and (m["sub_calls_in_flight"], m["sub_calls_queued"]) == (2, 6)
    meters = meters_html(m)
    assert "0 / 50 · 2 cancelled, 6 not sent" in meters, meters
    assert "in flight" not in meters and "queued" not in meters
    page, text = render_html(trajectory), render_text(trajectory)
    assert "2 cancelled · 6 not sent" in page and "2 cancelled / 6 not sent" in text
    assert "in flight" not in page.split("rlmnb-timeline")[0] and "6 queued" not in page + text


def test_a_running_run_still_says_in_flight_and_queued() -> None:
    trajectory = _stopped()
    running = Trajectory(trajectory.events[:-1])
    m = RunTree.from_trajectory(running).meters_view()
    assert not m["ended"] and "0 (+2 in flight, +6 queued)" in meters_html(m)
    assert "2 in flight · 6 queued" in render_html(running)
