"""The records of binding: `FieldInfo` (what the summary says), `InputsSummary`, and `Field` (one bound input)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("text", "bytes", "text_file", "binary_file", "directory", "table", "series", "arrow", "array", "list",
         "dict", "scalar")
SUPPORTED = ("str, bytes, pathlib.Path (a file or directory), pandas DataFrame or Series, pyarrow Table, "
             "Polars DataFrame or LazyFrame, Dask DataFrame, "
             "numpy array, list, tuple, dict or a plain scalar (int, float, bool, None, datetime, Decimal)")

@dataclass(frozen=True)
class FieldInfo:
    """A serialisable description of one input; holds no data beyond the short preview.

    `rows` counts rows of a table/series/array, items of a list, keys of a dict and files of a
    directory. `truncated` is True when the preview shows only part of the value (for a directory:
    when the listing stopped at MAX_DIR_ENTRIES, so its counts are lower bounds). `dtypes` lists
    the first `config.max_columns_shown` columns; `more_columns` counts the rest.
    """

    name: str
    kind: str
    python_type: str
    size_chars: int | None = None
    size_bytes: int | None = None
    rows: int | None = None
    columns: int | None = None
    est_tokens: int = 0
    dtypes: tuple[tuple[str, str], ...] = ()
    more_columns: int = 0
    preview: str = ""
    truncated: bool = False
    path: str | None = None
    detail: str = ""
    estimated: bool = False  # `rows` (and sizes) are estimates, e.g. a CSV's rows from sampled bytes

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["dtypes"] = [list(pair) for pair in self.dtypes]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FieldInfo:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["dtypes"] = tuple((str(a), str(b)) for a, b in d.get("dtypes", ()))
        return cls(**values)


@dataclass(frozen=True)
class InputsSummary:
    """What the root model is told about the inputs: `text`, `tokens` long (at most the cap)."""

    fields: tuple[FieldInfo, ...]
    text: str
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"fields": [f.to_dict() for f in self.fields], "text": self.text, "tokens": self.tokens}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InputsSummary:
        return cls(tuple(FieldInfo.from_dict(f) for f in d["fields"]), d["text"], int(d["tokens"]))


_UNSET: Any = object()


class Field:
    """One bound input: its name, the user's object (`source`) and its description (`info`).

    `load()` gives the value the sandbox sees as `inputs[name]`, computed on first call (files are
    read then, not at bind time), cached, and safe to call from several threads.

    `read_paths` are the absolute filesystem paths the sandbox must be able to read for this input
    (files, folders, dataset roots) and `endpoints` the `"host:port"` addresses it must reach (a
    cluster's scheduler): a confined sandbox kernel opens exactly these and nothing else. `plan` is
    a JSON-able record a family fixes at bind time to reopen the input elsewhere without its data
    (the files of a table, a relation's SQL, a serialised query plan).
    """

    __slots__ = ("name", "source", "info", "read_paths", "endpoints", "plan", "_loader", "_lock", "_value")

    def __init__(self, name: str, source: Any, info: FieldInfo, loader: Callable[[], Any], *,
                 read_paths: tuple[str, ...] = (), endpoints: tuple[str, ...] = (),
                 plan: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.source = source
        self.info = info
        self.read_paths = tuple(read_paths)
        self.endpoints = tuple(endpoints)
        self.plan = plan
        self._loader = loader
        self._lock = threading.Lock()
        self._value: Any = _UNSET

    @property
    def kind(self) -> str:
        return self.info.kind

    def load(self) -> Any:
        value = self._value
        if value is _UNSET:
            with self._lock:
                if self._value is _UNSET:
                    self._value = self._loader()
                value = self._value
        return value

    def __repr__(self) -> str:
        i = self.info
        return f"Field(name={self.name!r}, kind={i.kind!r}, python_type={i.python_type!r}, est_tokens={i.est_tokens})"


def type_name(value: Any) -> str:
    """The type as users know it: `str`, `pandas.DataFrame`, `pyarrow.Table`."""
    t = type(value)
    module = t.__module__.split(".")[0]
    return t.__qualname__ if module == "builtins" else f"{module}.{t.__qualname__}"


__all__ = ["Field", "FieldInfo", "InputsSummary", "KINDS", "SUPPORTED", "type_name"]
