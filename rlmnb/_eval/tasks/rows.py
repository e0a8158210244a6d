"""Tasks made of given rows (JSON Lines files, published datasets) rather than generated ones.

A row is one question over its own inputs with its accepted answers and a metric (`rlmnb._eval.tasks.metrics`).
Instance `index` is row `index` in the source's order (the seed does not reorder rows). Sizes:

- `by_size=False` (JSON Lines): every row whatever the size; the evaluation runs them at its first size
  only, which then just labels the rows (`Instance.tokens` holds each row's real size).
- `by_size=True` (published datasets): the rows whose inputs are more than half and at most `size` tokens
  (e.g. `--sizes 32k` takes rows of 16k-32k tokens), so a size picks a length band as in the papers' plots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rlmnb._eval.tasks.base import Instance, format_size
from rlmnb._ground.errors import ConfigError

__all__ = ["Row", "RowsTask"]


@dataclass(frozen=True)
class Row:
    """One question: `inputs` (name -> text), the accepted `answers`, the `metric` name, facts in `meta`."""

    id: str
    question: str
    inputs: Mapping[str, str] = field(repr=False)
    answers: Sequence[Any]
    metric: str = "exact"
    meta: Mapping[str, Any] = field(default_factory=dict)
    tokens: int | None = None  # the source's own count, when it has one


class RowsTask:
    """A task over rows loaded once, on first use (`load` may raise ConfigError saying what to do)."""

    def __init__(self, name: str, load: Callable[[], list[Row]], *, by_size: bool, description: str = "",
                 scorer: Callable[[Instance, Any], float] | None = None) -> None:
        self.name = name
        self.description = description
        self.by_size = by_size
        self.fixed_size = not by_size
        self._load = load
        self._scorer = scorer

    @cached_property
    def rows(self) -> list[Row]:
        rows = self._load()
        if not rows:
            raise ConfigError(f"task {self.name} has no rows: check the file or folder it reads.")
        return rows

    @cached_property
    def _tokens(self) -> list[int]:
        from rlmnb._eval.tasks.text import size_tokens

        return [row.tokens if row.tokens is not None else sum(size_tokens(t) for t in row.inputs.values())
                for row in self.rows]

    def rows_at(self, size: int) -> list[int]:
        """Indexes of the rows an evaluation at `size` uses."""
        if not self.by_size:
            return list(range(len(self.rows)))
        return [i for i, tokens in enumerate(self._tokens) if size // 2 < tokens <= size]

    def count(self, size: int) -> int:
        return len(self.rows_at(size))

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        chosen = self.rows_at(size)
        if not 0 <= index < len(chosen):
            low, high = min(self._tokens), max(self._tokens)
            raise ConfigError(f"task {self.name} has {len(chosen)} row(s) at size {format_size(size)} (rows of "
                              f"{low:,}-{high:,} tokens), so no instance {index}: pick a size in that range or a "
                              f"smaller -n.")
        row, tokens = self.rows[chosen[index]], self._tokens[chosen[index]]
        return Instance(task=self.name, size=size, index=index, seed=seed, question=row.question,
                        inputs=dict(row.inputs), answer=list(row.answers), kind=row.metric, tokens=tokens,
                        meta={"id": row.id, **dict(row.meta)})

    def score(self, instance: Instance, prediction: Any) -> float:
        if self._scorer is not None:
            return self._scorer(instance, prediction)
        from rlmnb._eval.tasks.metrics import get_metric

        return get_metric(instance.kind)(list(instance.answer), prediction)
