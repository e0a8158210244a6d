"""How a litellm request is treated: how long it may take, which failures are retried, after how long.

- Timeouts: a request to a hosted provider may take `REMOTE_TIMEOUT` seconds by default; one to a
  server on this machine (llama.cpp, Ollama, vLLM, LM Studio: a loopback `api_base`, or a provider
  whose default address is local, see `is_local`) `LOCAL_TIMEOUT`. Such a server may still be computing
  a request that timed out on our side, and often answers one request at a time, so a timed-out request
  to it is not retried (`LiteLLM.acomplete` asks `timed_out`).
- `classify` sorts an exception into "auth" (a missing or rejected key), "context" (the prompt is over the
  window), "rate" (429), "retry" (5xx, timeouts, dropped connections, malformed replies) or "fatal"
  (anything else: a bad request is not retried). `LiteLLM.acomplete` decides on that alone, for both
  transports: litellm's exceptions, and the direct lane's `HTTPStatusError` (read by its `status_code`).
- `retry_after` reads how long the server asked us to wait (retry-after-ms or Retry-After).
- `server_gate` holds back requests beyond a server's parallel slots on our side: llama.cpp's Python server
  and Ollama answer one request at a time by default and queue the rest unseen, so a request's timeout
  would run while it waits behind the others (docs/decisions/local-server-slots.md). The timeout counts
  from when a request passes the gate.
- `server_slots` asks a server on this machine how many requests it serves at once, once per address and
  event loop (a server restarted on the same port may have other slots), where the server says: llama.cpp's
  `GET /props` (`total_slots`), or a `GET /v1/models` whose models are `owned_by` vLLM or SGLang (servers that
  batch: no gate, the run's own limit applies). A server that says neither (llama-cpp-python, Ollama, LM
  Studio) keeps `LOCAL_PARALLEL`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import re
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["BATCHING_SERVERS", "LOCAL_PARALLEL", "LOCAL_PROVIDERS", "LOCAL_TIMEOUT", "PROBE_TIMEOUT", "REMOTE_TIMEOUT",
           "classify", "is_local", "is_loopback", "retry_after", "server_gate", "server_slots", "stated_window", "timed_out"]

REMOTE_TIMEOUT = 120.0
"""Seconds a request to a hosted provider may take by default."""
LOCAL_TIMEOUT = 600.0
"""Seconds a request to a server on this machine may take by default."""
LOCAL_PARALLEL = 1
"""Requests sent at once to a server on this machine by default (llama.cpp's Python server and Ollama answer one
at a time unless told otherwise; a server that batches, such as vLLM, is given `parallel=` to match its slots)."""
PROBE_TIMEOUT = 2.0
"""Seconds `server_slots` waits for each of a local server's answers (/props, /v1/models)."""
BATCHING_SERVERS = frozenset({"vllm", "sglang"})
"""`owned_by` values of `GET /v1/models` from servers that batch requests (many at once)."""
# providers whose default api_base is on this machine
LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})
# how OpenAI-compatible servers word a prompt over the window (OpenAI, vLLM, llama.cpp, SGLang)
_CONTEXT_WORDS = re.compile(r"context.length|maximum context|context window|exceeds the (?:available )?context|"
                            r"context.size|exceed_context_size", re.IGNORECASE)


def is_loopback(api_base: object) -> bool:
    """True when `api_base` names this machine (127.0.0.0/8, ::1, localhost, 0.0.0.0)."""
    if not isinstance(api_base, str) or not api_base.strip():
        return False
    text = api_base.strip()
    host = urlsplit(text if "://" in text else f"http://{text}").hostname or ""
    if host in ("localhost", "0.0.0.0") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local(model: str, api_base: object) -> bool:
    """A model served on this machine: a loopback api_base, or a local provider with its default address."""
    if api_base is not None and str(api_base).strip():
        return is_loopback(api_base)
    return model.split("/", 1)[0] in LOCAL_PROVIDERS if "/" in model else False



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


_NUMBER = r"(\d[\d,]*)"
_WINDOW = re.compile(rf"maximum context length is {_NUMBER}|\"n_ctx\":\s*{_NUMBER}", re.IGNORECASE)
_PROMPT = re.compile(rf"\({_NUMBER} in (?:the messages|your prompt)|resulted in {_NUMBER} tokens|"
                     rf"\"n_prompt_tokens\":\s*{_NUMBER}", re.IGNORECASE)
_RESERVED = re.compile(rf"{_NUMBER} (?:in|for) the completion", re.IGNORECASE)


def stated_window(exc: BaseException) -> tuple[int, int] | None:
    """(tokens the prompt may have, tokens the server counted in the refused prompt), where a context-length refusal
    says both: the OpenAI wording that vLLM and llama-cpp-python copy ("maximum context length is N tokens ...
    (P in the messages, C in the completion)" or "resulted in P tokens"), or llama.cpp's `n_ctx` and
    `n_prompt_tokens`, read from the message or from the response body beside it (litellm keeps only the message
    in its text). None when it says neither; the caller then cuts by a fixed share."""
    body = getattr(getattr(exc, "response", None), "text", "")
    text = f"{exc}\n{body if isinstance(body, str) else ''}"
    window, prompt = _WINDOW.search(text), _PROMPT.search(text)
    if window is None or prompt is None:
        return None
    reserved = _RESERVED.search(text)

    def number(match: re.Match[str]) -> int:
        return int(next(g for g in match.groups() if g).replace(",", ""))

    allowed = number(window) - (number(reserved) if reserved else 0)
    counted = number(prompt)
    return (allowed, counted) if allowed > 0 and counted > 0 else None


def timed_out(exc: BaseException, litellm: Any) -> bool:
    """True when the request failed because it took too long."""
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


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


@contextlib.asynccontextmanager
async def server_gate(server: str, parallel: int | None) -> AsyncIterator[None]:
    """Wait for one of `parallel` slots shared by every client of `server` on this event loop (the root model and
    the sub-model are often the same server); no wait when `parallel` is None."""
    if parallel is None:
        yield
        return
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    gate = gates.setdefault((server, parallel), asyncio.Semaphore(parallel))
    async with gate:
        yield


_PROBES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Task[int | None]]] = (
    weakref.WeakKeyDictionary())


async def server_slots(api_base: str) -> int | None:
    """How many requests the server at `api_base` (on this machine) serves at once: its slots, None for a
    server that batches (no gate), else `LOCAL_PARALLEL`. Asked once per address and event loop (a run's), so a
    server restarted on the same address with other slots is seen by the next run; never raises."""
    key = api_base.strip().rstrip("/")
    probes = _PROBES.setdefault(asyncio.get_running_loop(), {})
    task = probes.get(key)
    if task is None:  # concurrent first requests share one probe
        task = probes[key] = asyncio.ensure_future(_ask_slots(key))
    return await asyncio.shield(task)


async def _ask_slots(base: str) -> int | None:
    import aiohttp

    root = base[: -len("/v1")] if base.endswith("/v1") else base
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            props = await _get_json(session, f"{root}/props")
            settings = props.get("default_generation_settings") if isinstance(props, dict) else None
            for value in (props.get("total_slots") if isinstance(props, dict) else None,
                          props.get("n_slots") if isinstance(props, dict) else None,
                          settings.get("n_slots") if isinstance(settings, dict) else None):
                if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                    return value
            listing = await _get_json(session, f"{base}/models")
            models = listing.get("data") if isinstance(listing, dict) else None
            owners = {str(m.get("owned_by", "")).lower() for m in models or [] if isinstance(m, dict)}
            if owners & BATCHING_SERVERS:
                return None
    except Exception:  # noqa: S110 - a server that cannot say keeps the safe default
        pass
    return LOCAL_PARALLEL


async def _get_json(session: Any, url: str) -> Any:
    """The JSON body of a GET, None for any other answer."""
    async with session.get(url) as response:
        if response.status != 200:
            return None
        try:
            return await response.json(content_type=None)
        except ValueError:
            return None
