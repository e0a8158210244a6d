"""A running run's saved output (issue 45): when the widget refreshes it, and what the note says.

The kernel-level test (a real kernel killed mid-run) is test_kernel_lost_snapshot.py; these check the parts:
the line that continues a run, the journal's number as `%rlm runs` gives it, and the refresh cadence.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlmnb._notebook.commands import resume_line, resume_note
from rlmnb.events import MIME_TYPE, event_from_dict
from rlmnb.views._snapshot import Snapshot

pytest.importorskip("ipywidgets")


@pytest.mark.parametrize(("line", "expected"), [
    ("-m root -s sub -i items", "%%rlm -m root -s sub -i items --resume 2"),
    ("-m root --resume 3 --force -o run", "%%rlm -m root -o run --resume 2"),
    ("-m root --resume -i items", "%%rlm -m root -i items --resume 2"),
    ("-m root --resume=last --continue --dry-run", "%%rlm -m root --resume 2"),
    ("-m root --replay 'my run.json' -f doc='a b.txt'", "%%rlm -m root -f 'doc=a b.txt' --resume 2"),
])
def test_the_resume_line_keeps_the_cells_options_and_names_the_run(line: str, expected: str) -> None:
    assert resume_line(line, "2") == expected


def test_the_note_numbers_the_journal_as_rlm_runs_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(folder))
    older, newer = folder / "20260101-000000-aaa.jsonl", folder / "20260102-000000-bbb.jsonl"
    unreadable = folder / "20260103-000000-zzz.jsonl"  # the newest file, but no journal: %rlm runs skips it
    for age, path in ((100, older), (0, newer), (-50, unreadable)):
        path.write_text('{"kind": "journal", "version": 1}\n' if path != unreadable else "{}\n")
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))
    note = resume_note("aaa", folder=folder, line="-m root")
    assert note is not None and note.journal == str(older) and note.resume == "%%rlm -m root --resume 2"
    elsewhere = resume_note("aaa", folder=tmp_path / "runs", line="-m root")
    assert elsewhere is not None
    monkeypatch.setenv("RLMNB_JOURNAL_DIR", str(tmp_path / "other"))  # not the folder %rlm runs lists: by path
    by_path = resume_note("bbb", folder=folder, line="-m root")
    assert by_path is not None and by_path.resume == f"%%rlm -m root --resume {newer}"
    assert resume_note("ccc", folder=folder, line="") is None and resume_note("aaa", folder=None, line="") is None


class Handle:
    """A display handle that keeps what each update showed."""

    def __init__(self) -> None:
        self.bundles: list[dict[str, Any]] = []

    def update(self, obj: Any) -> None:
        self.bundles.append(obj._repr_mimebundle_())


def _event(kind: str, seq: int, **fields: Any) -> Any:
    base = {"kind": kind, "seq": seq, "ts": 1000.0 + seq, "run_id": "r1", "root_run_id": "r1"}
    if kind == "run_started":
        fields = {"question": "q", "model": "root", "sub_model": "sub", "sandbox": "local", **fields}
    return event_from_dict({**base, **fields})


def test_the_widget_refreshes_its_saved_output_each_turn_and_then_every_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._notebook import widget
    from rlmnb._notebook.widget import RunWidget

    monkeypatch.setattr(widget, "SNAPSHOT_SHARE", float("inf"))  # no wait for the last refresh's cost
    view = RunWidget(snapshot_interval=3600)
    handle = Handle()
    view._handle = handle
    note = Snapshot(journal="/runs/x-r1.jsonl", resume="%%rlm -m root --resume 1", saved=0.0)
    assert view.snapshot() is False  # no run yet, and no way to say where its journal is
    view.resume = lambda run_id: note if run_id == "r1" else None
    view.on_event(_event("run_started", 0))
    view.on_event(_event("turn_started", 1, turn=1, max_turns=5))
    assert view.snapshot() is True  # a new turn
    bundle = handle.bundles[-1]
    assert bundle[MIME_TYPE]["snapshot"]["resume"] == note.resume
    assert note.resume in bundle["text/html"] and note.journal in bundle["text/plain"]
    view.on_event(_event("code_output", 2, turn=1, text="north 120\n"))
    assert view.snapshot() is False  # the same turn, within the interval
    assert view.snapshot(force=True) is True and "north 120" in handle.bundles[-1]["text/html"]
    assert view.snapshot() is False  # nothing new
    view.on_event(_event("turn_started", 3, turn=2, max_turns=5))
    assert view.snapshot() is True and view.snapshots == 3
    view.on_event(_event("run_finished", 4, status="submitted", answer="north"))
    view.finish()
    final = handle.bundles[-1]
    assert "snapshot" not in final[MIME_TYPE] and note.resume not in final["text/html"]
    assert view.snapshot(force=True) is False  # a finished run is whole
    view.close()
