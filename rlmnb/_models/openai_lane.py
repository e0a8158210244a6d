"""The direct lane: OpenAI-compatible chat requests on one pooled aiohttp session per event loop.

litellm spends ~3 ms of client CPU per request; for a server that speaks the OpenAI chat protocol
(vLLM, SGLang, llama.cpp, Ollama's /v1, OpenRouter, Together, Groq, DeepSeek, Fireworks, OpenAI)
that is the whole ceiling of a fan-out. This module sends such requests itself: one POST of the
chat body to `<base>/chat/completions`, the reply parsed as JSON, which
`litellm.read_response` reads as it reads a litellm response.

Contract:
- `choose_transport(model, api_base, transport, params)` says "direct" or "litellm": "auto" is
  direct only when the wire format is certainly OpenAI chat completions (an `api_base`, or a
  provider prefix in `OPENAI_PROVIDERS`) and every parameter is one this lane knows how to send.
- `OpenAILane.send` makes one attempt and nothing else: it never retries, never sleeps, and
  raises `HTTPStatusError` for a non-200 reply (with the status, headers and the server's message)
  or for a 200 whose body is not a chat completion (status 502); connection errors surface as
  aiohttp's own. Retries, timeouts and error kinds are decided by `LiteLLM.acomplete` alone.
- Sessions: one `aiohttp.ClientSession` per running event loop, opened on first use and closed by
  `close_lane_sessions()` on that loop (`LiteLLM.aclose` / the run's client release call it).

Secrets: the API key is only ever put in the Authorization header; it is never part of an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import weakref
from collections.abc import Mapping
from typing import Any

from rlmnb._ground.errors import ConfigError

__all__ = ["BODY_PARAMS", "OPENAI_PROVIDERS", "HTTPStatusError", "OpenAILane", "choose_transport",
           "close_lane_sessions", "wire_fields"]

OPENAI_PROVIDERS: dict[str, str | None] = {
    "openai": "https://api.openai.com/v1",
    "hosted_vllm": None,  # no default address: needs api_base
    "openrouter": "https://openrouter.ai/api/v1",
    "together_ai": "https://api.together.xyz/v1",
    "groq": "https://api.groq.com/openai/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "fireworks_ai": "https://api.fireworks.ai/inference/v1",
}
"""Provider prefixes whose chat endpoint is OpenAI's, with their default base URL."""

BODY_PARAMS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "n", "presence_penalty",
    "frequency_penalty", "logit_bias", "response_format", "tools", "tool_choice", "parallel_tool_calls", "user",
    "reasoning_effort", "logprobs", "top_logprobs", "extra_body"})
"""Parameters sent in the request body (`extra_body` is merged into it)."""
# How a request travels; read by the lane, never sent in the body.
_TRANSPORT_PARAMS = frozenset({"api_base", "base_url", "api_key", "extra_headers", "headers", "timeout",
                               "max_retries", "num_retries", "input_cost_per_token", "output_cost_per_token"})
TRANSPORTS = ("auto", "litellm", "direct")


def choose_transport(model: str, api_base: object, transport: str, params: Mapping[str, Any]) -> str:
    """'direct' or 'litellm' for a model; ConfigError when "direct" is forced where it cannot work.

    Args:
        model: the litellm model name ("openai/x", "hosted_vllm/x", ...).
        api_base: the base URL the user gave, or None.
        transport: "auto", "litellm" or "direct".
        params: the other keyword arguments the model was built with.
    """
    if transport not in TRANSPORTS:
        raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}; got {transport!r}.")
    if transport == "litellm":
        return "litellm"
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    has_base = isinstance(api_base, str) and bool(api_base.strip())
    unknown = sorted(set(params) - BODY_PARAMS - _TRANSPORT_PARAMS)
    if transport == "direct":
        if provider not in OPENAI_PROVIDERS and not has_base:
            raise ConfigError(f"transport='direct' needs an OpenAI-compatible endpoint: pass api_base=... or use a "
                              f"provider of {', '.join(OPENAI_PROVIDERS)}; {model!r} goes through litellm.")
        if unknown:
            raise ConfigError(f"transport='direct' does not send {', '.join(unknown)}; drop them or use "
                              f"transport='litellm'.")
        if not has_base and OPENAI_PROVIDERS.get(provider) is None and not _env_base(provider):
            raise ConfigError(f"transport='direct' for {model!r} needs api_base=... (the server's /v1 URL).")
        return "direct"
    if unknown or provider not in OPENAI_PROVIDERS:  # a model name without a known OpenAI-protocol prefix
        return "litellm"
    if not has_base and OPENAI_PROVIDERS[provider] is None and not _env_base(provider):
        return "litellm"
    return "direct"


def _env_base(provider: str) -> str | None:
    names = [f"{provider.upper()}_API_BASE"] + (["OPENAI_BASE_URL"] if provider == "openai" else [])
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


class HTTPStatusError(Exception):
    """A reply that is not a chat completion: `status_code`, `headers` (for Retry-After) and the server's message."""

    def __init__(self, status_code: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.headers = dict(headers or {})
        self.message = message


def wire_fields(raw: bytes) -> dict[str, Any]:
    """A chat completion body parsed for `read_response`; HTTPStatusError(502) when it is not one."""
    try:
        body = json.loads(raw)
    except ValueError:
        raise HTTPStatusError(502, "the server's reply is not valid JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("choices", []), list):
        raise HTTPStatusError(502, "the server's reply is not a chat completion")
    return body


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _session() -> Any:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        import aiohttp

        for old in [other for other in _sessions if other.is_closed()]:  # loops that ended without closing theirs
            del _sessions[old]

        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30.0, ttl_dns_cache=300)
        session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                        json_serialize=json.dumps, skip_auto_headers=("User-Agent",))
        _sessions[loop] = session
    return session


async def close_lane_sessions() -> None:
    """Close the running loop's session (its pooled connections); best effort, never raises."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.close(), 5.0)


class OpenAILane:
    """Sends one chat request for a model name to its OpenAI-compatible endpoint.

    Args:
        model: the litellm model name; its provider prefix is dropped on the wire
            ("openrouter/anthropic/claude-x" is sent as "anthropic/claude-x").
        params: the model's keyword arguments (api_base, api_key, extra_headers, body parameters).
        key_env: the environment variable holding the key when `api_key` is not given.
    """

    def __init__(self, model: str, params: Mapping[str, Any], key_env: str) -> None:
        provider, _, rest = model.partition("/")
        self.wire_model = rest if rest and provider in OPENAI_PROVIDERS else model
        base = params.get("api_base") or params.get("base_url") or _env_base(provider) \
            or OPENAI_PROVIDERS.get(provider)
        if not base:
            raise ConfigError(f"{model!r} needs api_base=... (the server's /v1 URL) for the direct transport.")
        self.url = f"{str(base).rstrip('/')}/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        for key in ("headers", "extra_headers"):
            extra = params.get(key)
            if isinstance(extra, Mapping):
                self._headers.update({str(k): str(v) for k, v in extra.items()})
        self._params = params
        self._key_env = key_env

    def _auth(self) -> dict[str, str]:
        key = self._params.get("api_key") or os.environ.get(self._key_env)
        return {**self._headers, "Authorization": f"Bearer {key}"} if key else self._headers

    async def send(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        """One attempt: POST the body, return the parsed completion; see the module docs for what it raises."""
        body: dict[str, Any] = {"model": self.wire_model, "messages": messages}
        for key, value in params.items():
            if key in BODY_PARAMS and key != "extra_body" and value is not None:
                body[key] = value
        extra = params.get("extra_body")
        if isinstance(extra, Mapping):
            body.update(extra)
        async with _session().post(self.url, data=json.dumps(body).encode(), headers=self._auth()) as response:
            raw = await response.read()
            if response.status != 200:
                raise HTTPStatusError(response.status, _error_message(raw), response.headers)
        return wire_fields(raw)


def _error_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            sizes = {k: error[k] for k in ("n_prompt_tokens", "n_ctx") if isinstance(error, dict) and k in error}
            return str(message)[:300] + (f" {json.dumps(sizes)}" if sizes else "")  # llama.cpp's window refusal
    except ValueError:
        pass
    return raw[:300].decode("utf-8", "replace").strip() or "no message"
