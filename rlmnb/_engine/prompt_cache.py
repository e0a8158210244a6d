"""Prompt caching on the root conversation: which providers need the prefix marked, and marking it.

Every root turn re-sends the whole conversation. Providers discount a prefix they have seen:
OpenAI, DeepSeek, Groq, Gemini 2.5 and vLLM/SGLang (prefix caching) do it on their own for a
byte-identical prefix, so the conversation keeps its early messages byte-stable across turns
(`Conversation.messages`: the system prompt and the opening never change; a trimming note is a
message of its own after them). Anthropic's models (directly, on Bedrock or Vertex, or through
OpenRouter) cache only up to blocks marked `cache_control`; `mark_prefix` marks the system prompt,
the last opening message and the newest message, so each turn reads the previous turn's prefix
from the cache and writes its own (Anthropic allows four marks; we use at most three).

Gemini's explicit context caching through litellm makes a separate billed cache object with a
minimum size, so it is not requested here; Gemini 2.5's implicit caching uses the stable prefix.
"""

from __future__ import annotations

from typing import Any

from rlmnb._models.base import Message

__all__ = ["CACHE_MARK", "mark_prefix", "needs_cache_marks"]

CACHE_MARK = {"type": "ephemeral"}


def needs_cache_marks(model_name: str) -> bool:
    """Whether a litellm model name reaches an Anthropic model, which caches only marked prefixes."""
    name = model_name.lower()
    provider, _, rest = name.partition("/")
    if provider == "anthropic":
        return True
    if provider in ("bedrock", "bedrock_converse", "vertex_ai", "openrouter"):
        return "anthropic" in rest or "claude" in rest
    return False


def mark_prefix(messages: list[Message], opening: int) -> list[Message]:
    """A copy of `messages` with `cache_control` on the system prompt, the opening's last message and the
    newest message (as content blocks); the input is not changed.

    Args:
        messages: the request, system message first.
        opening: how many messages (system included) never change across turns.
    """
    marks = {0, max(0, min(opening, len(messages)) - 1), len(messages) - 1}
    return [_marked(m) if i in marks else m for i, m in enumerate(messages)]


def _marked(message: Message) -> Message:
    content: Any = message.get("content")
    if isinstance(content, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        blocks = [dict(b) if isinstance(b, dict) else b for b in content]
    else:
        return message
    blocks[-1] = {**blocks[-1], "cache_control": dict(CACHE_MARK)}
    return {**message, "content": blocks}
