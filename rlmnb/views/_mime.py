"""The MIME bundle of a run: what a notebook saves and every front end picks from.

`text/plain` (the stable summary line), script-free `text/html`, and the trajectory JSON under
`MIME_TYPE` (long strings clipped, replies kept whole so a saved run can be replayed) that the
JupyterLab extension renders.
"""

from __future__ import annotations

from typing import Any

from rlmnb.events import MIME_TYPE, SCHEMA_VERSION, Trajectory
from rlmnb.views._answer import answer_json
from rlmnb.views._fold import RunTree
from rlmnb.views._format import clip
from rlmnb.views._html import CALLS_SHOWN, render_html
from rlmnb.views._text import summary_line

__all__ = ["MIME_TYPE", "TrajectoryView", "compact_trajectory", "mime_bundle"]

JSON_CALL_CHARS = 1_000   # prompt and reply characters kept per sub-call in the saved MIME JSON
JSON_TEXT_CHARS = 20_000  # other strings kept in the saved MIME JSON

_CALL_TEXT_FIELDS = ("prompt",)  # replies and errors stay whole: replay serves them from the record
_REPLAY_FIELDS = {"model_reply": ("text",)}  # root replies stay whole for the same reason


def compact_trajectory(trajectory: Trajectory, *, call_chars: int = JSON_CALL_CHARS,
                       text_chars: int = JSON_TEXT_CHARS, opened: float | None = None) -> dict[str, Any]:
    """`trajectory.to_dict()` with long strings clipped, so a saved notebook stays a sensible size.

    Sub-call prompts keep `call_chars`, other strings `text_chars`; model replies (root and sub) are
    kept whole, with every request hash, so a saved notebook's run can still be replayed. The streamed output
    of a turn whose result was recorded is left out (the result holds it). `"clipped": true`
    is set when anything was cut (`%rlm export` and `RunResult.save` keep everything). Built from
    each event's attributes directly: this runs once per displayed run over every event.

    A dict or list answer also travels as `answer_json` text: a saved notebook's JSON has its keys
    sorted, and the answer must show in the order the run produced it. `opened` (when the user's cell
    started) lets the extension show the time the user waited, as the live widget did.
    """
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
    every = trajectory.events
    executed = {(e.run_id, getattr(e, "turn", None)) for e in every if e.kind == "code_executed"}
    for event in every:
        if event.kind == "code_output" and (event.run_id, getattr(event, "turn", None)) in executed:
            continue  # its turn's CodeExecuted holds the whole output: the streamed pieces would repeat it
        attributes = getattr(event, "__dict__", None)
        data = {"kind": event.kind, **attributes} if attributes is not None else event.to_dict()
        if event.kind.startswith("sub_call"):  # thousands of these: look at their long strings only
            for key in _CALL_TEXT_FIELDS:
                value = data.get(key)
                if value is not None and len(value) > call_chars:
                    data[key] = clip(value, call_chars, left_out="not recorded")
                    clipped = True
        else:
            keep = _REPLAY_FIELDS.get(event.kind, ())
            data = {key: value if key in keep else cut(value, text_chars) for key, value in data.items()}
            if event.kind in ("run_finished", "submitted") and isinstance(data.get("answer"), dict | list):
                data["answer_json"] = answer_json(data["answer"])
        events.append(data)
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "events": events}
    if opened is not None:
        out["opened"] = opened
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
