"""The saved output of a run that is still going: what a notebook keeps if the kernel is lost mid-run.

While a run goes on, the live widget refreshes its display's saved parts now and then (`RunWidget`): the
static tree so far, and a note saying where the run's journal is and the cell line that continues it
(`%%rlm ... --resume N`). `Snapshot` is that note's record; it travels in the trajectory JSON under
`"snapshot"` (the JupyterLab extension's `view.ts` draws the same note) and as HTML and text here. The
final refresh, when the run ends, carries no snapshot: the run is whole.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from rlmnb.views._html import FONT, ORANGE

__all__ = ["Snapshot", "snapshot_html", "snapshot_text"]


@dataclass(frozen=True)
class Snapshot:
    """Where a running run's journal is and how to go on from it.

    `journal`: the journal file's path; `resume`: the cell's first line that continues the run
    (`%%rlm <the cell's options> --resume N`, N as `%rlm runs` numbers it when the note was written, or the
    journal's path when it is not in the folder `%rlm runs` lists); `saved`: when the note was written.
    """

    journal: str
    resume: str
    saved: float

    def to_dict(self) -> dict[str, Any]:
        return {"journal": self.journal, "resume": self.resume, "saved": self.saved}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(str(data.get("journal", "")), str(data.get("resume", "")), float(data.get("saved") or 0.0))


def snapshot_text(note: Snapshot) -> str:
    """The note as one plain sentence."""
    return (f"This run was still going when this output was saved. If it stopped there (the kernel restarted "
            f"or was lost), its journal {note.journal} holds it: go on with `{note.resume}` in a cell, with the "
            f"question below it and the same inputs defined.")


def snapshot_html(note: Snapshot) -> str:
    """The note as a banner above the tree (the extension's `snapshotView` draws the same)."""
    return (f'<div class="rlmnb-snapshot" style="{FONT};border-left:3px solid {ORANGE};padding:4px 8px;'
            f'margin:4px 0">This run was still going when this output was saved. If it stopped there (the kernel '
            f'restarted or was lost), its journal <code>{html.escape(note.journal)}</code> holds it: go on with '
            f'<code>{html.escape(note.resume)}</code> in a cell, with the question below it and the same inputs '
            f'defined.</div>')
