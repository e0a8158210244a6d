"""Turning submitted answers and recorded values into plain JSON-able Python values."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = ["NotJSONable", "recordable", "to_jsonable"]

_SCALARS = (str, int, float, bool, type(None))


class NotJSONable(TypeError):
    """The value has no faithful JSON form."""


def to_jsonable(value: Any, *, _depth: int = 0) -> Any:
    """Convert common data-science values (numpy, pandas, pydantic, dataclasses) to JSON types.

    Raises NotJSONable for anything else, so a submitted value is never silently stringified.
    """
    if _depth > 50:
        raise NotJSONable("value is nested more than 50 levels deep")
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict) or _is_mapping(value):
        return {str(k): to_jsonable(v, _depth=_depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [to_jsonable(v, _depth=_depth + 1) for v in items]
    if hasattr(value, "model_dump") and callable(value.model_dump):  # pydantic
        return to_jsonable(value.model_dump(mode="json"), _depth=_depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), _depth=_depth + 1)
    module = type(value).__module__
    if module.startswith("numpy") and hasattr(value, "tolist"):
        return to_jsonable(value.tolist(), _depth=_depth + 1)
    if module.startswith("pandas"):
        name = type(value).__name__
        if name == "DataFrame":
            return to_jsonable(value.to_dict(orient="records"), _depth=_depth + 1)
        if name == "Series":
            return to_jsonable(value.to_dict(), _depth=_depth + 1)
        if name in ("Timestamp", "Timedelta", "Period"):
            return str(value)
        if value is getattr(__import__("pandas"), "NA", object()):
            return None
    if module.startswith("datetime") or type(value).__name__ in ("Decimal", "UUID", "PosixPath", "WindowsPath"):
        return str(value)
    if hasattr(value, "to_pylist"):  # pyarrow
        return to_jsonable(value.to_pylist(), _depth=_depth + 1)
    raise NotJSONable(f"{type(value).__name__} is not JSON-able")


def _is_mapping(value: Any) -> bool:
    from collections.abc import Mapping

    return isinstance(value, Mapping)


def recordable(value: Any) -> Any:
    """A value as a trajectory records it: its JSON form, or its repr when it has none."""
    try:
        return to_jsonable(value)
    except NotJSONable:
        return repr(value)
