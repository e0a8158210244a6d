"""The containers family: lists, tuples, dicts and other Mappings, and plain scalars."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.text import clip
from rlmnb._ground.tokens import count_tokens
from rlmnb.inputs._previews import ITEM_CHARS, NAME_CHARS, approx_chars, brief, sample_positions
from rlmnb.inputs._readonly import ReadOnlyMapping, ReadOnlySequence, is_scalar, nested_kind
from rlmnb.inputs._records import Field, FieldInfo, type_name
from rlmnb.inputs._registry import Family
from rlmnb.inputs._registry import unsupported as _unsupported

if TYPE_CHECKING:
    from rlmnb._ground.config import RLMConfig

SAMPLE_ITEMS = 64          # items of a list or dict looked at to check and estimate it
CHECK_BUDGET = 2_000       # nested values type-checked per input at bind time

# --- containers and scalars ----------------------------------------------------------------------


def _describe_sequence(name: str, seq: Sequence[Any], config: RLMConfig) -> Field:
    n = len(seq)
    positions = [int(i) for i in sample_positions(n, SAMPLE_ITEMS)]
    samples = [seq[i] for i in positions]
    budget = [CHECK_BUDGET]
    for i, v in zip(positions, samples, strict=True):
        _check_nested(name, v, f"item [{i}]", budget, 0)
    k = min(n, config.preview_rows)
    lines = [f"[{i}] {brief(seq[i], ITEM_CHARS)}" for i in range(k)]
    types = _type_list(samples)
    detail = f"item types{' (sampled)' if n > len(samples) else ''}: {types}" if types else ""
    est = _container_tokens([approx_chars(v) + 2 for v in samples], [brief(v, 400) for v in samples], n)
    base, loader = _unwrap_sequence(seq, name)
    info = FieldInfo(name, "list", type_name(base), rows=n, est_tokens=est, preview="\n".join(lines),
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


def describe_mapping(name: str, mapping: Mapping[Any, Any], config: RLMConfig) -> Field:
    n = len(mapping)
    items = list(itertools.islice(mapping.items(), SAMPLE_ITEMS))
    budget = [CHECK_BUDGET]
    for key, v in items:
        _check_nested(name, v, f"value [{brief(key, NAME_CHARS)}]", budget, 0)
    k = min(n, config.preview_rows)
    lines = [f"{brief(key, NAME_CHARS)}: {brief(v, ITEM_CHARS)}" for key, v in items[:k]]
    types = _type_list([v for _, v in items])
    first = f" (first {len(items):,})" if n > len(items) else ""
    detail = f"value types{first}: {types}" if types else ""
    est = _container_tokens([approx_chars(key) + approx_chars(v) + 4 for key, v in items],
                            [f"{brief(key, 100)}: {brief(v, 400)}" for key, v in items], n)
    base = mapping._data if isinstance(mapping, ReadOnlyMapping) else mapping
    info = FieldInfo(name, "dict", type_name(base), rows=n, est_tokens=est, preview="\n".join(lines),
                     truncated=n > k or any("…" in line for line in lines),
                     detail=detail)
    return Field(name, mapping, info, lambda: ReadOnlyMapping(base, name))


def _describe_scalar(name: str, value: Any, config: RLMConfig) -> Field:
    text = brief(value, 1000)
    pc = config.preview_chars
    preview = clip(text, max(pc, 16)) if pc > 0 else ""
    info = FieldInfo(name, "scalar", type_name(value), size_chars=len(text),
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
        t = type_name(v._data if isinstance(v, ReadOnlySequence | ReadOnlyMapping) else v)
        counts[t] = counts.get(t, 0) + 1
    return ", ".join(t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _check_nested(name: str, value: Any, where: str, budget: list[int], depth: int) -> None:
    """Type-check a bounded sample of a nested value; unsupported values raise InputError."""
    if budget[0] <= 0 or depth > 12:
        return
    budget[0] -= 1
    kind = nested_kind(value)
    if kind is None:
        _unsupported(name, value, where)
    if kind == "mapping":
        for key, v in itertools.islice(value.items(), 16):
            _check_nested(name, v, f"{where}[{brief(key, NAME_CHARS)}]", budget, depth + 1)
    elif kind == "sequence":
        for i in sample_positions(len(value), 16):
            _check_nested(name, value[int(i)], f"{where}[{int(i)}]", budget, depth + 1)




def _describe(name: str, value: Any, config: RLMConfig) -> Field:
    if is_scalar(value):
        return _describe_scalar(name, value, config)
    if isinstance(value, Mapping):
        return describe_mapping(name, value, config)
    return _describe_sequence(name, value, config)


def _view(name: str, raw: Any) -> Any:
    """The kernel's view of a shipped container: the same wrappers `Field.load()` gives on the host."""
    if isinstance(raw, range | str | bytes) or is_scalar(raw):
        return raw
    if isinstance(raw, Mapping):
        return ReadOnlyMapping(raw, name)
    if isinstance(raw, Sequence):
        return ReadOnlySequence(raw, name)
    return raw


FAMILY = Family("containers", ("list", "dict", "scalar"), _describe,
                accepts=lambda v: is_scalar(v) or isinstance(v, Mapping | Sequence), view=_view)


__all__ = ["CHECK_BUDGET", "FAMILY", "SAMPLE_ITEMS", "describe_mapping"]
