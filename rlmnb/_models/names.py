"""Model names: which provider a name without one most likely means, said before anything is imported.

litellm names a model `provider/name` ("openai/gpt-4o", "anthropic/claude-sonnet-4-5"). A bare name
("gpt-4o", "claude-sonnet-4") has no provider to send it to: `provider_hint` suggests the provider form
from a small table of well-known name prefixes, then from litellm's bundled model list read as a JSON
file (never by importing litellm, which takes seconds), and `bare_name_error` words the one-line refusal.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

__all__ = ["PREFIX_PROVIDERS", "bare_name_error", "provider_hint"]

PREFIX_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"), ("chatgpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
    ("claude-", "anthropic"), ("gemini-", "gemini"), ("mistral-", "mistral"), ("codestral-", "mistral"),
    ("magistral-", "mistral"), ("open-mistral", "mistral"), ("command-", "cohere"), ("deepseek-", "deepseek"),
    ("grok-", "xai"), ("llama", "ollama"), ("qwen", "ollama"), ("phi", "ollama"), ("gemma", "ollama"),
)
"""Name prefixes -> the provider a bare name most likely means (open-weight families: a local Ollama)."""
_MAP_FILE = "model_prices_and_context_window_backup.json"  # litellm's bundled model list


def provider_hint(name: str) -> str | None:
    """The provider form of a bare model name ("gpt-4o" -> "openai/gpt-4o"), or None when no guess is sound."""
    bare = name.strip()
    if not bare or "/" in bare:
        return None
    lowered = bare.lower()
    for prefix, provider in PREFIX_PROVIDERS:
        if lowered.startswith(prefix):
            return f"{provider}/{bare}"
    known = _litellm_providers().get(bare)
    return f"{known}/{bare}" if known else None


def bare_name_error(name: str) -> str:
    """The sentence refusing a model name without a provider (and without an api_base to send it to)."""
    hint = provider_hint(name)
    guess = f"did you mean {hint!r}? " if hint else ""
    return (f"The model name {name!r} names no provider: {guess}Give it as provider/name (e.g. 'openai/gpt-5-mini', "
            f"'anthropic/claude-sonnet-4-5', 'ollama_chat/qwen3'), or pass api_base=... for a server that serves "
            f"it under that name.")


@functools.lru_cache(maxsize=1)
def _litellm_providers() -> dict[str, str]:
    """Bare model name -> provider from litellm's bundled list; empty when litellm is not installed."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / _MAP_FILE
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for key, entry in table.items():
        provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
        if isinstance(provider, str) and provider and "/" not in key:
            out[key] = provider.split("-", 1)[0]  # "vertex_ai-language-models" -> "vertex_ai"
    return out
