"""The numpy family: `ndarray`, seen as a read-only view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb.inputs._previews import ITEM_CHARS, SAMPLE_ROWS, cells_tokens, sample_positions
from rlmnb.inputs._readonly import readonly_array
from rlmnb.inputs._records import Field, FieldInfo, type_name
from rlmnb.inputs._registry import Family

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

def _describe_array(name: str, arr: Any, config: RLMConfig) -> Field:
    import numpy as np

    k = config.preview_rows
    shape = " x ".join(f"{d:,}" for d in arr.shape) or "0-d"
    lines: list[str] = []
    if k > 0 and arr.size:
        def fmt(a: Any) -> str:
            text = np.array2string(a, threshold=2 * k, edgeitems=k, max_line_width=10**6, separator=", ")
            return clip(" ".join(text.split()).replace(" ,", ","), 2 * ITEM_CHARS)

        rows = range(min(k, arr.shape[0])) if arr.ndim > 1 else range(0)
        lines = [f"[{i}] {fmt(arr[i])}" for i in rows] if arr.ndim > 1 else [fmt(arr)]
    tokens = 0
    if arr.size:
        flat = arr.flat[sample_positions(arr.size, 4 * SAMPLE_ROWS)] if arr.ndim else arr.reshape(1)
        tokens = cells_tokens([[v] for v in flat.tolist()], arr.size)
    info = FieldInfo(name, "array", type_name(arr), size_bytes=int(arr.nbytes),
                     rows=arr.shape[0] if arr.ndim else None, columns=arr.shape[1] if arr.ndim == 2 else None,
                     est_tokens=tokens, preview="\n".join(lines),
                     truncated=_array_truncated(arr, k),
                     detail=f"shape {shape}, dtype {arr.dtype}")
    return Field(name, arr, info, lambda: readonly_array(arr))


def _array_truncated(arr: Any, k: int) -> bool:
    if arr.size == 0:
        return False
    if k <= 0:
        return True
    if arr.ndim <= 1:
        return bool(arr.size > 2 * k)
    return bool(arr.shape[0] > k or arr[0].size > 2 * k)




FAMILY = Family("numpy", ("array",), _describe_array, classes=("numpy:ndarray",),
                view=lambda _name, raw: readonly_array(raw))


__all__ = ["FAMILY"]
