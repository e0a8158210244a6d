"""Tasks made of given rows (JSON Lines files, published datasets, ordinary questions) rather than generated ones.

A row is one question over its own inputs with its accepted answers and a metric (`rlmnb._eval.tasks.metrics`).
An input is a text or a table (a pandas DataFrame): the rlm methods bind a table as a table (the model
queries it with `sql()` and pandas), while methods that take one text (`direct`, the peers) read it as CSV
(`RowInstance.text`), and its size is counted on that CSV.
Instance `index` is row `index` in the source's order (the seed does not reorder rows). Sizes:

- `by_size=False` (JSON Lines): every row whatever the size; the evaluation runs them at its first size
  only, which then just labels the rows (`Instance.tokens` holds each row's real size).
- `by_size=True` (published datasets): the rows whose inputs are more than half and at most `size` tokens
  (e.g. `--sizes 32k` takes rows of 16k-32k tokens), so a size picks a length band as in the papers' plots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from rlmnb._eval.tasks.base import Instance, format_size
from rlmnb._ground.errors import ConfigError

__all__ = ["Row", "RowInstance", "RowsTask", "input_text", "is_table"]


def is_table(value: Any) -> bool:
    """Whether `value` is a pandas DataFrame (recognised by its class, so pandas is never imported here)."""
    kind = type(value)
    return kind.__name__ == "DataFrame" and kind.__module__.split(".", 1)[0] == "pandas"


def input_text(value: str | Any) -> str:
    """An input as one text: a text as is, a table as CSV with its header line and no index."""
    if isinstance(value, str):
        return value
    text: str = value.to_csv(index=False)
    return text


@dataclass(frozen=True)
class Row:
    """One question: `inputs` (name -> a text or a DataFrame), the accepted `answers`, the `metric` name, facts
    in `meta`.

    Raises:
        TypeError: an input is neither a text nor a pandas DataFrame.
    """

    id: str
    question: str
    inputs: Mapping[str, Any] = field(repr=False)
    answers: Sequence[Any]
    metric: str = "exact"
    meta: Mapping[str, Any] = field(default_factory=dict)
    tokens: int | None = None  # the source's own count, when it has one

    def __post_init__(self) -> None:
        for name, value in self.inputs.items():
            if not (isinstance(value, str) or is_table(value)):
                raise TypeError(f"row {self.id}: input {name!r} is a {type(value).__name__}; give a text or a "
                                f"pandas DataFrame.")


@dataclass(frozen=True)
class RowInstance(Instance):
    """An `Instance` whose inputs may hold tables: `text` and `chars` read each table as its CSV."""

    @property
    def chars(self) -> int:
        return sum(len(input_text(v)) for v in self.inputs.values())

    @property
    def text(self) -> str:
        """The inputs as one text, as `Instance.text` gives it, with every table as CSV."""
        as_texts = replace(self, inputs={name: input_text(v) for name, v in self.inputs.items()})
        return super(RowInstance, as_texts).text


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

        return [row.tokens if row.tokens is not None else sum(size_tokens(input_text(v)) for v in row.inputs.values())
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
        return RowInstance(task=self.name, size=size, index=index, seed=seed, question=row.question,
                           inputs=dict(row.inputs), answer=list(row.answers), kind=row.metric, tokens=tokens,
                           meta={"id": row.id, **dict(row.meta)})

    def score(self, instance: Instance, prediction: Any) -> float:
        if self._scorer is not None:
            return self._scorer(instance, prediction)
        from rlmnb._eval.tasks.metrics import get_metric

        return get_metric(instance.kind)(list(instance.answer), prediction)
