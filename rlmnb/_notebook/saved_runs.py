"""A run by its id, where "open as DataFrame" and "copy code to a new cell" find it: this kernel's
RunResult when it still holds it, else the trajectory saved in the notebook's output (a reopened
notebook with a fresh kernel), the run's journal, or a trajectory file.

The notebook the inserted code names is a hint, not a requirement: a renamed (or moved) notebook's run is
found in its journal (`.rlmnb/runs/<time>-<run id>.jsonl`, by its id) or in the notebooks of the working
folder (the kernel's folder is the notebook's), the one this kernel serves first. When none holds it, the
error is one line that says what to do (`RunNotFound`, shown without a traceback).

Entry point: `saved_run(run_id, notebook=...)` -> RunResult (`rlmnb.saved_run`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlmnb._api import RunResult
from rlmnb._ground.errors import ConfigError
from rlmnb.events import Trajectory

__all__ = ["RunNotFound", "saved_run"]

NOTEBOOKS_READ = 50  # notebooks of the working folder read for a run, newest first


class RunNotFound(ConfigError):
    """No kernel, notebook, journal or file holds the run. Shown in a notebook as its one line."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def saved_run(run_id: str, notebook: str | Path | None = None) -> RunResult:
    """The run `run_id`: this kernel's RunResult when it still has it (`_rlm`, `-o NAME`, `%rlm export`'s
    history), else rebuilt from the trajectory saved in `notebook`'s outputs or in a `.json` / `.rlmnb.json`
    file, else from the run's journal or another notebook of the working folder (so "open as DataFrame" works
    in a reopened, renamed or moved notebook with a fresh kernel).

    Raises:
        RunNotFound (a ConfigError): no such run in this kernel, in `notebook`, in the journals or in the
            working folder's notebooks.
    """
    found = _kernel_run(run_id)
    if isinstance(found, RunResult):
        return found
    named = Path(notebook) if notebook is not None else None
    trajectory = _saved_trajectory(named, run_id) if named is not None and named.is_file() else None
    trajectory = trajectory or _journal_trajectory(run_id) or _folder_trajectory(run_id, named)
    if trajectory is None:
        raise RunNotFound(_not_found(run_id, named))
    from rlmnb._ground.usage import Usage

    final = trajectory.final(run_id)
    return RunResult(answer=final.answer if final else None, status=final.status if final else "interrupted",
                     usage=Usage.from_dict(final.usage) if final and final.usage else Usage(),
                     trajectory=trajectory, run_id=run_id, reason=final.reason if final else "",
                     error=final.error if final else None, verified=final.verified if final else None)


def _not_found(run_id: str, named: Path | None) -> str:
    from rlmnb._engine.journal import journal_folder

    where = f"this kernel, the journals in {journal_folder(True)} or the notebooks in {Path.cwd()}"
    head = (f"{named.name} holds no saved output of run {run_id!r}, and neither do {where}" if named is not None
            and named.is_file() else f"No run {run_id!r} in {where}")
    return (f"{head}: run its %%rlm cell again, or pass notebook= the saved .ipynb (or trajectory file) that shows "
            f"it (its output keeps the trajectory unless RLMMagics.embed_trajectory is off).")


def _kernel_run(run_id: str) -> RunResult | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    if ip is None:
        return None
    magics = ip.magics_manager.registry.get("RLMMagics")
    candidates = [*ip.user_ns.values(), *getattr(magics, "history", ())]
    return next((v for v in candidates if isinstance(v, RunResult) and v.run_id == run_id), None)


def _saved_trajectory(path: Path, run_id: str) -> Trajectory | None:
    """The trajectory of `run_id` saved in a notebook's outputs or a trajectory file; None when it holds none."""
    import json

    from rlmnb.events import MIME_TYPE

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    saved: list[Any] = [data.get("trajectory", data)] if "cells" not in data else [
        out.get("data", {}).get(MIME_TYPE) for cell in data["cells"] for out in cell.get("outputs", ())]
    for item in saved:
        if isinstance(item, dict) and "events" in item:
            trajectory = Trajectory.from_dict(item)
            if run_id in trajectory.run_ids():
                return trajectory
    return None


def _journal_trajectory(run_id: str) -> Trajectory | None:
    """The run's journal (named by its id) in the journal folder, as far as it was written."""
    from rlmnb._engine.journal import journal_folder, journal_paths, read_journal

    folder = journal_folder(True)
    for path in journal_paths(folder) if folder is not None else ():
        if path.stem.endswith(f"-{run_id}"):
            try:
                return read_journal(path).trajectory
            except (OSError, ValueError):
                return None
    return None


def _folder_trajectory(run_id: str, skip: Path | None) -> Trajectory | None:
    """The run saved in a notebook of the working folder: the one this kernel serves first, then the newest."""
    for path in _folder_notebooks(skip):
        trajectory = _saved_trajectory(path, run_id)
        if trajectory is not None:
            return trajectory
    return None


def _folder_notebooks(skip: Path | None) -> Iterator[Path]:
    here = Path.cwd()
    served = os.environ.get("JPY_SESSION_NAME")  # jupyter_server's path of this kernel's notebook
    seen = {skip.resolve()} if skip is not None and skip.exists() else set()
    dated = []
    for path in here.glob("*.ipynb"):
        try:
            dated.append((path.stat().st_mtime, path))
        except OSError:
            continue
    first = [Path(served)] if served and Path(served).is_file() else []
    for path in [*first, *(p for _, p in sorted(dated, reverse=True))][:NOTEBOOKS_READ]:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            yield path
