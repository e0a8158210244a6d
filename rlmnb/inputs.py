"""Turn the user's values, paths and DataFrames into `Field`s and render the InputsSummary.

The root model never sees an input's body: it sees the summary (name, kind, size, estimated tokens,
columns, a short preview) and reads `inputs[name]` in the sandbox. Describing an input samples it
and never scans it whole, so binding a 10 GB frame costs milliseconds, and the rendered summary
stays under `config.summary_max_tokens` whatever the inputs.

What the sandbox sees (`Field.load()`) never lets model code change the user's objects and never
copies them in bulk:

    str, bytes, pyarrow Table, scalars    as is (immutable)
    pandas DataFrame / Series             obj.copy(deep=False): copy-on-write keeps writes local
    numpy ndarray                         a read-only view
    list / tuple, dict / Mapping          ReadOnlySequence / ReadOnlyMapping: zero-copy views whose
                                          elements are frozen by the same rules when accessed
    bytearray / memoryview                a read-only memoryview
    pathlib.Path to a file                its text (str) or bytes, read by the first load()
    pathlib.Path to a directory           DirectoryView: relative path -> text or bytes, each file
                                          read when first accessed

`list(x)` and `dict(x)` give shallow copies whose nested lists and dicts are still read-only views;
`copy.deepcopy(x)` gives a plain, writable, JSON-able copy. Views are not JSON-serialisable
themselves (json only accepts real lists and dicts, which would mean copying), and pandas treats
any Mapping that is not a dict as a list of its keys: `pd.DataFrame(dict(x))`, not `pd.DataFrame(x)`.

Previews: `config.preview_chars` governs text, bytes, files and scalars; `config.preview_rows`
governs tables, series, arrays, lists, dicts and a directory's file names. With both at 0 the
summary holds no data at all, only names, kinds, sizes, column names and dtypes.
"""

from __future__ import annotations

import codecs
import copy
import dataclasses
import datetime
import decimal
import enum
import fractions
import itertools
import math
import os
import posixpath
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, NoReturn

from .errors import InputError
from .tokens import CHARS_PER_TOKEN, count_tokens, estimate_tokens

if TYPE_CHECKING:
    from .config import RLMConfig

__all__ = [
    "KINDS", "DirectoryView", "Field", "FieldInfo", "InputsSummary", "ReadOnlyMapping", "ReadOnlySequence",
    "bind_inputs", "describe", "render_summary",
]

KINDS = ("text", "bytes", "text_file", "binary_file", "directory", "table", "series", "arrow", "array", "list",
         "dict", "scalar")
SUPPORTED = ("str, bytes, pathlib.Path (a file or directory), pandas DataFrame or Series, pyarrow Table, "
             "numpy array, list, tuple, dict or a plain scalar (int, float, bool, None, datetime, Decimal)")

CELL_CHARS = 60            # a table cell in a preview
ITEM_CHARS = 100           # one list item or dict value in a preview
NAME_CHARS = 40            # a column name or dict key in a preview
MAX_DIR_ENTRIES = 10_000   # entries a directory description looks at
DIR_PREVIEW_FILES = 5      # file names shown for a directory
SNIFF_BYTES = 8192         # head of a file that decides text or binary
SAMPLE_BYTES = 20_000      # each of the head, middle and tail samples of a file or bytes
SAMPLE_ROWS = 32           # rows of a table rendered to estimate its tokens
SAMPLE_COLS = 64           # columns of a wide table rendered to estimate its tokens
SAMPLE_ITEMS = 64          # items of a list or dict looked at to check and estimate it
CHECK_BUDGET = 2_000       # nested values type-checked per input at bind time
DIR_CACHE_BYTES = 256 * 2**20  # file contents a DirectoryView keeps after reading them
_WIDE = 256                # above this many columns, memory use is extrapolated from a sample

_TEXT_KINDS = frozenset({"text", "bytes", "text_file", "binary_file", "scalar"})
_VIEW_KINDS = frozenset({"list", "dict", "array", "directory"})


# --------------------------------------------------------------------------------------------
# records


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
    """

    __slots__ = ("name", "source", "info", "_loader", "_lock", "_value")

    def __init__(self, name: str, source: Any, info: FieldInfo, loader: Callable[[], Any]) -> None:
        self.name = name
        self.source = source
        self.info = info
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


# --------------------------------------------------------------------------------------------
# binding


def bind_inputs(values: Mapping[str, Any], config: RLMConfig) -> tuple[tuple[Field, ...], InputsSummary]:
    """Describe every input (cheaply, by sampling) and render the summary the root model sees."""
    if not isinstance(values, Mapping):
        raise InputError(f"inputs must be a mapping of name -> value (e.g. a dict), got {_type_name(values)}.")
    fields = tuple(describe(name, value, config) for name, value in values.items())
    return fields, render_summary([f.info for f in fields], config)


def describe(name: str, value: Any, config: RLMConfig) -> Field:
    """One input as a Field. Raises InputError for a bad name, a missing path or an unsupported kind."""
    if not isinstance(name, str) or not name.isidentifier():
        raise InputError(f"Input name {name!r} is not a valid Python identifier; use letters, digits and "
                         "underscores, not starting with a digit.")
    if isinstance(value, DirectoryView):
        return _describe_path(name, Path(value.root), config, source=value)
    if isinstance(value, Path):
        return _describe_path(name, value, config, source=value)
    if isinstance(value, str):
        return _describe_text(name, value, config)
    if isinstance(value, bytes | bytearray | memoryview):
        return _describe_bytes(name, value, config)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return _describe_frame(name, value, config)
    if pd is not None and isinstance(value, pd.Series):
        return _describe_series(name, value, config)
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch):
        return _describe_arrow(name, value, config)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return _describe_array(name, value, config)
    if _is_scalar(value):
        return _describe_scalar(name, value, config)
    if isinstance(value, Mapping):
        return _describe_mapping(name, value, config)
    if isinstance(value, Sequence):
        return _describe_sequence(name, value, config)
    _unsupported(name, value)


def _unsupported(name: str, value: Any, where: str = "") -> NoReturn:
    hint = " (pass pathlib.Path(...) for a file)" if hasattr(value, "read") and hasattr(value, "seek") else ""
    if isinstance(value, set):
        hint = " (pass sorted(x) or list(x) for a set)"
    what = f"{where} is {_type_name(value)}" if where else _type_name(value)
    raise InputError(f"Input {name!r}: {what} is not a supported kind of input{hint}; supported: {SUPPORTED}.")


# --- text and bytes ---------------------------------------------------------------------------


def _describe_text(name: str, text: str, config: RLMConfig) -> Field:
    preview, truncated = _text_preview(text, config.preview_chars)
    info = FieldInfo(name, "text", _type_name(text), size_chars=len(text),
                     est_tokens=estimate_tokens(text) if text else 0, preview=preview, truncated=truncated)
    return Field(name, text, info, lambda: text)


def _describe_bytes(name: str, value: bytes | bytearray | memoryview, config: RLMConfig) -> Field:
    if isinstance(value, bytes):
        view: bytes | memoryview = value
    else:
        try:
            view = memoryview(value).cast("B")
        except TypeError:
            _unsupported(name, value)
    n = len(view)
    pc = config.preview_chars
    if pc <= 0:
        preview, truncated = "", n > 0
    elif n <= 2 * pc:
        preview, truncated = _clip_end(repr(bytes(view)), 2 * pc + 3), False
    else:
        preview = _clip_end(repr(bytes(view[:pc])), pc + 3) + "\n" + _clip_start(repr(bytes(view[-pc:])), pc + 3)
        truncated = True
    tokens = _sampled_tokens(lambda off, size: bytes(view[off: off + size]), n)
    info = FieldInfo(name, "bytes", _type_name(value), size_bytes=n, est_tokens=tokens, preview=preview,
                     truncated=truncated)
    loaded = view.toreadonly() if isinstance(view, memoryview) else view
    return Field(name, value, info, lambda: loaded)


def _text_preview(text: str, pc: int) -> tuple[str, bool]:
    if pc <= 0:
        return "", len(text) > 0
    if len(text) <= 2 * pc:
        return repr(text), False
    return repr(text[:pc]) + "\n" + repr(text[-pc:]), True


def _sampled_tokens(read: Callable[[int, int], bytes], n: int) -> int:
    """Tokens of n bytes of UTF-8 from three decoded samples (head, middle, tail)."""
    if n == 0:
        return 0
    s = SAMPLE_BYTES
    if n <= 3 * s:
        return count_tokens(read(0, n).decode("utf-8", "replace"))
    counted = sum(count_tokens(read(off, s).decode("utf-8", "replace")) for off in (0, n // 2, n - s))
    return max(1, round(counted * n / (3 * s)))


# --- paths -------------------------------------------------------------------------------------


def _describe_path(name: str, path: Path, config: RLMConfig, source: Any) -> Field:
    where = os.path.abspath(os.path.expanduser(path))
    try:
        st = os.stat(where)
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None
    except OSError as e:
        raise InputError(f"Input {name!r}: cannot read {where} ({e.strerror}).") from None
    import stat as stat_

    try:
        if stat_.S_ISDIR(st.st_mode):
            return _describe_directory(name, where, config, source)
        if stat_.S_ISREG(st.st_mode):
            return _describe_file(name, where, st.st_size, config, source)
    except OSError as e:
        raise InputError(f"Input {name!r}: cannot read {where} ({e.strerror or e}).") from None
    raise InputError(f"Input {name!r}: {where} is neither a regular file nor a directory; pass a file or "
                     "a directory.")


def _sniff(head: bytes, complete: bool) -> str | None:
    """Why the head of a file is binary, or None for UTF-8 text."""
    if b"\0" in head:
        return "NUL bytes in the first 8 KiB"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return "not valid UTF-8 in the first 8 KiB"
    return None


def _describe_file(name: str, where: str, size: int, config: RLMConfig, source: Any) -> Field:
    pc = config.preview_chars
    with open(where, "rb") as f:
        def read(off: int, n: int) -> bytes:
            f.seek(off)
            return f.read(n)

        head = read(0, SNIFF_BYTES)
        binary_reason = _sniff(head, complete=size <= SNIFF_BYTES)
        if binary_reason is None:
            tokens = _sampled_tokens(read, size)
            if pc <= 0:
                preview, truncated = "", size > 0
            elif size <= 8 * pc:  # small: at most 2 * pc characters guaranteed only below this
                preview, truncated = _text_preview(read(0, size).decode("utf-8-sig", "replace"), pc)
            else:
                head_text = read(0, 4 * pc).decode("utf-8-sig", "ignore")[:pc]
                tail_text = _decode_tail(read(size - 4 * pc, 4 * pc))[-pc:]
                preview, truncated = repr(head_text) + "\n" + repr(tail_text), True
        else:
            tokens = round(size / CHARS_PER_TOKEN)
            if pc <= 0:
                preview, truncated = "", size > 0
            elif size <= 2 * pc:
                preview, truncated = _clip_end(repr(read(0, size)), 2 * pc + 3), False
            else:
                preview = (_clip_end(repr(read(0, pc)), pc + 3) + "\n"
                           + _clip_start(repr(read(size - pc, pc)), pc + 3))
                truncated = True
    if binary_reason is None:
        info = FieldInfo(name, "text_file", "str", size_bytes=size, est_tokens=tokens, preview=preview,
                         truncated=truncated, path=where)
        return Field(name, source, info, lambda: _read_text_file(name, where))
    info = FieldInfo(name, "binary_file", "bytes", size_bytes=size, est_tokens=tokens, preview=preview,
                     truncated=truncated, path=where, detail=f"binary: {binary_reason}")
    return Field(name, source, info, lambda: _read_binary_file(name, where))


def _decode_tail(data: bytes) -> str:
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] <= 0xBF:  # skip a cut multi-byte character
        start += 1
    return data[start:].decode("utf-8", "replace")


def _read_text_file(name: str, where: str) -> str:
    try:
        with open(where, encoding="utf-8-sig", errors="replace", newline="") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None


def _read_binary_file(name: str, where: str) -> bytes:
    try:
        with open(where, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"Input {name!r}: no file or directory at {where}; check the path.") from None


def decode_file(data: bytes) -> str | bytes:
    """File content as text when its first 8 KiB look like UTF-8 text, else the bytes."""
    head = data[:SNIFF_BYTES]
    if _sniff(head, complete=len(data) <= SNIFF_BYTES) is not None:
        return data
    return data.decode("utf-8-sig", "replace")


@dataclass
class _Walk:
    files: list[tuple[str, int]]
    folders: int
    truncated: bool


def _walk(root: str, limit: int | None, with_sizes: bool) -> _Walk:
    """Files under root (relative posix paths), depth first in name order; symlinked folders are not entered."""
    out = _Walk([], 0, False)
    entries = 0
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                room = None if limit is None else limit - entries + 1
                items = sorted(itertools.islice(it, room), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in items:
            if limit is not None and entries >= limit:
                out.truncated = True
                break
            entries += 1
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    out.folders += 1
                    subdirs.append(rel)
                elif entry.is_file():
                    out.files.append((rel, entry.stat().st_size if with_sizes else 0))
            except OSError:
                continue
        if out.truncated:
            break
        stack.extend(reversed(subdirs))
    return out


def _describe_directory(name: str, where: str, config: RLMConfig, source: Any) -> Field:
    walk = _walk(where, MAX_DIR_ENTRIES, with_sizes=True)
    total = sum(size for _, size in walk.files)
    by_ext: dict[str, int] = {}
    for rel, _ in walk.files:
        ext = posixpath.splitext(rel)[1].lower() or "(no extension)"
        by_ext[ext] = by_ext.get(ext, 0) + 1
    ranked = sorted(by_ext.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{count:,} {ext}" for ext, count in ranked[:6]]
    if len(ranked) > 6:
        parts.append(f"{sum(c for _, c in ranked[6:]):,} other")
    plus = "+" if walk.truncated else ""
    subfolders = f", {walk.folders:,}{plus} subfolder{'' if walk.folders == 1 else 's'}" if walk.folders else ""
    detail = f"{len(walk.files):,}{plus} files{subfolders}" + (": " + ", ".join(parts) if parts else "")
    if walk.truncated:
        detail += f" (counted in the first {MAX_DIR_ENTRIES:,} entries)"
    shown = [rel for rel, _ in walk.files[:DIR_PREVIEW_FILES]] if config.preview_rows > 0 else []
    info = FieldInfo(name, "directory", "Mapping[str, str | bytes]", size_bytes=total, rows=len(walk.files),
                     est_tokens=round(total / CHARS_PER_TOKEN), preview="\n".join(_one_line(s) for s in shown),
                     truncated=walk.truncated, path=where, detail=detail)
    return Field(name, source, info, lambda: DirectoryView(where, name))


# --- tables ------------------------------------------------------------------------------------


def _sample_positions(n: int, k: int) -> Any:
    """k distinct positions out of n, sorted, always the same for the same n (seeded numpy Generator)."""
    import numpy as np

    if n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, k, replace=False))


def _describe_frame(name: str, df: Any, config: RLMConfig) -> Field:
    n, ncols = df.shape
    shown = min(ncols, config.max_columns_shown)
    if ncols > _WIDE:
        cols = _sample_positions(ncols, SAMPLE_COLS)
        part = int(df.iloc[:, cols].memory_usage(index=False, deep=False).sum())
        size_bytes = round(part * ncols / len(cols)) + int(df.index.memory_usage(deep=False))
    else:
        size_bytes = int(df.memory_usage(index=True, deep=False).sum())
    first = df.iloc[:, :shown]
    dtypes = tuple((_clip_end(_one_line(str(c)), CELL_CHARS), str(t)) for c, t in first.dtypes.items())
    k = min(n, config.preview_rows)
    if k > 0:
        head = first.iloc[:k]
        show_index = not _default_index(df.index)
        index_name = ", ".join(str(x) for x in df.index.names if x is not None) or "index"
        header = ([_clip_end(_one_line(index_name), NAME_CHARS)] if show_index else []) + [
            _clip_end(_one_line(str(c)), NAME_CHARS) for c in head.columns]
        lines = [" | ".join(header)]
        clipped = False
        cells = head.to_numpy(dtype=object)
        for i in range(k):
            row = [_cell(v) for v in cells[i]]
            if show_index:
                row.insert(0, _cell(head.index[i]))
            clipped = clipped or any(c.endswith("…") for c in row)
            lines.append(" | ".join(row))
        preview, truncated = "\n".join(lines), n > k or ncols > shown or clipped
    else:
        preview, truncated = "", n > 0
    tokens = 0
    if n and ncols:
        rows = _sample_positions(n, SAMPLE_ROWS)
        cols = _sample_positions(ncols, SAMPLE_COLS)
        sample = df.iloc[rows, cols].to_numpy(dtype=object)
        tokens = _cells_tokens(sample, n * ncols)
    detail = "" if _default_index(df.index) else f"index: {type(df.index).__name__}"
    info = FieldInfo(name, "table", _type_name(df), size_bytes=size_bytes, rows=n, columns=ncols,
                     est_tokens=tokens, dtypes=dtypes, more_columns=ncols - shown, preview=preview,
                     truncated=truncated, detail=detail)
    return Field(name, df, info, lambda: df.copy(deep=False))


def _describe_series(name: str, s: Any, config: RLMConfig) -> Field:
    n = len(s)
    k = min(n, config.preview_rows)
    lines = [f"{_cell(i, NAME_CHARS)}: {_cell(v)}" for i, v in zip(s.index[:k], s.iloc[:k].tolist(), strict=True)]
    tokens = 0
    if n:
        sample = s.iloc[_sample_positions(n, SAMPLE_ROWS)].to_numpy(dtype=object).reshape(-1, 1)
        tokens = _cells_tokens(sample, n)
    label = "" if s.name is None else _clip_end(_one_line(str(s.name)), CELL_CHARS)
    info = FieldInfo(name, "series", _type_name(s), size_bytes=int(s.memory_usage(index=True, deep=False)),
                     rows=n, est_tokens=tokens, dtypes=((label, str(s.dtype)),), preview="\n".join(lines),
                     truncated=n > k or any("…" in line for line in lines))
    return Field(name, s, info, lambda: s.copy(deep=False))


def _describe_arrow(name: str, t: Any, config: RLMConfig) -> Field:
    import pyarrow as pa

    n, ncols = t.num_rows, t.num_columns
    shown = min(ncols, config.max_columns_shown)
    dtypes = tuple((_clip_end(_one_line(f.name), CELL_CHARS), str(f.type)) for f in list(t.schema)[:shown])
    k = min(n, config.preview_rows)
    if k > 0:
        head = t.slice(0, k)
        columns = [head.column(j).to_pylist() for j in range(shown)]
        lines = [" | ".join(_clip_end(_one_line(f.name), NAME_CHARS) for f in list(t.schema)[:shown])]
        lines += [" | ".join(_cell(col[i]) for col in columns) for i in range(k)]
        preview = "\n".join(lines)
        truncated = n > k or ncols > shown or any(c.endswith("…") for line in lines for c in line.split(" | "))
    else:
        preview, truncated = "", n > 0
    tokens = 0
    if n and ncols:
        cols = [int(j) for j in _sample_positions(ncols, SAMPLE_COLS)]
        sub = t.select(cols).take(pa.array(_sample_positions(n, SAMPLE_ROWS)))
        values = [sub.column(j).to_pylist() for j in range(len(cols))]
        tokens = _cells_tokens([list(row) for row in zip(*values, strict=True)], n * ncols)
    info = FieldInfo(name, "arrow", _type_name(t), size_bytes=int(t.nbytes), rows=n, columns=ncols,
                     est_tokens=tokens, dtypes=dtypes, more_columns=ncols - shown, preview=preview,
                     truncated=truncated)
    return Field(name, t, info, lambda: t)


def _describe_array(name: str, arr: Any, config: RLMConfig) -> Field:
    import numpy as np

    k = config.preview_rows
    shape = " x ".join(f"{d:,}" for d in arr.shape) or "0-d"
    lines: list[str] = []
    if k > 0 and arr.size:
        def fmt(a: Any) -> str:
            text = np.array2string(a, threshold=2 * k, edgeitems=k, max_line_width=10**6, separator=", ")
            return _clip_end(" ".join(text.split()).replace(" ,", ","), 2 * ITEM_CHARS)

        rows = range(min(k, arr.shape[0])) if arr.ndim > 1 else range(0)
        lines = [f"[{i}] {fmt(arr[i])}" for i in rows] if arr.ndim > 1 else [fmt(arr)]
    tokens = 0
    if arr.size:
        flat = arr.flat[_sample_positions(arr.size, 4 * SAMPLE_ROWS)] if arr.ndim else arr.reshape(1)
        tokens = _cells_tokens([[v] for v in flat.tolist()], arr.size)
    info = FieldInfo(name, "array", _type_name(arr), size_bytes=int(arr.nbytes),
                     rows=arr.shape[0] if arr.ndim else None, columns=arr.shape[1] if arr.ndim == 2 else None,
                     est_tokens=tokens, preview="\n".join(lines),
                     truncated=_array_truncated(arr, k),
                     detail=f"shape {shape}, dtype {arr.dtype}")
    return Field(name, arr, info, lambda: _readonly_array(arr))


def _array_truncated(arr: Any, k: int) -> bool:
    if arr.size == 0:
        return False
    if k <= 0:
        return True
    if arr.ndim <= 1:
        return bool(arr.size > 2 * k)
    return bool(arr.shape[0] > k or arr[0].size > 2 * k)


def _readonly_array(arr: Any) -> Any:
    view = arr.view()
    view.flags.writeable = False
    return view


def _default_index(index: Any) -> bool:
    pd = sys.modules["pandas"]
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def _cells_tokens(cells: Any, total_cells: int) -> int:
    """Tokens of total_cells cells, extrapolated from a 2-D sample rendered as comma-separated lines."""
    lines = []
    chars = 0
    count = 0
    for row in cells:
        parts = []
        for v in row:
            text, true_len = _cell_sample(v)
            parts.append(text)
            chars += true_len + 1
            count += 1
        lines.append(",".join(parts))
    if not count:
        return 0
    text = "\n".join(lines)
    ratio = count_tokens(text) / max(1, len(text))
    return max(1, round(ratio * chars / count * total_cells))


def _cell_sample(v: Any) -> tuple[str, int]:
    if isinstance(v, str):
        return v[:2000], len(v)
    text = str(v) if _is_scalar(v) or v is None else _brief(v, 2000)
    return text[:2000], len(text)


# --- containers and scalars ----------------------------------------------------------------------


def _describe_sequence(name: str, seq: Sequence[Any], config: RLMConfig) -> Field:
    n = len(seq)
    positions = [int(i) for i in _sample_positions(n, SAMPLE_ITEMS)]
    samples = [seq[i] for i in positions]
    budget = [CHECK_BUDGET]
    for i, v in zip(positions, samples, strict=True):
        _check_nested(name, v, f"item [{i}]", budget, 0)
    k = min(n, config.preview_rows)
    lines = [f"[{i}] {_brief(seq[i], ITEM_CHARS)}" for i in range(k)]
    types = _type_list(samples)
    detail = f"item types{' (sampled)' if n > len(samples) else ''}: {types}" if types else ""
    est = _container_tokens([_approx_chars(v) + 2 for v in samples], [_brief(v, 400) for v in samples], n)
    base, loader = _unwrap_sequence(seq, name)
    info = FieldInfo(name, "list", _type_name(base), rows=n, est_tokens=est, preview="\n".join(lines),
                     truncated=n > k or any("…" in line for line in lines),
                     detail=detail)
    return Field(name, seq, info, loader)


def _unwrap_sequence(seq: Sequence[Any], name: str) -> tuple[Any, Callable[[], Any]]:
    if isinstance(seq, ReadOnlySequence):
        data, idx = seq._data, seq._idx
        return data, lambda: ReadOnlySequence(data, name, idx)
    if isinstance(seq, range):
        return seq, lambda: seq
    return seq, lambda: ReadOnlySequence(seq, name)


def _describe_mapping(name: str, mapping: Mapping[Any, Any], config: RLMConfig) -> Field:
    n = len(mapping)
    items = list(itertools.islice(mapping.items(), SAMPLE_ITEMS))
    budget = [CHECK_BUDGET]
    for key, v in items:
        _check_nested(name, v, f"value [{_brief(key, NAME_CHARS)}]", budget, 0)
    k = min(n, config.preview_rows)
    lines = [f"{_brief(key, NAME_CHARS)}: {_brief(v, ITEM_CHARS)}" for key, v in items[:k]]
    types = _type_list([v for _, v in items])
    first = f" (first {len(items):,})" if n > len(items) else ""
    detail = f"value types{first}: {types}" if types else ""
    est = _container_tokens([_approx_chars(key) + _approx_chars(v) + 4 for key, v in items],
                            [f"{_brief(key, 100)}: {_brief(v, 400)}" for key, v in items], n)
    base = mapping._data if isinstance(mapping, ReadOnlyMapping) else mapping
    info = FieldInfo(name, "dict", _type_name(base), rows=n, est_tokens=est, preview="\n".join(lines),
                     truncated=n > k or any("…" in line for line in lines),
                     detail=detail)
    return Field(name, mapping, info, lambda: ReadOnlyMapping(base, name))


def _describe_scalar(name: str, value: Any, config: RLMConfig) -> Field:
    text = _brief(value, 1000)
    pc = config.preview_chars
    preview = _clip_end(text, max(pc, 16)) if pc > 0 else ""
    info = FieldInfo(name, "scalar", _type_name(value), size_chars=len(text),
                     est_tokens=count_tokens(text), preview=preview, truncated=preview != text)
    return Field(name, value, info, lambda: value)


def _container_tokens(item_chars: list[float], sample_texts: list[str], n: int) -> int:
    if not n or not item_chars:
        return 0
    text = "\n".join(sample_texts)
    ratio = count_tokens(text) / max(1, len(text))
    return max(1, round(ratio * (sum(item_chars) / len(item_chars) * n + 2)))


def _type_list(values: list[Any]) -> str:
    counts: dict[str, int] = {}
    for v in values:
        t = _type_name(v._data if isinstance(v, ReadOnlySequence | ReadOnlyMapping) else v)
        counts[t] = counts.get(t, 0) + 1
    return ", ".join(t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# --------------------------------------------------------------------------------------------
# plain values, freezing and nested checks

_FAST_LEAF = frozenset({str, int, float, bool, type(None), bytes})
_LEAF_TYPES = (str, bytes, int, float, complex, type(None), decimal.Decimal, fractions.Fraction, datetime.date,
               datetime.time, datetime.timedelta, uuid.UUID, enum.Enum, frozenset, PurePath)
_SCALAR_TYPES = (int, float, complex, type(None), decimal.Decimal, fractions.Fraction, datetime.date,
                 datetime.time, datetime.timedelta, uuid.UUID, enum.Enum)


def _is_scalar(value: Any) -> bool:
    """A plain immutable value allowed at top level (str and bytes have kinds of their own)."""
    if isinstance(value, _SCALAR_TYPES):
        return True
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        return True
    module = type(value).__module__
    return module.startswith("pandas._libs") and type(value).__name__ in (
        "NAType", "NaTType", "Timestamp", "Timedelta", "Period", "Interval")


def _nested_kind(value: Any) -> str | None:
    """How a value inside a list or dict is frozen, or None when it is not supported."""
    if type(value) in _FAST_LEAF or isinstance(value, ReadOnlySequence | ReadOnlyMapping | DirectoryView):
        return "leaf"
    if isinstance(value, tuple) and len(value) <= 64 and all(type(v) in _FAST_LEAF for v in value):
        return "leaf"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple | range):
        return "leaf" if isinstance(value, range) else "sequence"
    if isinstance(value, bytearray | memoryview):
        return "buffer"
    if isinstance(value, set):
        return "set"
    if isinstance(value, _LEAF_TYPES) or _is_scalar(value):
        return "leaf"
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame | pd.Series):
        return "pandas"
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return "array"
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch | pa.Array | pa.ChunkedArray | pa.Scalar):
        return "leaf"
    if isinstance(value, Sequence):
        return "sequence"
    return None


def _freeze(value: Any, name: str) -> Any:
    """The read-only stand-in for a value inside a list or dict input (no bulk copy)."""
    if type(value) in _FAST_LEAF:
        return value
    kind = _nested_kind(value)
    if kind == "leaf":
        return value
    if kind == "mapping":
        return ReadOnlyMapping(value, name)
    if kind == "sequence":
        return ReadOnlySequence(value, name)
    if kind == "buffer":
        return memoryview(value).toreadonly()
    if kind == "set":
        return frozenset(value)
    if kind == "pandas":
        return value.copy(deep=False)
    if kind == "array":
        return _readonly_array(value)
    raise InputError(f"Input {name!r}: an item is {_type_name(value)}, which is not a supported kind of input; "
                     f"supported: {SUPPORTED}.")


def _check_nested(name: str, value: Any, where: str, budget: list[int], depth: int) -> None:
    """Type-check a bounded sample of a nested value; unsupported values raise InputError."""
    if budget[0] <= 0 or depth > 12:
        return
    budget[0] -= 1
    kind = _nested_kind(value)
    if kind is None:
        _unsupported(name, value, where)
    if kind == "mapping":
        for key, v in itertools.islice(value.items(), 16):
            _check_nested(name, v, f"{where}[{_brief(key, NAME_CHARS)}]", budget, depth + 1)
    elif kind == "sequence":
        for i in _sample_positions(len(value), 16):
            _check_nested(name, value[int(i)], f"{where}[{int(i)}]", budget, depth + 1)


# --------------------------------------------------------------------------------------------
# read-only views


def _read_only_error(name: str, how: str) -> TypeError:
    target = f"inputs[{name!r}]" if name else "this input"
    return TypeError(f"{target} is read-only (inputs are never changed): copy it first, e.g. "
                     f"data = {how}({target}), or copy.deepcopy({target}) to copy nested lists and dicts too.")


class ReadOnlySequence(Sequence[Any]):
    """A zero-copy, read-only view of a list or tuple input; slicing returns a view too.

    Elements are frozen when accessed (lists and dicts become views, DataFrames shallow copies,
    arrays read-only views). `list(x)` gives a shallow copy, `copy.deepcopy(x)` a plain writable one.
    """

    __slots__ = ("_data", "_name", "_idx")

    def __init__(self, data: Sequence[Any], name: str = "", idx: range | None = None) -> None:
        self._data = data
        self._name = name
        self._idx = range(len(data)) if idx is None else idx

    def __len__(self) -> int:
        return len(self._idx)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return ReadOnlySequence(self._data, self._name, self._idx[i])
        try:
            j = self._idx[i]
        except IndexError:
            raise IndexError("list index out of range") from None
        except TypeError:
            raise TypeError(f"list indices must be integers or slices, not {type(i).__name__}") from None
        return _freeze(self._data[j], self._name)

    def _whole(self) -> bool:
        return self._idx == range(len(self._data))

    def _raw(self) -> Iterator[Any]:
        if self._whole():
            return iter(self._data)
        data = self._data
        return (data[j] for j in self._idx)

    def __iter__(self) -> Iterator[Any]:
        name = self._name
        for v in self._raw():
            yield v if type(v) in _FAST_LEAF else _freeze(v, name)

    def __reversed__(self) -> Iterator[Any]:
        data, name = self._data, self._name
        for j in reversed(self._idx):
            yield _freeze(data[j], name)

    def __contains__(self, x: object) -> bool:
        if self._whole() and isinstance(self._data, list | tuple):
            return x in self._data
        return any(v is x or v == x for v in self._raw())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlySequence):
            theirs: Iterator[Any] = other._raw()
        elif isinstance(other, list | tuple):
            theirs = iter(other)
        else:
            return NotImplemented
        if len(self) != len(other):
            return False
        return all(a is b or a == b for a, b in zip(self._raw(), theirs, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._whole() and isinstance(self._data, list | tuple):
            return repr(self._data)
        items = list(self._raw())
        return repr(tuple(items) if isinstance(self._data, tuple) else items)

    def __add__(self, other: Any) -> list[Any]:
        return [*self, *other]

    def __radd__(self, other: Any) -> list[Any]:
        return [*other, *self]

    def __mul__(self, n: int) -> list[Any]:
        return list(self) * n

    __rmul__ = __mul__

    def copy(self) -> list[Any]:
        """A shallow plain list (nested lists and dicts stay read-only views)."""
        return list(self)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        items = [copy.deepcopy(v, memo) for v in self._raw()]
        return tuple(items) if isinstance(self._data, tuple) else items

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self._raw()),))

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _read_only_error(self._name, "list")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse


class ReadOnlyMapping(Mapping[Any, Any]):
    """A zero-copy, read-only view of a dict input; values are frozen when accessed.

    A missing key raises KeyError even for a defaultdict (its default would be written into the
    user's dict). `dict(x)` gives a shallow copy, `copy.deepcopy(x)` a plain writable one.
    """

    __slots__ = ("_data", "_name")

    def __init__(self, data: Mapping[Any, Any], name: str = "") -> None:
        self._data = data
        self._name = name

    def __getitem__(self, key: Any) -> Any:
        data = self._data
        if isinstance(data, dict) and type(data) is not dict and key not in data:
            raise KeyError(key)  # never trigger __missing__ on the user's dict
        return _freeze(data[key], self._name)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self._data else default

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def keys(self) -> Any:
        return self._data.keys()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyMapping):
            other = other._data
        if isinstance(other, dict) and isinstance(self._data, dict):
            return self._data == other
        if isinstance(other, Mapping):
            data = self._data
            return len(data) == len(other) and all(k in other and other[k] == v for k, v in data.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)

    def __or__(self, other: Any) -> dict[Any, Any]:
        return {**self, **other}

    def __ror__(self, other: Any) -> dict[Any, Any]:
        return {**other, **self}

    def copy(self) -> dict[Any, Any]:
        """A shallow plain dict (nested lists and dicts stay read-only views)."""
        return dict(self)

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self._data.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self._data),))

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _read_only_error(self._name, "dict")

    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = setdefault = update = clear = _refuse


class DirectoryView(Mapping[str, "str | bytes"]):
    """A directory input: relative posix path -> file content (str, or bytes for binary files).

    Nothing is read until a file is accessed; the listing is walked on first use of len() or
    iteration (symlinked folders are not entered). Contents read are kept up to DIR_CACHE_BYTES.
    """

    __slots__ = ("_root", "_name", "_keys", "_cache", "_cached_bytes", "_lock")

    def __init__(self, root: str | os.PathLike[str], name: str = "") -> None:
        self._root = os.path.abspath(root)
        self._name = name
        self._keys: tuple[str, ...] | None = None
        self._cache: dict[str, str | bytes] = {}
        self._cached_bytes = 0
        self._lock = threading.RLock()

    @property
    def root(self) -> str:
        return self._root

    def _path(self, key: object) -> str | None:
        if not isinstance(key, str) or not key or "\0" in key or key.startswith("/"):
            return None
        if posixpath.normpath(key) != key or key == ".." or key.startswith("../"):
            return None
        path = os.path.join(self._root, *key.split("/"))
        return path if os.path.isfile(path) else None

    def __getitem__(self, key: str) -> str | bytes:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        path = self._path(key)
        if path is None:
            raise KeyError(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise KeyError(key) from None
        value = decode_file(data)
        with self._lock:
            if self._cached_bytes + len(data) <= DIR_CACHE_BYTES:
                self._cache[key] = value
                self._cached_bytes += len(data)
        return value

    def _listing(self) -> tuple[str, ...]:
        with self._lock:
            if self._keys is None:
                self._keys = tuple(rel for rel, _ in _walk(self._root, None, with_sizes=False).files)
            return self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._listing())

    def __len__(self) -> int:
        return len(self._listing())

    def __contains__(self, key: object) -> bool:
        return self._path(key) is not None

    def __repr__(self) -> str:
        return f"DirectoryView({self._root!r})"

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _read_only_error(self._name, "dict")

    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = setdefault = update = clear = _refuse


# --------------------------------------------------------------------------------------------
# small text helpers


def _type_name(value: Any) -> str:
    t = type(value)
    module = t.__module__.split(".")[0]
    return t.__qualname__ if module == "builtins" else f"{module}.{t.__qualname__}"


def _one_line(s: str) -> str:
    if "\n" in s or "\r" in s or "\t" in s:
        s = s.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return s


def _clip_end(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(0, n - 1)] + "…"


def _clip_start(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[len(s) - max(0, n - 1):]


def _clip_mid(s: str, n: int) -> str:
    if len(s) <= n:
        return s
    left = max(0, n - 1) // 2
    return s[:left] + "…" + s[len(s) - (max(0, n - 1) - left):]


def _cell(v: Any, limit: int = CELL_CHARS) -> str:
    """A table cell or index label: str() for scalars, a bounded repr otherwise, one line, clipped."""
    if isinstance(v, str):
        text = v[: limit + 1]
    elif v is None or _is_scalar(v):
        text = str(v)
    elif isinstance(v, tuple) and len(v) <= 8 and all(x is None or isinstance(x, str) or _is_scalar(x) for x in v):
        text = "(" + ", ".join(str(x) for x in v) + ")"  # a MultiIndex label
    else:
        text = _brief(v, limit + 1)
    return _clip_end(_one_line(text), limit)


def _brief(value: Any, limit: int, depth: int = 0) -> str:
    """repr(value) cut to about `limit` characters without building the whole repr of a big value."""
    if isinstance(value, str):
        r = repr(value[:limit])
        return r if len(value) <= limit else r[:-1] + "…" + r[-1]
    if isinstance(value, bytes | bytearray | memoryview):
        chunk = bytes(memoryview(value).cast("B")[:limit]) if not isinstance(value, bytes) else value[:limit]
        return _clip_end(repr(chunk), limit)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3000:
        return f"<int with ~{int(value.bit_length() * 0.30103):,} digits>"
    if type(value) in _FAST_LEAF:
        return _clip_end(repr(value), limit)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return f"<DataFrame {value.shape[0]:,} rows x {value.shape[1]:,} columns>"
    if pd is not None and isinstance(value, pd.Series):
        return f"<Series {len(value):,} rows, dtype {value.dtype}>"
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return f"<ndarray {' x '.join(f'{d:,}' for d in value.shape) or '0-d'}, dtype {value.dtype}>"
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch):
        return f"<{_type_name(value)} {value.num_rows:,} rows x {value.num_columns:,} columns>"
    if isinstance(value, range):
        return _clip_end(repr(value), limit)
    if isinstance(value, Mapping | Sequence | set | frozenset):
        return _brief_collection(value, limit, depth)
    try:
        text = repr(value)
    except Exception:
        text = f"<{_type_name(value)}>"
    return _clip_end(_one_line(text), limit)


def _brief_collection(value: Any, limit: int, depth: int) -> str:
    if depth >= 4:
        return "…"
    base = value._data if isinstance(value, ReadOnlySequence | ReadOnlyMapping) else value
    if isinstance(value, Mapping):
        opening, closing = "{", "}"
    elif isinstance(base, set | frozenset):
        if not value:
            return repr(value)
        opening, closing = "{", "}"
    elif isinstance(base, tuple):
        opening, closing = "(", ")"
    else:
        opening, closing = "[", "]"
    entries: Iterator[Any] = iter(value.items()) if isinstance(value, Mapping) else iter(value)
    parts: list[str] = []
    used = 2
    for entry in entries:
        room = max(8, limit - used - 4)
        if isinstance(value, Mapping):
            key = _brief(entry[0], min(NAME_CHARS, room), depth + 1)
            part = f"{key}: {_brief(entry[1], max(8, room - len(key) - 2), depth + 1)}"
        else:
            part = _brief(entry, room, depth + 1)
        if parts and used + len(part) > limit:
            break
        parts.append(part)
        used += len(part) + 2
        if used >= limit:
            break
    body = ", ".join(parts)
    if len(parts) < len(value):
        body += ", …" if parts else "…"
    return _clip_end(opening + body + closing, limit + 4)


def _approx_chars(value: Any, depth: int = 0) -> float:
    """Roughly len(repr(value)), from a bounded sample of a big nested value."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bytes | bytearray):
        return len(value) + 3
    if isinstance(value, memoryview):
        return value.nbytes + 3
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() * 0.30103 + 1
    if isinstance(value, float):
        return 18
    if depth >= 4:
        return 20
    if isinstance(value, Mapping):
        if not value:
            return 2
        items = list(itertools.islice(value.items(), 8))
        return 2 + len(value) * sum(_approx_chars(k, depth + 1) + _approx_chars(v, depth + 1) + 4
                                    for k, v in items) / len(items)
    if isinstance(value, list | tuple | ReadOnlySequence | set | frozenset):
        if not value:
            return 2
        sample = list(itertools.islice(value, 8))
        return 2 + len(value) * sum(_approx_chars(v, depth + 1) + 2 for v in sample) / len(sample)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return 10.0 * int(value.shape[0]) * int(value.shape[1])
    if pd is not None and isinstance(value, pd.Series):
        return 10.0 * len(value)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return 10.0 * int(value.size)
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch):
        return 10.0 * int(value.num_rows) * int(value.num_columns)
    return len(_brief(value, 200))


def _plural(n: int, unit: str) -> str:
    return f"{n:,} {unit}" if n == 1 else f"{n:,} {unit}s"


def _human_bytes(n: int) -> str:
    if n < 1000:
        return f"{n:,} bytes"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < scale * 999.95:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e12:,.1f} TB"


def _human_count(n: int) -> str:
    if n < 10_000:
        return f"{n:,}"
    for unit, scale in (("K", 1e3), ("M", 1e6)):
        if n < scale * 999.95:
            return f"{n / scale:.1f}{unit}"
    return f"{n / 1e9:,.1f}B"


# --------------------------------------------------------------------------------------------
# rendering


@dataclass(frozen=True)
class _Plan:
    """How much of each field to render: preview scale (None: no previews), columns listed, detail line."""

    scale: float | None
    max_cols: int
    detail: bool


def render_summary(infos: Sequence[FieldInfo], config: RLMConfig) -> InputsSummary:
    """The text the root model sees, kept at or under `config.summary_max_tokens` tokens.

    It degrades in steps until it fits: shrink previews, drop them, clip column lists, then describe
    only the first fields and name the rest on one line.
    """
    infos = tuple(infos)
    cap = config.summary_max_tokens
    c = config.max_columns_shown
    has_preview = any(i.preview for i in infos)
    plans = [_Plan(s, c, True) for s in ((1.0, 0.5, 0.25, 0.125) if has_preview else ())]
    plans += [_Plan(None, c, True), _Plan(None, min(c, 8), True), _Plan(None, min(c, 3), True),
              _Plan(None, 0, False)]
    for plan in plans:
        intro = _intro(infos, previews=plan.scale is not None)
        text = _fit(intro, (_render_block(i, plan) for i in infos), cap)
        if text is not None:
            return InputsSummary(infos, text, count_tokens(text))
    return _collapsed(infos, plans[-1], cap)


def _fit(intro: str, blocks: Iterator[str], cap: int) -> str | None:
    parts = [intro]
    used = count_tokens(intro)
    for block in blocks:
        used += count_tokens(block) + 1
        if used > cap:
            return None
        parts.append(block)
    text = "\n".join(parts)
    return text if count_tokens(text) <= cap else None


def _collapsed(infos: tuple[FieldInfo, ...], plan: _Plan, cap: int) -> InputsSummary:
    intro = _intro(infos, previews=False)
    room = cap - count_tokens(intro)
    blocks: list[str] = []
    used = 0
    for info in infos:  # the longest prefix of fully described fields that fits on its own
        block = _render_block(info, plan)
        used += count_tokens(block) + 1
        if used > room:
            break
        blocks.append(block)
    for k in range(len(blocks), -1, -1):
        text = "\n".join([intro, *blocks[:k], _more_line(infos[k:])])
        tokens = count_tokens(text)
        if tokens <= cap:
            return InputsSummary(infos, text, tokens)
    return _hard_clip(infos, "\n".join([intro, _more_line(infos)]), cap)


def _more_line(rest: Sequence[FieldInfo], max_chars: int = 400) -> str:
    names: list[str] = []
    used = 0
    for info in rest:
        entry = f"{_clip_end(info.name, NAME_CHARS)} ({info.kind})"
        if used + len(entry) > max_chars:
            names.append(f"and {len(rest) - len(names):,} others (list(inputs) names them all)")
            break
        names.append(entry)
        used += len(entry) + 2
    return f"... and {len(rest):,} more inputs: " + ", ".join(names)


def _hard_clip(infos: tuple[FieldInfo, ...], text: str, cap: int) -> InputsSummary:
    """Last resort for a tiny cap: the longest prefix of the text that fits."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    clipped = text[:lo]
    return InputsSummary(infos, clipped, count_tokens(clipped))


def _intro(infos: Sequence[FieldInfo], previews: bool) -> str:
    n = len(infos)
    if n == 0:
        return "No inputs are bound; inputs is empty."
    head = "1 input is bound" if n == 1 else f"{n:,} inputs are bound"
    shown = " except the short previews" if previews and any(i.preview for i in infos) else ""
    text = (f"{head} in the sandbox as inputs[name]; {'its' if n == 1 else 'their'} contents are not shown "
            f"here{shown}.")
    if any(i.kind in _VIEW_KINDS for i in infos):
        text += " Lists, dicts, arrays and directories are read-only views: copy before changing them."
    return text


def _render_block(info: FieldInfo, plan: _Plan) -> str:
    lines = [_header(info)]
    if plan.detail and info.detail:
        lines.append(f"  {info.detail}")
    if info.kind in ("table", "arrow") and plan.max_cols > 0 and (info.dtypes or info.more_columns):
        lines.append(_columns_line(info, plan.max_cols))
    if plan.scale is not None and info.preview:
        lines.extend(_preview_lines(info, plan.scale))
    return "\n".join(lines)


def _shown_path(info: FieldInfo) -> str:
    """Only the file or folder name: the provider never learns the user's directory layout, and a
    recorded run replays wherever its files are."""
    return os.path.basename(str(info.path or "").rstrip("/\\")) or "?"


def _header(info: FieldInfo) -> str:
    kind = info.kind
    tokens = f"~{_human_count(info.est_tokens)} token{'' if info.est_tokens == 1 else 's'}"
    size = _human_bytes(info.size_bytes) if info.size_bytes is not None else None
    if kind == "text":
        what, sizes = info.python_type, [f"{info.size_chars or 0:,} chars", tokens]
    elif kind in ("bytes", "text_file", "binary_file"):
        what = info.python_type if kind == "bytes" else f"{info.python_type}, read from {_shown_path(info)}"
        sizes = [size or "", tokens] if kind != "binary_file" else [size or ""]
    elif kind == "directory":
        what = f"read-only mapping of relative path -> str, or bytes for binary files; from {_shown_path(info)}"
        files = f"{info.rows or 0:,}{'+' if info.truncated else ''} file{'' if info.rows == 1 else 's'}"
        sizes = [files, size or "", f"{tokens} if all read"]
    elif kind in ("table", "arrow"):
        what, sizes = info.python_type, [f"{_plural(info.rows or 0, 'row')} x {_plural(info.columns or 0, 'column')}",
                                         f"~{size}", tokens]
    elif kind == "series":
        dtype = info.dtypes[0][1] if info.dtypes else "?"
        label = f"name {info.dtypes[0][0]!r}, " if info.dtypes and info.dtypes[0][0] else ""
        what, sizes = info.python_type, [_plural(info.rows or 0, "row"), f"{label}dtype {dtype}", f"~{size}", tokens]
    elif kind == "array":
        what, sizes = info.python_type, [size or "", tokens]
    elif kind in ("list", "dict"):
        unit = "item" if kind == "list" else "key"
        what, sizes = f"read-only view of a {info.python_type}", [_plural(info.rows or 0, unit), tokens]
    else:
        what, sizes = info.python_type, []
    return f'inputs["{info.name}"]: {kind} ({what})' + "".join(f", {s}" for s in sizes if s)


def _columns_line(info: FieldInfo, max_cols: int) -> str:
    total = len(info.dtypes) + info.more_columns
    shown = info.dtypes[:max_cols]
    text = "  columns: " + ", ".join(f"{_clip_end(name, NAME_CHARS)} {dtype}" for name, dtype in shown)
    if total > len(shown):
        text += f", ... {total - len(shown):,} more"
    return text


def _preview_lines(info: FieldInfo, scale: float) -> list[str]:
    lines = info.preview.split("\n")

    def cap_of(line: str) -> int:
        return len(line) if scale >= 1 else max(48, int(len(line) * scale))

    if info.kind in _TEXT_KINDS:
        if len(lines) >= 2:
            return [f"  head: {_clip_end(lines[0], cap_of(lines[0]))}",
                    f"  tail: {_clip_start(lines[1], cap_of(lines[1]))}"]
        return [f"  value: {_clip_mid(lines[0], cap_of(lines[0]))}"]
    if info.kind == "directory":
        keep = lines[: max(1, math.ceil(len(lines) * scale))]
        more = ", ..." if len(keep) < (info.rows or 0) else ""
        return ["  files: " + ", ".join(keep) + more]
    header: list[str] = []
    if info.kind in ("table", "arrow"):
        header, lines = lines[:1], lines[1:]
    keep = lines[: max(1, math.ceil(len(lines) * scale))]
    width = max((len(line) for line in header + keep), default=0)
    limit = width if scale >= 1 else max(60, int(width * scale))
    label = {"table": "row", "arrow": "row", "series": "row", "list": "item", "dict": "key"}.get(info.kind)
    title = f"  first {_plural(len(keep), label)}:" if label else "  preview:"
    return [title] + [f"    {_clip_end(line, limit)}" for line in header + keep]
