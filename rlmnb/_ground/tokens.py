"""Token counting that never touches the network.

tiktoken downloads its encodings on first use; litellm ships the common ones in its package, so we
point `TIKTOKEN_CACHE_DIR` there (only if the user has not) before the first `get_encoding`.
Exact counts are for text we send; sizes of huge inputs are estimated from a sample.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "bundled_tokenizer_dir", "count_messages", "count_tokens", "encoding_for",
           "estimate_tokens", "prepare_offline_env"]

CHARS_PER_TOKEN = 4.0
_EXACT_LIMIT = 200_000  # characters counted exactly before switching to sampling
_lock = threading.Lock()


def bundled_tokenizer_dir() -> str | None:
    """litellm's folder of bundled tiktoken files, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


def prepare_offline_env() -> None:
    """Set the environment so tiktoken and litellm stay offline; user settings win."""
    folder = bundled_tokenizer_dir()
    if folder:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", folder)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    with _lock:
        prepare_offline_env()
        try:
            import tiktoken

            return tiktoken.get_encoding(name)
        except Exception:  # offline without bundled files, or tiktoken missing: estimate instead
            return None


def encoding_for(model: str | None) -> str:
    """The tiktoken encoding that best fits a model name (o200k for current OpenAI-style models)."""
    name = (model or "").lower()
    if any(old in name for old in ("gpt-3.5", "gpt-4-", "gpt-4 ", "text-embedding")) or name.endswith("gpt-4"):
        return "cl100k_base"
    return "o200k_base"


def count_tokens(text: str, model: str | None = None) -> int:
    """Exact count for text up to a few hundred thousand characters, a sampled estimate beyond."""
    if not text:
        return 0
    if len(text) > _EXACT_LIMIT:
        return estimate_tokens(text, model)
    enc = _encoding(encoding_for(model))
    if enc is None:
        return max(1, round(len(text) / CHARS_PER_TOKEN))
    return len(enc.encode(text, disallowed_special=()))


def estimate_tokens(text: str, model: str | None = None, sample_chars: int = 20_000) -> int:
    """Tokens of a large text from three exact-counted samples (head, middle, tail)."""
    n = len(text)
    if n <= 3 * sample_chars:
        return count_tokens(text, model) if n <= _EXACT_LIMIT else round(n / CHARS_PER_TOKEN)
    mid = n // 2
    parts = (text[:sample_chars], text[mid: mid + sample_chars], text[-sample_chars:])
    counted = sum(count_tokens(p, model) for p in parts)
    return max(1, round(counted * n / (3 * sample_chars)))


def count_messages(messages: list[dict[str, Any]], model: str | None = None) -> int:
    """Tokens of a chat request: contents plus a small per-message framing overhead."""
    return sum(count_tokens(str(m.get("content") or ""), model) + 4 for m in messages) + 2
