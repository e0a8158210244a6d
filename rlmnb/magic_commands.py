"""The `%rlm` line subcommands: config, last, export PATH, view PATH.

They read what the cell magic recorded (the last RunResult, the settings) and show or save it;
none starts a run. `RLMMagics._line` hands its line here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from .magic_parsing import unquote

if TYPE_CHECKING:
    from .api import RunResult

__all__ = ["LineHost", "export", "last_run", "line_command", "show", "view"]


class LineHost(Protocol):
    """What the subcommands need of the magics object: its last run and its settings report."""

    last: RunResult | None

    def config_report(self) -> str: ...


def line_command(magics: LineHost, line: str) -> Any:
    """Run one `%rlm` subcommand: config, last, export PATH, view PATH."""
    words = line.split(None, 1)
    command = words[0] if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if command == "config":
        print(magics.config_report())
        return None
    if command == "last":
        show(last_run(magics).trajectory)
        return None
    if command == "export":
        return export(magics, rest)
    if command == "view":
        return view(rest)
    what = f"unknown subcommand {command!r}" if command else "no subcommand"
    raise UsageError(f"%rlm: {what}. Use %rlm config | last | export PATH | view PATH, or a %%rlm cell to "
                     f"ask a question.")


def last_run(magics: LineHost) -> RunResult:
    """The last run of this kernel's %%rlm, or a UsageError saying there is none."""
    if magics.last is None:
        raise UsageError("No %%rlm run yet in this kernel.")
    return magics.last


def show(trajectory: Any) -> None:
    """A trajectory as the live widget's tree, or the static view where ipywidgets is missing."""
    from IPython.display import display

    try:
        from .widget import RunWidget

        RunWidget.from_trajectory(trajectory).display()
    except ImportError:
        from .views import TrajectoryView

        display(TrajectoryView(trajectory))  # type: ignore[no-untyped-call]


def export(magics: LineHost, raw: str) -> None:
    """`%rlm export PATH`: the last run as a RunResult (.json) or a standalone page (.html)."""
    if not raw:
        raise UsageError("%rlm export needs a path ending in .json or .html.")
    result = last_run(magics)
    path = Path(os.path.expanduser(unquote(raw)))
    suffix = path.suffix.lower()
    if suffix not in (".json", ".html", ".htm"):
        raise UsageError(f"%rlm export {raw}: use a path ending in .json (the RunResult) or .html (a page).")
    if not path.parent.is_dir():
        raise UsageError(f"%rlm export {raw}: the folder {path.parent} does not exist.")
    if suffix == ".json":
        result.save(path)
    else:
        from .views import render_html

        path.write_text(render_html(result.trajectory, full_page=True), encoding="utf-8")
    print(f"Saved the last run to {path}")


def view(raw: str) -> None:
    """`%rlm view PATH`: show a saved trajectory."""
    if not raw:
        raise UsageError("%rlm view needs the path of a saved trajectory (.json).")
    from .events import Trajectory

    path = Path(os.path.expanduser(unquote(raw)))
    try:
        trajectory = Trajectory.load(path)
    except FileNotFoundError:
        raise UsageError(f"%rlm view: no file at {path}; check the path.") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"%rlm view {raw}: not a saved rlmnb trajectory ({exc}).") from None
    show(trajectory)
