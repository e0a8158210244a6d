"""The text and bytes family: `str`, `bytes`, `bytearray`, `memoryview`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens, estimate_tokens
from rlmnb.inputs._records import Field, FieldInfo, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._registry import unsupported as _unsupported

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

SAMPLE_BYTES = 20_000      # each of the head, middle and tail samples of a file or bytes

# --- text and bytes ---------------------------------------------------------------------------


def _describe_text(name: str, text: str, config: RLMConfig) -> Field:
    preview, truncated = text_preview(text, config.preview_chars)
    info = FieldInfo(name, "text", type_name(text), size_chars=len(text),
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
        preview, truncated = clip(repr(bytes(view)), 2 * pc + 3), False
    else:
        preview = clip(repr(bytes(view[:pc])), pc + 3) + "\n" + clip(repr(bytes(view[-pc:])), pc + 3, keep="tail")
        truncated = True
    tokens = sampled_tokens(lambda off, size: bytes(view[off: off + size]), n)
    info = FieldInfo(name, "bytes", type_name(value), size_bytes=n, est_tokens=tokens, preview=preview,
                     truncated=truncated)
    loaded = view.toreadonly() if isinstance(view, memoryview) else view
    return Field(name, value, info, lambda: loaded)


def text_preview(text: str, pc: int) -> tuple[str, bool]:
    if pc <= 0:
        return "", len(text) > 0
    if len(text) <= 2 * pc:
        return repr(text), False
    return repr(text[:pc]) + "\n" + repr(text[-pc:]), True


def sampled_tokens(read: Callable[[int, int], bytes], n: int) -> int:
    """Tokens of n bytes of UTF-8 from three decoded samples (head, middle, tail)."""
    if n == 0:
        return 0
    s = SAMPLE_BYTES
    if n <= 3 * s:
        return count_tokens(read(0, n).decode("utf-8", "replace"))
    counted = sum(count_tokens(read(off, s).decode("utf-8", "replace")) for off in (0, n // 2, n - s))
    return max(1, round(counted * n / (3 * s)))




def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    if isinstance(value, str):
        return _describe_text(name, value, config)
    return _describe_bytes(name, value, config)


FAMILY = Family("text", ("text", "bytes"), _describe,
                accepts=lambda v: isinstance(v, str | bytes | bytearray | memoryview))


__all__ = ["FAMILY", "SAMPLE_BYTES", "sampled_tokens", "text_preview"]
