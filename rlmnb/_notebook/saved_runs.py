"""A run by its id, where "open as DataFrame" and "copy code to a new cell" find it: this kernel's
RunResult when it still holds it, else the trajectory saved in the notebook's output (a reopened
notebook with a fresh kernel) or in a trajectory file.

Entry point: `saved_run(run_id, notebook=...)` -> RunResult (`rlmnb.saved_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlmnb._api import RunResult
from rlmnb.events import Trajectory

__all__ = ["saved_run"]


def saved_run(run_id: str, notebook: str | Path | None = None) -> RunResult:
    """The run `run_id`: this kernel's RunResult when it still has it (`_rlm`, `-o NAME`, `%rlm export`'s
    history), else rebuilt from the trajectory saved in `notebook`'s outputs or in a `.json` / `.rlmnb.json`
    file (what "open as DataFrame" inserts, so it works in a reopened notebook with a fresh kernel).

    Raises:
        rlmnb.ConfigError: no such run in this kernel, and none saved in `notebook`.
    """
    from rlmnb._ground.errors import ConfigError

    found = _kernel_run(run_id)
    if isinstance(found, RunResult):
        return found
    if notebook is None:
        raise ConfigError(f"This kernel has no run {run_id!r}; pass notebook= the .ipynb that shows it.")
    trajectory = _saved_trajectory(Path(notebook), run_id)
    from rlmnb._ground.usage import Usage

    final = trajectory.final(run_id)
    return RunResult(answer=final.answer if final else None, status=final.status if final else "interrupted",
                     usage=Usage.from_dict(final.usage) if final and final.usage else Usage(),
                     trajectory=trajectory, run_id=run_id, reason=final.reason if final else "",
                     error=final.error if final else None, verified=final.verified if final else None)


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


def _saved_trajectory(path: Path, run_id: str) -> Trajectory:
    import json

    from rlmnb._ground.errors import ConfigError
    from rlmnb.events import MIME_TYPE

    if not path.is_file():
        raise ConfigError(f"No file at {path}; pass the notebook (or trajectory file) that holds run {run_id!r}.")
    data = json.loads(path.read_text(encoding="utf-8"))
    saved: list[Any] = [data.get("trajectory", data)] if "cells" not in data else [
        out.get("data", {}).get(MIME_TYPE) for cell in data["cells"] for out in cell.get("outputs", ())]
    for item in saved:
        if isinstance(item, dict) and "events" in item:
            trajectory = Trajectory.from_dict(item)
            if run_id in trajectory.run_ids():
                return trajectory
    raise ConfigError(f"{path.name} holds no saved output of run {run_id!r}; save the notebook after the run "
                      f"(its output keeps the trajectory unless RLMMagics.embed_trajectory is off).")
