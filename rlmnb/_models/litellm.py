"""`LiteLLM`: any litellm model as an rlmnb LM, with retries, usage and cost decided in one place.

- litellm is imported on the first request (in a worker thread, so a run's event loop never
  stalls on it), after `prepare_offline_env()` keeps it and tiktoken off the network.
- Retries live here and only here: 429s, 5xx, connection errors, malformed replies and timeouts
  are retried up to `max_retries` times with exponential backoff that honours Retry-After; the
  client underneath is told not to retry (`max_retries=0`, `num_retries=0`). While a request waits
  to retry it gives its concurrency slot back, and its 429s reach the run's AdaptiveLimiter.
- A server on this machine (loopback `api_base`, Ollama) gets a 600 s default timeout instead of
  120 s, and a request to it that timed out is not retried: the server may still be working on it,
  and a second copy would queue behind the first (`request_policy`). Requests to one server wait on our
  side for one of its `parallel` slots (default 1 for a server on this machine), so a request's timeout
  starts when the server can take it, not while it queues behind the others (`server_gate`).
- Stop sequences and a sampling seed are passed only where litellm says the provider supports them
  (`supports_stop`, `supports_seed`).
- Usage comes from the provider, else it is counted with tiktoken; cost comes from litellm's price
  map (None when the model has no price: unknown, not free). Give a model a price with
  `input_cost_per_token=` / `output_cost_per_token=` or with `litellm.register_model`
  (docs/decisions/litellm-prices.md).
- A reply is read by `read_response`. Providers answer HTTP 200 in shapes a caller must not mistake
  for an answer: no choices, a choice whose content is null or empty (a safety block, or a reasoning
  model that spent all of `max_tokens` thinking), or `finish_reason="content_filter"`. These come back
  as a Completion with empty text and `meta["empty"]` saying which ("no_choices" or "no_content"), so
  the caller decides (a root turn retries once; a sub-call retries or fails: `base.no_answer`).
- Transport: `transport="auto"` (default) sends requests to an OpenAI-compatible endpoint (an
  `api_base`, or an OpenAI-protocol provider such as openai/, hosted_vllm/, openrouter/, groq/)
  through the direct lane (`openai_lane`: one pooled aiohttp session per event loop, about a
  twelfth of litellm's client CPU per request: `bench/fanout.py --lane-only`), and everything else
  through litellm; `transport="litellm"` or `"direct"` forces one. Retries, errors, usage and cost
  are the same on both.
- A missing or rejected key is a `MissingAPIKey` naming the provider's environment variable; a
  prompt over the model's context window is a `PromptTooLarge`; any other failure is a
  `ModelCallFailed` (a failed slot, not a failed run).

Secrets: `repr`, `cache_identity()`, errors and `Completion.meta` never contain an API key.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import os
import random
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from rlmnb._ground.concurrency import backoff as _backoff
from rlmnb._ground.concurrency import note_rate_limited
from rlmnb._ground.errors import ConfigError, MissingAPIKey, PromptTooLarge, RLMError
from rlmnb._ground.tokens import count_messages, count_tokens, prepare_offline_env
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion, Message
from rlmnb._models.names import bare_name_error
from rlmnb._models.openai_lane import OpenAILane, choose_transport, close_lane_sessions
from rlmnb._models.request_policy import (
    LOCAL_PARALLEL,
    LOCAL_TIMEOUT,
    REMOTE_TIMEOUT,
    classify,
    is_local,
    retry_after,
    server_gate,
    server_slots,
    stated_window,
    timed_out,
)

__all__ = ["LiteLLM", "ModelCallFailed", "close_loop_clients", "load_litellm", "read_response", "reasoning_of"]

# Names whose values must never be shown or cached; headers are shown by name only.
_SECRET_NAMES = {"api_key", "azure_ad_token", "aws_secret_access_key", "aws_session_token", "vertex_credentials",
                 "client_secret", "password", "token"}
_NOT_SECRET = {"max_tokens", "max_completion_tokens", "top_logprobs"}
# Parameters that change how a request travels, not what it answers: left out of the cache key.
_TRANSPORT_ONLY = {"timeout", "max_retries", "num_retries", "extra_headers", "headers", "client", "stream_timeout",
                   "metadata", "litellm_call_id", "input_cost_per_token", "output_cost_per_token"}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "azure": "AZURE_API_KEY",
            "gemini": "GEMINI_API_KEY", "mistral": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY",
            "together_ai": "TOGETHERAI_API_KEY", "openrouter": "OPENROUTER_API_KEY", "deepseek": "DEEPSEEK_API_KEY",
            "cohere": "COHERE_API_KEY", "xai": "XAI_API_KEY", "fireworks_ai": "FIREWORKS_AI_API_KEY",
            "hosted_vllm": "HOSTED_VLLM_API_KEY", "perplexity": "PERPLEXITYAI_API_KEY"}
# Providers that take exactly the key variable above and nothing else (checked without importing litellm).
_PLAIN_KEY = frozenset({"openai", "anthropic", "groq", "mistral", "deepseek", "openrouter", "xai"})
# Modules litellm imports lazily on its first request; importing them up front keeps that off the loop.
_WARM_MODULES = ("openai.resources.chat", "litellm.proxy._types", "litellm._service_logger",
                 "litellm.litellm_core_utils.default_encoding", "litellm.llms.openai_like.dynamic_config")

_load_lock = threading.Lock()
_litellm: Any = None


class ModelCallFailed(RLMError):
    """A model request failed for good (after any retries); a failed slot, not a failed run."""


def load_litellm() -> Any:
    """Import and configure litellm once per process (seconds: call it off the event loop).

    Sets the offline environment first, silences litellm's "Give Feedback" banner, imports the
    modules its first request would import, and `gc.freeze()`s the import's objects so later
    collections skip them (set RLMNB_GC_FREEZE=0 to opt out).
    """
    global _litellm
    if _litellm is not None:
        return _litellm
    with _load_lock:
        if _litellm is not None:
            return _litellm
        prepare_offline_env()
        chosen = os.environ.get("TIKTOKEN_CACHE_DIR")  # litellm overwrites it on import; the user's choice wins
        import importlib

        # pydantic warns about litellm's own TypedDicts whenever a provider module loads lazily; that is
        # litellm's business, not the notebook's
        warnings.filterwarnings("ignore", message=r".*using the .ReadOnly. qualifier", category=UserWarning)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import litellm

            litellm.suppress_debug_info = True
            for name in _WARM_MODULES:
                with contextlib.suppress(Exception):  # a moved module only costs the first request some time
                    importlib.import_module(name)
            with contextlib.suppress(Exception):  # build pydantic schemas (and their warnings) now, not mid-request
                litellm.ModelResponse()
        if chosen is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = chosen
        if os.environ.get("RLMNB_GC_FREEZE", "1") != "0":
            gc.collect()
            gc.freeze()
            atexit.register(gc.unfreeze)  # collected as usual at exit (DuckDB's bindings report leaks otherwise)
        _litellm = litellm
        return litellm


async def _aload_litellm() -> Any:
    return _litellm if _litellm is not None else await asyncio.to_thread(load_litellm)


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    if lowered in _NOT_SECRET:
        return False
    return lowered in _SECRET_NAMES or lowered.endswith(("_key", "_secret", "_token", "_credentials", "password"))


class LiteLLM:
    """A litellm model. `LiteLLM("openai/gpt-5-mini")`; a plain model string means the same.

    Args:
        model: a litellm model name, e.g. "openai/gpt-5-mini", "anthropic/claude-sonnet-4-5",
            "ollama_chat/qwen3", "hosted_vllm/<served-name>".
        max_retries: retries of one request on 429, 5xx, connection errors and timeouts; default 4.
        timeout: seconds one attempt may take; default 120, or 600 for a server on this machine.
        backoff: first retry delay in seconds when the server sends no Retry-After; doubles per
            retry, with jitter; default 0.5.
        max_backoff: the longest wait between attempts, Retry-After included; default 30.
        context_window: the model's input limit in tokens; default: litellm's model info, if known.
        local: whether the server runs on this machine (longer default timeout, no retry of a timed-out
            request); default: a loopback api_base or a local provider (Ollama, LM Studio, llamafile).
        parallel: requests sent at once to the server, shared by every LiteLLM of the same server; the
            others wait on our side, where their timeout has not started. Default: for a server on this
            machine, what it says at the first request (llama.cpp's /props slots; no limit for vLLM and
            SGLang, which batch), else 1 (llama-cpp-python and Ollama answer one at a time); no limit for a
            hosted provider.
        input_cost_per_token, output_cost_per_token: register a price for this model with litellm.
        vision: whether the model reads images (llm_query(images=...)); default: litellm's model info,
            and a model litellm does not know is refused images until you say vision=True.
        transport: "auto" (default), "litellm" or "direct"; see the module docs.
        **litellm_kwargs: passed to `litellm.acompletion` (api_base, api_key, temperature,
            max_tokens, extra_headers, ...).
    """

    def __init__(self, model: str, *, max_retries: int = 4, timeout: float | None = None, backoff: float = 0.5,
                 max_backoff: float = 30.0, context_window: int | None = None, local: bool | None = None,
                 parallel: int | None = None, input_cost_per_token: float | None = None, output_cost_per_token: float | None = None,
                 vision: bool | None = None, transport: str = "auto", **litellm_kwargs: Any) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("LiteLLM needs a model name such as 'openai/gpt-5-mini'.")
        if "/" not in model and not (litellm_kwargs.get("api_base") or litellm_kwargs.get("base_url")):
            raise ConfigError(bare_name_error(model.strip()))  # "gpt-4o": say "openai/gpt-4o", not "needs api_base"
        self.local = is_local(model.strip(), litellm_kwargs.get("api_base")) if local is None else bool(local)
        if timeout is None:
            timeout = LOCAL_TIMEOUT if self.local else REMOTE_TIMEOUT
        if max_retries < 0 or timeout <= 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("max_retries, backoff and max_backoff must be >= 0 and timeout > 0.")
        if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
            raise ValueError(f"parallel is a number of requests (1 or more), or None; got {parallel!r}.")
        self.parallel = parallel if parallel is not None else (LOCAL_PARALLEL if self.local else None)
        base = litellm_kwargs.get("api_base")
        # a server on this machine is asked how many requests it serves at once (first request); parallel= wins
        self._slots_from = str(base) if parallel is None and self.local and base else None
        for reserved in ("model", "messages", "stream"):
            if reserved in litellm_kwargs:
                raise ValueError(f"LiteLLM does not take {reserved!r} as a litellm argument.")
        self.name = model.strip()
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.kwargs = dict(litellm_kwargs)
        self._context_window = context_window
        self._price = (input_cost_per_token, output_cost_per_token)
        if (input_cost_per_token is None) != (output_cost_per_token is None):
            raise ValueError("Give both input_cost_per_token and output_cost_per_token, or neither.")
        self._ready = False
        self._key_checked = False
        self._ready_lock = threading.Lock()
        self._provider = ""
        self._rng = random.Random()
        self._supported: frozenset[str] | None = None
        self.vision = vision  # None: litellm's model info decides (supports_images)
        self.transport = choose_transport(self.name, self.kwargs.get("api_base"), transport, self.kwargs)
        self._lane = OpenAILane(self.name, self.kwargs, self.key_env_var()) if self.transport == "direct" else None
        self._rates: tuple[float, float, float] | None | bool = False  # per-token prices, read once (False: not yet)

    # ---- what the rest of rlmnb reads ---------------------------------------------------------------
    @property
    def provider(self) -> str:
        """litellm's provider name for this model (imports litellm)."""
        self._prepare()
        return self._provider

    @property
    def context_window(self) -> int | None:
        """The model's input limit in tokens, from the constructor or litellm's model info; None if unknown."""
        if self._context_window is None:
            self._prepare()
        return self._context_window

    @property
    def max_output_tokens(self) -> int | None:
        """The reply cap this model is called with (`max_tokens=`), None when the provider decides."""
        value = self.kwargs.get("max_tokens") or self.kwargs.get("max_completion_tokens")
        return int(value) if isinstance(value, int) and value > 0 else None

    @property
    def temperature(self) -> float | None:
        """The sampling temperature this model was built with (`temperature=`), None when the provider decides."""
        value = self.kwargs.get("temperature")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def supports_stop(self) -> bool:
        """Whether the provider takes stop sequences (litellm's supported parameters; imports litellm)."""
        return "stop" in self._supported_params()

    @property
    def supports_seed(self) -> bool:
        """Whether the provider takes a sampling `seed` (litellm's supported parameters; imports litellm)."""
        return "seed" in self._supported_params()

    def _supported_params(self) -> frozenset[str]:
        """The OpenAI parameters litellm says the provider takes, read once (empty when litellm cannot say)."""
        if self._supported is None:
            self._prepare()
            try:
                params = _litellm.get_supported_openai_params(model=self.name, custom_llm_provider=self._provider)
            except Exception:
                params = None
            self._supported = frozenset(params or ())
        return self._supported

    def supports_images(self) -> bool | None:
        """Whether the model reads images: `vision=` when given, else litellm's model info (supports_vision);
        None when litellm does not know the model (llm_query(images=...) then refuses; pass vision=True)."""
        if self.vision is not None:
            return self.vision
        self._prepare()
        try:
            info = _litellm.get_model_info(model=self.name, custom_llm_provider=self._provider or None)
        except Exception:
            return None
        return bool(info.get("supports_vision"))

    def cache_identity(self) -> dict[str, Any]:
        """What decides this model's answers: the name and answer-changing parameters, no secrets."""
        params = {k: v for k, v in self.kwargs.items() if not _is_secret(k) and k not in _TRANSPORT_ONLY}
        return {"model": self.name, "params": params}

    def public_params(self) -> dict[str, Any]:
        """The constructor's litellm arguments as safe to show: secrets masked, header values hidden."""
        out: dict[str, Any] = {}
        for key, value in self.kwargs.items():
            if _is_secret(key):
                out[key] = "***"
            elif key in ("extra_headers", "headers") and isinstance(value, Mapping):
                out[key] = {h: "***" for h in value}
            else:
                out[key] = value
        return out

    def __repr__(self) -> str:
        parts = [repr(self.name)] + [f"{k}={v!r}" for k, v in self.public_params().items()]
        return f"LiteLLM({', '.join(parts)})"

    # ---- preparation ------------------------------------------------------------------------------
    async def aprepare(self) -> None:
        """Do the slow first-use work (importing litellm) in a worker thread, off the event loop."""
        if not self._ready:
            await asyncio.to_thread(self._prepare)

    def _prepare(self) -> None:
        """Once per instance: import litellm, register a price, learn the window, check the key."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            litellm = load_litellm()
            try:
                self._provider = litellm.get_llm_provider(self.name, api_base=self.kwargs.get("api_base"))[1]
            except Exception:
                self._provider = self.name.split("/", 1)[0] if "/" in self.name else "openai"
            if self._price[0] is not None:
                in_cost = float(self._price[0])
                entry: dict[str, Any] = {"input_cost_per_token": in_cost,
                                         "output_cost_per_token": float(self._price[1] or 0.0),
                                         # prompt-cache prices unknown: charge them as plain input
                                         "cache_read_input_token_cost": in_cost,
                                         "cache_creation_input_token_cost": in_cost,
                                         "litellm_provider": self._provider, "mode": "chat"}
                if self._context_window:
                    entry["max_input_tokens"] = self._context_window
                litellm.register_model({self.name: entry})
            if self._context_window is None:
                try:
                    window = litellm.get_model_info(self.name).get("max_input_tokens")
                    self._context_window = int(window) if window else None
                except Exception:  # not in litellm's map: no cap unless the user sets one
                    self._context_window = None
            self._ready = True

    def check_key(self) -> None:
        """Raise MissingAPIKey when the provider needs a key that is neither passed nor in the environment.

        A provider whose one key variable is known (`_PLAIN_KEY`) is checked before litellm is imported, so a
        missing key is said at once; litellm's own check follows for the rest.
        """
        provider = self.name.split("/", 1)[0]
        if (provider in _PLAIN_KEY and not self.kwargs.get("api_key")
                and not os.environ.get(_KEY_ENV[provider], "").strip()):
            raise MissingAPIKey(f"No API key for {provider}: set {_KEY_ENV[provider]} (or pass api_key=...).")
        self._prepare()
        if not self.kwargs.get("api_key"):
            try:
                report = _litellm.validate_environment(model=self.name, api_base=self.kwargs.get("api_base"))
            except Exception:  # litellm could not tell: let the provider answer
                report = {}
            missing = [k for k in report.get("missing_keys", []) if k.endswith(("_KEY", "_TOKEN"))]
            if missing:
                raise MissingAPIKey(
                    f"No API key for {self._provider}: set {' or '.join(missing)} (or pass api_key=...).")
        self._key_checked = True

    def key_env_var(self) -> str:
        provider = self._provider or self.name.split("/", 1)[0]
        return _KEY_ENV.get(provider, f"{provider.upper()}_API_KEY")

    # ---- the request ------------------------------------------------------------------------------
    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        """One chat request with retries; see the module docs for what is retried and raised."""
        if not self._key_checked:
            await asyncio.to_thread(self.check_key)
        litellm = _litellm if _litellm is not None else await _aload_litellm()
        if self._slots_from is not None:
            self.parallel, self._slots_from = await server_slots(self._slots_from), None
        lane = self._lane
        call = {**self.kwargs, **params, "timeout": self.timeout, "max_retries": 0, "num_retries": 0}
        retries = rate_limited = 0
        while True:
            try:
                async with server_gate(self._server(), self.parallel), asyncio.timeout(self.timeout):
                    if lane is not None:
                        response = await lane.send(messages, call)
                    else:
                        response = await litellm.acompletion(model=self.name, messages=messages, **call)
                break
            except Exception as exc:
                kind = classify(exc, litellm)
                if kind == "auth":
                    raise MissingAPIKey(
                        f"The API key for {self._provider} was rejected: check {self.key_env_var()} "
                        f"(or pass api_key=...).") from None
                if kind == "context":
                    refused = PromptTooLarge(
                        f"{self.name} refused the prompt as larger than its context window; nothing was answered. "
                        f"Split the text into smaller chunks and use llm_query_batched.")
                    refused.stated = stated_window(exc)
                    raise refused from None
                if kind == "retry" and self.local and timed_out(exc, litellm):
                    raise ModelCallFailed(
                        f"{self.name} did not answer within {self.timeout:g} s. The server on this machine may still "
                        f"be working on the request, so it was not sent again; give a longer timeout "
                        f"(timeout=...) or a shorter request.") from None
                if kind == "fatal" or retries >= self.max_retries:
                    attempts = f" after {retries + 1} attempts" if retries else ""
                    raise ModelCallFailed(f"{self.name} failed{attempts}: {self._short(exc)}") from None
                if kind == "rate":
                    rate_limited += 1
                    note_rate_limited()
                delay = self._delay(retries, retry_after(exc))
                retries += 1
                await _backoff(delay)
        return read_response(response, messages, name=self.name, retries=retries, rate_limited=rate_limited,
                             cost=self._cost, priced=lane is None, saved=self._saved)

    def _server(self) -> str:
        """The server this model's requests go to, as `server_gate` keys it: its api_base, else its provider."""
        base = self.kwargs.get("api_base")
        return str(base).strip().rstrip("/") if base else self.name.split("/", 1)[0]

    def _cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
        if self._lane is not None:
            return self._lane_cost(input_tokens, output_tokens, cached_tokens)
        try:
            prompt_cost, completion_cost = _litellm.cost_per_token(
                model=self.name, prompt_tokens=input_tokens, completion_tokens=output_tokens)
            return float(prompt_cost + completion_cost)
        except Exception:
            return None

    def _lane_cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
        """The price from litellm's cost map (registered prices included), read once per model.

        litellm is loaded by then (`acomplete` loads it before the first request on either transport).
        """
        rates = self._cost_rates()
        if rates is None:
            return None
        cost_in, cost_out, cost_cached = rates
        return (input_tokens - cached_tokens) * cost_in + cached_tokens * cost_cached + output_tokens * cost_out

    def _saved(self, cached_tokens: int) -> float:
        """What `cached_tokens` read from the provider's prompt cache saved against the full input rate."""
        rates = self._cost_rates() if cached_tokens else None
        return max(0.0, cached_tokens * (rates[0] - rates[2])) if rates is not None else 0.0

    def _cost_rates(self) -> tuple[float, float, float] | None:
        """(input, output, cached input) dollars per token from litellm's cost map, or None when unpriced."""
        if self._rates is False:
            table = getattr(_litellm, "model_cost", None) or {}
            entry = next((table[key] for key in (self.name, self.name.split("/", 1)[-1])
                          if isinstance(table.get(key), dict) and "input_cost_per_token" in table[key]), None)
            if entry is None:
                self._rates = None
            else:
                cost_in = float(entry.get("input_cost_per_token") or 0.0)
                cached_rate = entry.get("cache_read_input_token_cost")
                self._rates = (cost_in, float(entry.get("output_cost_per_token") or 0.0),
                               cost_in if cached_rate is None else float(cached_rate))
        return self._rates if isinstance(self._rates, tuple) else None

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_backoff, max(0.0, retry_after))
        return float(min(self.max_backoff, self.backoff * 2.0 ** retry) * (0.5 + 0.5 * self._rng.random()))

    def _short(self, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {str(exc).strip()}"
        text = text.splitlines()[0] if text else type(exc).__name__
        text = re.sub(r"(litellm\.\w+: )+", "", text)
        key = self.kwargs.get("api_key")
        if isinstance(key, str) and key:
            text = text.replace(key, "***")
        return text[:300]

    async def aclose(self) -> None:
        """Close the HTTP clients litellm opened on the running loop: only when nothing else on it uses litellm."""
        await close_loop_clients()


async def close_loop_clients() -> None:
    """Close the clients litellm (and the direct lane) cached for the running loop; drain litellm's logging queue.

    litellm keys its cached HTTP clients by event loop; a run's loop ends with the run, so without
    this its connections would linger until garbage collection, and litellm would warn about
    logging tasks left on a dead loop. Best effort: never raises.
    """
    await close_lane_sessions()
    litellm = _litellm  # loaded by load_litellm, not half-imported: importing from a module another thread is
    if litellm is None:  # still loading deadlocks and leaves litellm broken for the process (a cancelled first call)
        return
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        await asyncio.sleep(0)  # let just-finished calls enqueue their logging tasks
        if getattr(GLOBAL_LOGGING_WORKER, "_bound_loop", None) is asyncio.get_running_loop():
            await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), 5.0)
            await asyncio.wait_for(GLOBAL_LOGGING_WORKER.stop(), 5.0)  # its worker task dies with this loop
    except Exception:
        pass
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    entries = getattr(cache, "cache_dict", None)
    if not isinstance(entries, dict):
        return
    suffix = f"-{id(asyncio.get_running_loop())}"
    for key in [k for k in list(entries) if isinstance(k, str) and k.endswith(suffix)]:
        client = entries.pop(key, None)
        ttl = getattr(cache, "ttl_dict", None)
        if isinstance(ttl, dict):
            ttl.pop(key, None)
        try:
            closer = getattr(client, "aclose", None) or getattr(client, "close", None)
            if closer is not None:
                result = closer()
                if asyncio.iscoroutine(result):
                    await asyncio.wait_for(result, 5.0)
        except Exception:
            pass


# Reading a reply

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
                  cost: Callable[[int, int, int], float | None], priced: bool = True,
                  saved: Callable[[int], float] | None = None) -> Completion:
    """The Completion of one response (a litellm object, or the direct lane's parsed JSON); usage is counted
    when the provider reports none.

    `priced`: the response carries its price (litellm's `response_cost`); when False (the direct
    lane) the price is `cost(input_tokens, output_tokens, cached_input_tokens)`. `saved(cached_input_tokens)`:
    what the provider's prompt cache saved (CallUsage.saved_usd), for a priced call.
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
    saving = saved(cached) if saved is not None and cached and price is not None else 0.0
    return Completion(text=text, model=str(_field(response, "model") or name),
                      usage=CallUsage(input_tokens, output_tokens, float(price) if price is not None else None,
                                      cached_input_tokens=cached, saved_usd=saving),
                      meta=meta, finish_reason=finish_reason, reasoning=reasoning_of(message))
