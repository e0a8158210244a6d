"""Your own questions as JSON Lines: `rlmnb eval --task jsonl:PATH`.

One JSON object per line:

    {"id": "q1", "question": "...", "context": "the text", "answers": ["..."], "metric": "exact"}
    {"id": "q2", "question": "...", "files": {"a.txt": "text", "b.txt": "text"}, "answers": [3], "metric": "numeric"}
    {"id": "q3", "question": "...", "files": ["docs/a.txt", "docs/b.txt"], "answers": ["B"], "metric": "choice"}

`context` (one text, bound as `inputs["context"]`) or `files` (several inputs: a mapping of names to
texts, or a list of paths read relative to the JSONL file, each bound under its file name); `answers`
one accepted answer or a list of them; `metric` one of `rlmnb._eval.tasks.metrics.METRICS` (default `exact`).
Blank lines are skipped. Every row runs at the evaluation's first size, which only labels the rows.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlmnb._eval.tasks.metrics import get_metric
from rlmnb._eval.tasks.rows import Row, RowsTask
from rlmnb._ground.errors import ConfigError

__all__ = ["jsonl_task", "read_rows"]


def read_rows(path: str | Path) -> list[Row]:
    """The rows of a JSONL task file; ConfigError naming the line and the field for any bad row."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise ConfigError(f"jsonl task file {str(source)!r} does not exist: pass --task jsonl:PATH to a .jsonl file.")
    rows: list[Row] = []
    seen: set[str] = set()
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source.name} line {number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{where} is not JSON ({exc}): write one JSON object per line.") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{where} is not a JSON object: write one {{...}} per line.")
        row = _row(data, where, source.parent)
        if row.id in seen:
            raise ConfigError(f"{where} repeats id {row.id!r}: give every row its own id.")
        seen.add(row.id)
        rows.append(row)
    return rows


def _row(data: dict[str, Any], where: str, folder: Path) -> Row:
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ConfigError(f"{where} has no \"question\" text: add one.")
    if "answers" not in data:
        raise ConfigError(f"{where} has no \"answers\": add the accepted answer(s).")
    answers = data["answers"] if isinstance(data["answers"], list) else [data["answers"]]
    metric = str(data.get("metric") or "exact")
    try:
        get_metric(metric)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if ("context" in data) == ("files" in data):
        raise ConfigError(f"{where} needs exactly one of \"context\" (a text) or \"files\" (several inputs).")
    inputs: dict[str, str]
    if "context" in data:
        if not isinstance(data["context"], str):
            raise ConfigError(f"{where}: \"context\" must be a text.")
        inputs = {"context": data["context"]}
    else:
        inputs = _files(data["files"], where, folder)
    ident = str(data.get("id", where))
    meta = {k: v for k, v in data.items() if k not in ("id", "question", "answers", "metric", "context", "files")}
    return Row(id=ident, question=question, inputs=inputs, answers=answers, metric=metric, meta=meta)


def _files(files: Any, where: str, folder: Path) -> dict[str, str]:
    if isinstance(files, dict) and files and all(isinstance(v, str) for v in files.values()):
        return {str(k): v for k, v in files.items()}
    if isinstance(files, list) and files and all(isinstance(p, str) for p in files):
        out = {}
        for name in files:
            path = (folder / name).expanduser()
            if not path.is_file():
                raise ConfigError(f"{where}: file {name!r} does not exist (paths are read relative to the JSONL file).")
            out[path.name] = path.read_text(encoding="utf-8", errors="replace")
        return out
    raise ConfigError(f"{where}: \"files\" must be a non-empty mapping of names to texts or a list of paths.")


def jsonl_task(path: str) -> RowsTask:
    return _task(str(Path(path.strip()).expanduser().resolve()))


@lru_cache(maxsize=16)
def _task(path: str) -> RowsTask:
    return RowsTask(f"jsonl:{path}", lambda: read_rows(path), by_size=False, description=__doc__ or "")
