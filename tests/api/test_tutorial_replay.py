"""Each tutorial's saved run replays from the trajectory embedded in the committed notebook (issue 7).

The notebooks keep every model reply and request hash in their saved output, so a run recorded there
(or against a real provider) can be re-run offline: same code, same sandbox, same answer, zero cost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from pydantic import BaseModel

from rlmnb import RLM, ConfigError, Trajectory
from rlmnb.events import MIME_TYPE, ModelReply, SubCallFinished
from rlmnb.testing.generators import haystack, labelled_table, log_folder
from rlmnb.testing.scenarios import report_text

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def saved_runs(name: str) -> list[tuple[str, Trajectory]]:
    """(cell source, trajectory) for every run view saved in a tutorial."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    runs = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if MIME_TYPE in data:
                runs.append((cell.source, Trajectory.from_dict(dict(data[MIME_TYPE]))))
    return runs


def _files(tmp_path: Path) -> dict[str, Any]:
    ops = log_folder(tmp_path / "ops", seed=0, days=5, lines_per_day=2000)
    return {"logs": ops / "logs", "runbook": ops / "runbook.md", "costs": ops / "costs.parquet",
            "services": ops / "services.csv"}


INPUTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "01_quickstart": lambda _: {"text": haystack(20_000_000, seed=1).text},
    "02_dataframes": lambda _: {"tickets": labelled_table(1_000_000, seed=0)[0]},
    "03_files": _files,
    "04_recursion_and_verification": lambda _: {"report": report_text(sections=6, section_chars=50_000, seed=3)[0]},
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_each_tutorial_run_replays_to_its_saved_answer(name: str, tmp_path: Path) -> None:
    runs = saved_runs(name)
    assert runs, f"{name} has no saved run view"
    inputs = INPUTS[name](tmp_path)
    for source, trajectory in runs:
        recorded = trajectory.final()
        assert recorded is not None and recorded.status == "submitted", source
        again = RLM.replay(trajectory, schema=LabelCounts if "--schema" in source else None, **inputs)
        assert again.status == recorded.status, source
        assert _plain(again.answer) == recorded.answer, source
        assert again.usage.cost_usd == 0.0
        recorded_calls = len(trajectory.of(ModelReply)) + len(trajectory.of(SubCallFinished))
        assert again.usage.calls == recorded_calls, source  # every call served from the record, no other


class LabelCounts(BaseModel):  # the schema of tutorial 2, as defined there
    counts: dict[str, int]
    total: int


def test_a_schema_run_needs_its_schema_again(tmp_path: Path) -> None:
    (_, trajectory), = saved_runs("02_dataframes")
    with pytest.raises(ConfigError, match="schema LabelCounts; pass it again"):
        RLM.replay(trajectory, tickets=labelled_table(1_000, seed=0)[0])


def _plain(answer: Any) -> Any:
    from rlmnb._ground.jsonable import to_jsonable

    return to_jsonable(answer)
