"""The limits of one run, fitted to its models' context windows.

`RLMConfig` holds ceilings (100,000 tokens of root conversation, 10,000 characters of output); a
16K-token local model would have its requests refused long before trimming started. `run_limits`
lowers them to what the root model's window holds, with room for its reply and a margin for our
token counts (tiktoken) differing from the model's own tokenizer, and reads the sub-model's window
for the system prompt: `sub_window` is None when nobody knows it, and the prompt says so.

Windows come from the LM's `context_window` (litellm's model info, or `LiteLLM(context_window=...)`);
reply sizes from its `max_output_tokens` (`max_tokens=`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmnb._ground.config import RLMConfig

__all__ = ["CHARS_PER_TOKEN", "SMALL_WINDOW", "DEFAULT_REPLY_TOKENS", "LOCAL_SNIPPET_MARGIN", "MIN_CONTEXT_TOKENS", "MIN_OUTPUT_CHARS",
           "OPENING_EXTRA", "TOKENIZER_MARGIN", "RunLimits", "reply_tokens", "run_limits", "sub_prompt_window",
           "window_of"]

TOKENIZER_MARGIN = 0.85
"""Share of the window we fill by our own count: tokenizers differ by 10-15% on code and numbers."""
DEFAULT_REPLY_TOKENS = 4_096
"""Room kept for a reply when the model is called without max_tokens (at most a quarter of the window)."""
CHARS_PER_TOKEN = 3
"""Characters per token of printed output (numbers and code tokenize densely)."""
MIN_OUTPUT_CHARS = 1_000
MIN_CONTEXT_TOKENS = 1_000
OPENING_EXTRA = 1_500
"""Tokens of system rules and question beside the InputsSummary."""
LOCAL_SNIPPET_MARGIN = 30.0
"""Seconds a snippet gets beyond one local sub-call's request timeout."""


@dataclass(frozen=True)
class RunLimits:
    """What one run's loop uses; see the module docs."""

    context_tokens: int
    output_chars: int
    snippet_timeout: float
    root_window: int | None = None
    sub_window: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"context_tokens": self.context_tokens, "output_chars": self.output_chars,
                "snippet_timeout": self.snippet_timeout, "root_window": self.root_window,
                "sub_window": self.sub_window}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunLimits:
        return cls(**{k: data[k] for k in ("context_tokens", "output_chars", "snippet_timeout", "root_window",
                                            "sub_window") if k in data})


SMALL_WINDOW = 32_768
"""A model whose context window is at most this many tokens is small (the local models of issue 22): a small root
gets a first reading, a small sub-model one item per map call."""


def window_of(lm: Any) -> int | None:
    """The LM's context window in tokens, None when unknown (or not an int)."""
    window = getattr(lm, "context_window", None)
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def reply_tokens(lm: Any, window: int | None) -> int:
    """Tokens a reply of this LM may take."""
    cap = getattr(lm, "max_output_tokens", None)
    if isinstance(cap, int) and cap > 0:
        return cap
    return min(DEFAULT_REPLY_TOKENS, window // 4) if window else DEFAULT_REPLY_TOKENS


def sub_prompt_window(config: RLMConfig, sub_lm: Any) -> int | None:
    """The largest sub-call prompt: the user's max_sub_prompt_tokens, else the sub-model's window less its reply."""
    if config.max_sub_prompt_tokens is not None:
        return config.max_sub_prompt_tokens
    window = window_of(sub_lm)
    return None if window is None else max(1, window - reply_tokens(sub_lm, window))


def run_limits(config: RLMConfig, root_lm: Any, sub_lm: Any) -> RunLimits:
    """The config's ceilings lowered to fit the models."""
    root_window = window_of(root_lm)
    context, output_chars = config.max_context_tokens, config.max_output_chars
    if root_window is not None:
        reply = reply_tokens(root_lm, root_window)
        fits = int((root_window - reply) * TOKENIZER_MARGIN)
        context = min(context, max(MIN_CONTEXT_TOKENS, fits))
        # the opening and the two latest turns (reply + observation each) must fit after trimming
        per_turn = (context - config.summary_max_tokens - OPENING_EXTRA) // 2 - reply
        output_chars = min(output_chars, max(MIN_OUTPUT_CHARS, per_turn * CHARS_PER_TOKEN))
    timeout = config.timeout
    sub_timeout = getattr(sub_lm, "timeout", None)
    if getattr(sub_lm, "local", False) and isinstance(sub_timeout, int | float):
        timeout = max(timeout, float(sub_timeout) + LOCAL_SNIPPET_MARGIN)
    return RunLimits(context_tokens=context, output_chars=output_chars, snippet_timeout=timeout,
                     root_window=root_window, sub_window=sub_prompt_window(config, sub_lm))
