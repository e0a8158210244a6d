"""Reading a litellm response into a `Completion`: text, reasoning, finish reason, usage, and emptiness.

Providers answer HTTP 200 in shapes a caller must not mistake for an answer: no choices at all, a
choice whose content is null or empty (a safety block, or a reasoning model that spent all of
`max_tokens` thinking), or `finish_reason="content_filter"`. These come back as a Completion with
empty text and `meta["empty"]` saying which ("no_choices" or "no_content"), so the caller decides
(a root turn retries once; a sub-call retries or becomes an "[error]" slot: see `reply_checks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .models import Completion, Message
from .tokens import count_messages, count_tokens
from .usage import CallUsage


def _field(obj: Any, name: str) -> Any:
    """`obj.name` of a litellm response object, or `obj[name]` of a parsed JSON body (the direct lane); else None."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def reasoning_of(message: Any) -> str:
    """Thinking the provider returned beside the answer (`reasoning_content`, or thinking blocks)."""
    text = _field(message, "reasoning_content")
    if isinstance(text, str) and text.strip():
        return text
    blocks = _field(message, "thinking_blocks")
    if isinstance(blocks, list):
        parts = [str(b.get("thinking", "")) for b in blocks if isinstance(b, Mapping)]
        return "\n".join(p for p in parts if p)
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def cached_input_tokens(usage: Any) -> int:
    """Input tokens the provider read from its prompt cache (OpenAI/DeepSeek/Gemini via
    `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, DeepSeek's raw
    `prompt_cache_hit_tokens`); 0 when it says nothing."""
    details = _field(usage, "prompt_tokens_details")
    for value in (_field(details, "cached_tokens"), _field(usage, "cache_read_input_tokens"),
                  _field(usage, "prompt_cache_hit_tokens")):
        if isinstance(value, int) and value > 0:
            return value
    return 0


def read_response(response: Any, messages: list[Message], *, name: str, retries: int, rate_limited: int,
                  cost: Callable[[int, int, int], float | None], priced: bool = True) -> Completion:
    """The Completion of one response (a litellm object, or the direct lane's parsed JSON); usage is counted when the provider reports none.

    `priced`: the response carries its price (litellm's `response_cost`); when False (the direct
    lane) the price is `cost(input_tokens, output_tokens, cached_input_tokens)`.
    """
    choices = _field(response, "choices")
    choice = choices[0] if choices else None
    message = _field(choice, "message")
    text = _content_text(_field(message, "content"))
    finish = _field(choice, "finish_reason")
    finish_reason = str(finish) if finish else None
    usage = _field(response, "usage")
    input_tokens = int(_field(usage, "prompt_tokens") or 0)
    output_tokens = int(_field(usage, "completion_tokens") or 0)
    cached = cached_input_tokens(usage)
    hidden = getattr(response, "_hidden_params", None) or {}
    price = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    meta: dict[str, Any] = {"retries": retries, "rate_limited": rate_limited, "finish_reason": finish_reason}
    if choice is None:
        meta["empty"] = "no_choices"
    elif not text.strip():
        meta["empty"] = "no_content"
    if input_tokens == 0 and output_tokens == 0:  # the provider reported no usage: count it
        input_tokens = count_messages(messages, name)
        output_tokens = count_tokens(text, name)
        meta["usage_counted"] = True
        price = cost(input_tokens, output_tokens, 0) if price is not None else None
    if not priced:
        price = cost(input_tokens, output_tokens, cached)
    return Completion(text=text, model=str(_field(response, "model") or name),
                      usage=CallUsage(input_tokens, output_tokens, float(price) if price is not None else None,
                                      cached_input_tokens=cached),
                      meta=meta, finish_reason=finish_reason, reasoning=reasoning_of(message))
