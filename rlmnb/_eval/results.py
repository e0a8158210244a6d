"""One result per (task, size, method, instance), kept as JSON lines so an evaluation can resume.

A row is appended, flushed and fsynced as soon as its run ends, so an interrupted evaluation loses at
most the run in flight; a torn last line (a kill mid-write) is ignored on reading, and that run is redone.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RESULTS_FILE", "ResultRow", "ResultsFile", "latest", "now", "read_rows", "short_json"]

RESULTS_FILE = "results.jsonl"
_MAX_ANSWER_CHARS = 2_000  # long answers (pair lists) are cut in the row; the score is computed first


@dataclass(frozen=True)
class ResultRow:
    """The outcome of one method on one instance: score, bill and what was answered."""

    task: str
    size: int
    method: str
    index: int
    seed: int
    model: str
    sub_model: str
    kind: str = ""
    tokens: int = 0
    score: float = 0.0
    status: str = ""
    error: str | None = None
    prediction: str = ""
    truth: str = ""
    cost_usd: float | None = 0.0
    unpriced_calls: int = 0
    root_calls: int = 0
    sub_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    root_input_tokens: int | None = None   # tokens per answer, split (None: the method cannot tell)
    root_output_tokens: int | None = None
    sub_tokens: int | None = None          # every sub-call's input + output
    cached_input_tokens: int = 0           # input tokens read from the provider's prompt cache
    saved_usd: float = 0.0                 # what the prompt cache saved against the full input rate
    wall_s: float = 0.0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    finished_at: float = 0.0

    @property
    def key(self) -> tuple[str, int, str, int, int, str, str]:
        """What identifies a run for resuming: the same key is never run twice into one results file."""
        return (self.task, self.size, self.method, self.index, self.seed, self.model, self.sub_model)

    @property
    def calls(self) -> int:
        return self.root_calls + self.sub_calls

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultRow:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def short_json(value: Any, limit: int = _MAX_ANSWER_CHARS) -> str:
    """A JSON rendering of an answer, cut to `limit` characters with a note of the full length."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        return text[:limit] + f"... [{len(text):,} characters]"
    return text


class ResultsFile:
    """The append-only results of one output folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / RESULTS_FILE

    def rows(self) -> list[ResultRow]:
        return list(read_rows(self.path))

    def append(self, row: ResultRow) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row.to_dict(), ensure_ascii=False, default=str)
        torn = False
        if self.path.is_file() and self.path.stat().st_size:
            with self.path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"  # a write cut short by a kill: end it so this row stays whole
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if torn else "") + line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def read_rows(path: str | Path) -> Iterator[ResultRow]:
    """The rows of a results file; unreadable lines (a torn last write) are skipped."""
    target = Path(path)
    if not target.is_file():
        return
    with target.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "task" in data:
                yield ResultRow.from_dict(data)


def latest(rows: Iterable[ResultRow]) -> dict[tuple[str, int, str, int, int, str, str], ResultRow]:
    """One row per key (the last written wins)."""
    out: dict[tuple[str, int, str, int, int, str, str], ResultRow] = {}
    for row in rows:
        out[row.key] = row
    return out


def now() -> float:
    return round(time.time(), 3)
