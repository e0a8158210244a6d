"""Read-only views of the user's values: what model code sees, never a bulk copy, never writable."""

from __future__ import annotations

import copy
import datetime
import decimal
import enum
import fractions
import os
import posixpath
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import PurePath
from typing import Any, NoReturn

from rlmnb._ground.errors import InputError
from rlmnb.inputs._filesystem import decode_file, walk_folder, within
from rlmnb.inputs._records import SUPPORTED, type_name

DIR_CACHE_BYTES = 256 * 2**20  # file contents a DirectoryView keeps after reading them

# --------------------------------------------------------------------------------------------
# plain values, freezing and nested checks

FAST_LEAF = frozenset({str, int, float, bool, type(None), bytes})
_LEAF_TYPES = (str, bytes, int, float, complex, type(None), decimal.Decimal, fractions.Fraction, datetime.date,
               datetime.time, datetime.timedelta, uuid.UUID, enum.Enum, frozenset, PurePath)
_SCALAR_TYPES = (int, float, complex, type(None), decimal.Decimal, fractions.Fraction, datetime.date,
                 datetime.time, datetime.timedelta, uuid.UUID, enum.Enum)


def is_scalar(value: Any) -> bool:
    """A plain immutable value allowed at top level (str and bytes have kinds of their own)."""
    if isinstance(value, _SCALAR_TYPES):
        return True
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        return True
    module = type(value).__module__
    return module.startswith("pandas._libs") and type(value).__name__ in (
        "NAType", "NaTType", "Timestamp", "Timedelta", "Period", "Interval")


def nested_kind(value: Any) -> str | None:
    """How a value inside a list or dict is frozen, or None when it is not supported."""
    if type(value) in FAST_LEAF or isinstance(value, ReadOnlySequence | ReadOnlyMapping | DirectoryView):
        return "leaf"
    if isinstance(value, tuple) and len(value) <= 64 and all(type(v) in FAST_LEAF for v in value):
        return "leaf"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple | range):
        return "leaf" if isinstance(value, range) else "sequence"
    if isinstance(value, bytearray | memoryview):
        return "buffer"
    if isinstance(value, set):
        return "set"
    if isinstance(value, _LEAF_TYPES) or is_scalar(value):
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
    if type(value) in FAST_LEAF:
        return value
    kind = nested_kind(value)
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
        return readonly_array(value)
    raise InputError(f"Input {name!r}: an item is {type_name(value)}, which is not a supported kind of input; "
                     f"supported: {SUPPORTED}.")



def readonly_array(arr: Any) -> Any:
    view = arr.view()
    view.flags.writeable = False
    return view


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
            yield v if type(v) in FAST_LEAF else _freeze(v, name)

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
    iteration (symlinked folders are not entered). A link that leads out of the root is neither listed
    nor read (a KeyError, as for a missing file). Contents read are kept up to DIR_CACHE_BYTES.
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
        return path if os.path.isfile(path) and within(self._root, path) else None

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
                self._keys = tuple(rel for rel, _ in walk_folder(self._root, None, with_sizes=False).files)
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


__all__ = [
    "DIR_CACHE_BYTES", "DirectoryView", "FAST_LEAF", "ReadOnlyMapping", "ReadOnlySequence", "is_scalar",
    "nested_kind", "readonly_array",
]
