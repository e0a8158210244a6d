"""How a failed litellm request is treated: which errors are retried, and how long the server asked us to wait.

`classify` sorts an exception into "auth" (a missing or rejected key), "context" (the prompt is over the
window), "rate" (429), "retry" (5xx, timeouts, dropped connections, malformed replies) or "fatal"
(anything else: a bad request is not retried). `LiteLLM.acomplete` decides on that alone, for both
transports: litellm's exceptions, and the direct lane's `HTTPStatusError` (read by its `status_code`).
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

# how OpenAI-compatible servers word a prompt over the window (OpenAI, vLLM, llama.cpp, SGLang)
_CONTEXT_WORDS = re.compile(r"context.length|maximum context|context window|exceeds the context", re.IGNORECASE)


def classify(exc: BaseException, litellm: Any) -> str:
    """'auth', 'context', 'rate', 'retry' or 'fatal'."""
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context"
    if isinstance(exc, litellm.AuthenticationError):
        return "auth"
    if isinstance(exc, litellm.RateLimitError):
        return "rate"
    if isinstance(exc, TimeoutError | litellm.Timeout | litellm.APIConnectionError | litellm.APIError
                  | ConnectionError):
        return "retry"
    status = getattr(exc, "status_code", None)
    if status in (401, 403):
        return "auth"
    if status == 400 and _CONTEXT_WORDS.search(str(exc)):
        return "context"
    if status == 429:
        return "rate"
    if isinstance(status, int) and (status >= 500 or status in (408, 409)):
        return "retry"
    try:
        import aiohttp
        import httpx

        if isinstance(exc, aiohttp.ClientError | httpx.TransportError):
            return "retry"
    except ImportError:
        pass
    return "fatal"


def timed_out(exc: BaseException, litellm: Any) -> bool:
    return isinstance(exc, TimeoutError | litellm.Timeout) or "timeout" in type(exc).__name__.lower()


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), if it said."""
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None), getattr(exc, "headers", None)):
        if not source:
            continue
        try:
            headers = {str(k).lower(): str(v) for k, v in source.items()}
        except Exception:
            continue
        if "retry-after-ms" in headers:
            try:
                return float(headers["retry-after-ms"]) / 1000.0
            except ValueError:
                pass
        value = headers.get("retry-after")
        if value:
            try:
                return float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value) if value else None
                if when is not None:
                    return max(0.0, when.timestamp() - time.time())
    return None
