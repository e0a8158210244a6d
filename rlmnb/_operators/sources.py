"""Where llm_map's items come from, chunk by chunk, and what shape its result takes.

Lists and pandas values are in memory already; tables (pyarrow Table/Dataset/RecordBatchReader, a
DuckDB relation, a Polars DataFrame/LazyFrame/Series) are streamed as record batches and never
loaded whole. A table is recognised by its module and class name, so nothing here imports pandas,
pyarrow, DuckDB or Polars unless the value is one of theirs. Each item becomes one text: strings as
they are, a row as a one-line JSON record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

CHUNK_ROWS = 10_000  # rows read from a table at a time (~200 packs a round): the map's memory stays bounded


def _family(value: Any) -> tuple[str, str]:
    cls = type(value)
    return cls.__module__.split(".")[0], cls.__name__


_RECORD = json.JSONEncoder(ensure_ascii=False, default=str, separators=(", ", ": "))  # one encoder for every row


def record_text(record: Any) -> str:
    """One row (a mapping) as a compact JSON record; values JSON cannot hold are shown as text."""
    return _RECORD.encode(record)


def item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        return record_text(item)
    return str(item)


@dataclass
class Source:
    """Items as chunks of texts; `kind` decides the result's shape, `length` is None when unknown."""

    kind: str  # "list" | "series" | "frame" | "table"
    length: int | None
    chunks: Iterator[list[str]]
    index: Any = None  # the pandas index to put the result on
    name: Any = None  # a Series' name, kept on the result


def open_source(items: Any, chunk_rows: int | None = None) -> Source:
    """Recognise `items`; TypeError with what is accepted when it is none of those."""
    chunk_rows = chunk_rows or CHUNK_ROWS
    module, name = _family(items)
    if isinstance(items, str | bytes):
        raise TypeError("llm_map() takes a list of items, not one string; wrap it: llm_map([text], ...), or split "
                        "it into pieces first.")
    if module == "pandas" and name == "Series":
        return Source("series", len(items), _slices(items, chunk_rows, lambda s: [item_text(v) for v in s.tolist()]),
                      index=items.index, name=items.name)
    if module == "pandas" and name == "DataFrame":
        return Source("frame", len(items), _slices(items, chunk_rows, _frame_texts), index=items.index)
    if module == "pyarrow":
        return _arrow_source(items, name, chunk_rows)
    if module == "duckdb":
        return Source("table", None, _batch_texts(items.to_arrow_reader(chunk_rows)))
    if module == "polars":
        return _polars_source(items, name, chunk_rows)
    if isinstance(items, dict):
        raise TypeError("llm_map() takes a list, a pandas Series/DataFrame or a table, not a dict; pass "
                        "list(d.values()) or a DataFrame.")
    if isinstance(items, Sequence | Iterable):
        values = [item_text(v) for v in items]
        return Source("list", len(values), iter([values]) if values else iter([]))
    raise TypeError(f"llm_map() takes a list of str, a pandas Series or DataFrame, or a table (DuckDB, Polars, "
                    f"Arrow), got {name}.")


def _frame_texts(frame: Any) -> list[str]:
    columns = [str(c) for c in frame.columns]
    return [record_text(dict(zip(columns, row, strict=True))) for row in frame.itertuples(index=False, name=None)]


def _slices(value: Any, rows: int, render: Any) -> Iterator[list[str]]:
    for start in range(0, len(value), rows):
        yield render(value.iloc[start: start + rows])


def _batch_texts(batches: Iterable[Any]) -> Iterator[list[str]]:
    """Arrow record batches as item texts; single-column tables give the bare values."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if batch.num_columns == 1:
            yield [item_text(v) for v in batch.column(0).to_pylist()]
        else:
            yield [record_text(r) for r in batch.to_pylist()]


def _arrow_source(items: Any, name: str, rows: int) -> Source:
    if name == "Table":
        return Source("table", items.num_rows, _batch_texts(items.to_batches(max_chunksize=rows)))
    if name == "RecordBatch":
        return Source("table", items.num_rows, _batch_texts([items]))
    if name == "RecordBatchReader":
        return Source("table", None, _batch_texts(items))
    if name in ("ChunkedArray", "Array") or name.endswith("Array"):
        import pyarrow as pa

        return _arrow_source(pa.table({"value": items}), "Table", rows)
    if hasattr(items, "to_batches") and hasattr(items, "count_rows"):  # pyarrow.dataset.Dataset and friends
        return Source("table", None, _batch_texts(items.to_batches(batch_size=rows)))
    raise TypeError(f"llm_map() cannot read a pyarrow {name}; pass a Table, a Dataset or a RecordBatchReader.")


def _polars_source(items: Any, name: str, rows: int) -> Source:
    if name == "Series":
        return Source("table", len(items), _polars_texts(items.to_frame().iter_slices(rows)))
    if name == "DataFrame":
        return Source("table", items.height, _polars_texts(items.iter_slices(rows)))
    if name == "LazyFrame":
        return Source("table", None, _polars_texts(items.collect_batches(chunk_size=rows)))
    raise TypeError(f"llm_map() cannot read a polars {name}; pass a DataFrame, LazyFrame or Series.")


def _polars_texts(frames: Iterable[Any]) -> Iterator[list[str]]:
    """Polars slices as item texts, through Arrow (zero-copy) so rows read exactly as an Arrow table's do."""
    return _batch_texts(batch for frame in frames for batch in frame.to_arrow().to_batches())


class MapList(list[Any]):
    """llm_map's result for a list input: a plain list with `.attrs` (as a pandas Series has)."""

    attrs: dict[str, Any]

    def __init__(self, values: Iterable[Any] = (), attrs: dict[str, Any] | None = None) -> None:
        super().__init__(values)
        self.attrs = dict(attrs or {})


def shape_result(source: Source, values: list[Any], attrs: dict[str, Any]) -> Any:
    """The results in the shape the items came in: a list, or a pandas Series on the items' index."""
    if source.kind == "list":
        return MapList(values, attrs)
    import pandas as pd

    index = source.index if source.index is not None and len(source.index) == len(values) else None
    name = source.name if source.kind == "series" else None
    plain = values and all(isinstance(v, str | int | float) for v in values)  # no None: let pandas pick the dtype
    series = pd.Series(values, index=index, name=name, dtype=None if plain else object)
    series.attrs.update(attrs)
    return series


__all__ = ["CHUNK_ROWS", "MapList", "Source", "item_text", "open_source", "record_text", "shape_result"]
