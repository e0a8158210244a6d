"""A fake OpenAI-compatible chat server on 127.0.0.1, for tests, notebooks and benchmarks offline.

It speaks enough of the OpenAI API for litellm (`model="openai/<name>", api_base=server.url`):
`POST /v1/chat/completions` and `GET /v1/models`, plus `GET /stats` and `POST /reset` for tests (and, with
`report_slots=True`, llama.cpp's `GET /props`).
What it answers (scripts, responders, reply shapes, latency, faults) is `fake_behaviours`; this
module is the server and its lifecycle. Knobs: `latency`, `faults` (with `retry_after` seconds on
429s), `api_key` (other keys get a 401), `context_window` (larger prompts get the provider's
context-length error) and `seed`. Random choices are drawn from (seed, request body, how often that
body was seen), so a run is reproducible whatever order concurrent requests arrive in, and a
retried request gets a fresh draw.

In process: `with FakeServer(script=...) as server: ...` (its own thread and event loop).
As a process: `python -m rlmnb.testing.fake_cli --port 0` prints `PORT <n>` then serves;
`FakeServerProcess` (in `fake_process`) starts and stops that for you.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlmnb.testing.fake_behaviours import (
    BUILTIN_RESPONDERS,
    FAULT_KINDS,
    Latency,
    Reply,
    Responder,
    completion_body,
    draw_fault,
    echo_responder,
    image_tokens_of,
    images_of,
    load_responder,
    load_script,
    needle_responder,
    plausible_tokens,
    shape,
    text_of,
)

__all__ = ["BUILTIN_RESPONDERS", "FAULT_KINDS", "Address", "FakeServer", "Latency", "Responder",
           "echo_responder", "lm_for", "load_responder", "load_script", "needle_responder", "plausible_tokens"]


class Address:
    """Where a fake server listens (`host`, `port`), as the URLs a client is given."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """The OpenAI base URL (pass as litellm's api_base)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


class FakeServer(Address):
    """An OpenAI-compatible server on its own thread and event loop. See the module docs for knobs.

    Args:
        script: root dialogues by model name (dict or JSON path); default none.
        responder: replies for unscripted models; default "needle".
        latency: seconds or a distribution spec; default 0.
        faults: {kind: rate} with kinds 429, 500, drop, timeout, malformed, no_choices, no_content and
            content_filter (see fake_behaviours); default none.
        fault_models: models the faults apply to; default all.
        fault_sequence: faults in the order requests arrive (for `fault_models`): the n-th request gets
            the n-th entry (a kind, or None for an answer), requests past its end are answered. Tests
            use it so that their outcome never depends on a random stream; `faults` and it exclude
            each other.
        retry_after: the Retry-After seconds sent with injected 429s; default 0.
        hang_s: how long a "timeout" fault waits before answering; default 30.
        api_key: the only accepted bearer key; default: any key.
        context_window: prompt tokens above which requests get a context-length error; default none.
        report_usage: include a usage block in replies (some local servers omit it); default True.
        seed: makes latency and fault draws reproducible; default 0.
        record_bodies: keep every chat request body, for `bodies()`; default False.
        prompt_cache: report `prompt_tokens_details.cached_tokens` as OpenAI does: the tokens of the
            longest run of leading messages this model was already sent (whole messages, byte-identical);
            default False.
        slots: requests answered at once; the others wait inside the server, unseen by the client, as with
            llama.cpp's Python server (one slot); default: all at once.
        report_slots: answer `GET /props` as llama.cpp's server does, with `total_slots` (the `slots` above, 1
            when unset); default False: /props is not found, as on most servers.
        owned_by: the `owned_by` of every model `GET /v1/models` lists ("vllm" or "sglang" to pose as a
            batching server); default "rlmnb-fake".
        port: 0 picks a free port.
    """

    def __init__(self, *, script: str | Path | Mapping[str, Any] | None = None,
                 responder: str | Responder = "needle", latency: float | str = 0.0,
                 faults: Mapping[str, float] | None = None, fault_models: set[str] | None = None,
                 fault_sequence: Sequence[str | None] | None = None, retry_after: float = 0.0, hang_s: float = 30.0, api_key: str | None = None,
                 context_window: int | None = None, report_usage: bool = True, seed: int = 0,
                 record_bodies: bool = False, prompt_cache: bool = False, slots: int | None = None,
                 report_slots: bool = False, owned_by: str = "rlmnb-fake",
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = load_script(script)
        self.responder = load_responder(responder)
        self.latency = Latency(latency)
        self.faults = dict(faults or {})
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown or sum(self.faults.values()) > 1 or any(r < 0 for r in self.faults.values()):
            raise ValueError(f"faults are rates (summing to at most 1) for {', '.join(FAULT_KINDS)}; "
                             f"got {self.faults!r}.")
        self.fault_sequence = list(fault_sequence or ())
        bad = [kind for kind in self.fault_sequence if kind is not None and kind not in FAULT_KINDS]
        if bad or (self.faults and self.fault_sequence):
            raise ValueError(f"fault_sequence holds kinds of {', '.join(FAULT_KINDS)} or None, and excludes "
                             f"faults=; got {self.fault_sequence!r}.")
        self._fault_turn = 0
        self.fault_models = set(fault_models) if fault_models else None
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.api_key = api_key
        self.context_window = context_window
        self.report_usage = report_usage
        self.seed = seed
        self.record_bodies = record_bodies
        self.prompt_cache = prompt_cache
        self.slots = slots
        self.report_slots = report_slots
        self.owned_by = owned_by
        self._slot_gate: asyncio.Semaphore | None = None
        self._bodies: list[dict[str, Any]] = []
        self._prefixes: set[str] = set()
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._stats = self._empty_stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None
        self._stopping: asyncio.Event | None = None

    # ---- lifecycle ------------------------------------------------------------------------------

    def lm(self, name: str = "fake-sub", **kwargs: Any) -> Any:
        """A `LiteLLM` for `name` on this server (provider "openai/", a dummy key); kwargs go to LiteLLM."""
        return lm_for(self.url, name, **kwargs)

    def start(self) -> FakeServer:
        """Serve from a daemon thread; returns once the port is bound."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_until_complete(self._wait_stopping())
                loop.run_until_complete(self.stop_async())
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name=f"fake-openai-{id(self):x}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving (idempotent); open connections are closed."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if not loop.is_closed() and self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)
        thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def start_async(self) -> None:
        """Bind and serve on the running loop (for use inside an existing event loop)."""
        from aiohttp import web

        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        if self.report_slots:
            app.router.add_get("/props", self._props)
        app.router.add_get("/stats", self._get_stats)
        app.router.add_post("/reset", self._reset)
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the bound port
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _wait_stopping(self) -> None:
        assert self._stopping is not None
        await self._stopping.wait()

    # ---- stats ----------------------------------------------------------------------------------
    @staticmethod
    def _empty_stats() -> dict[str, Any]:
        return {"requests": 0, "in_flight": 0, "peak_in_flight": 0, "replies": 0, "faults": {},
                "statuses": {}, "models": {}, "prompt_tokens": 0, "completion_tokens": 0, "with_stop": 0, "images": 0,
                "cached_tokens": 0}

    def stats(self) -> dict[str, Any]:
        """Requests, in-flight and peak in-flight, replies, faults injected, statuses, models, usage reported,
        requests that carried stop sequences."""
        with self._lock:
            copy: dict[str, Any] = json.loads(json.dumps(self._stats))
        return copy

    def bodies(self) -> list[dict[str, Any]]:
        """The chat request bodies received so far, in arrival order (with `record_bodies=True`)."""
        with self._lock:
            copy: list[dict[str, Any]] = json.loads(json.dumps(self._bodies))
        return copy

    def reset(self) -> None:
        """Clear the stats and the per-request draw history (the script restarts by construction)."""
        with self._lock:
            in_flight = self._stats["in_flight"]
            self._stats = self._empty_stats()
            self._stats["in_flight"] = in_flight
            self._seen.clear()
            self._bodies.clear()
            self._prefixes.clear()

    def _count(self, key: str, value: str) -> None:
        bucket = self._stats[key]
        bucket[value] = bucket.get(value, 0) + 1

    # ---- handlers -------------------------------------------------------------------------------
    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        names = sorted({*self.script, "fake-sub", "fake-root"})
        return web.json_response({"object": "list", "data": [
            {"id": n, "object": "model", "created": 0, "owned_by": self.owned_by} for n in names]})

    async def _props(self, request: Any) -> Any:
        """llama.cpp's server properties: how many requests it serves at once (`total_slots`)."""
        from aiohttp import web

        return web.json_response({"total_slots": self.slots or 1,
                                  "default_generation_settings": {"n_ctx": self.context_window or 4096}})

    async def _get_stats(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response(self.stats())

    async def _reset(self, request: Any) -> Any:
        from aiohttp import web

        self.reset()
        return web.json_response({"ok": True})

    async def _chat(self, request: Any) -> Any:
        with self._lock:
            self._stats["requests"] += 1
            self._stats["in_flight"] += 1
            self._stats["peak_in_flight"] = max(self._stats["peak_in_flight"], self._stats["in_flight"])
        status = "dropped"
        if self.slots is not None and self._slot_gate is None:
            self._slot_gate = asyncio.Semaphore(self.slots)  # on the server's own loop
        try:
            async with self._slot_gate or contextlib.nullcontext():
                response = await self._answer(request)
            status = "dropped" if response.status == 499 else str(response.status)
            return response
        finally:
            with self._lock:
                self._stats["in_flight"] -= 1
                self._count("statuses", status)

    async def _answer(self, request: Any) -> Any:
        from aiohttp import web

        raw = await request.read()
        if self.api_key is not None and request.headers.get("Authorization", "") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        try:
            body = json.loads(raw)
            model = str(body["model"])
            messages = list(body["messages"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "The request body must be JSON with 'model' and 'messages'.", "invalid_request_error")
        if body.get("stream"):
            return _error(400, "The fake server does not stream; send stream=false.", "invalid_request_error")
        rng = self._rng_for(raw)
        delay = self.latency.draw(rng)
        fault = self._draw_fault(rng, model)
        with self._lock:
            if self.record_bodies:
                self._bodies.append(body)
            self._count("models", model)
            self._stats["with_stop"] += bool(body.get("stop"))
            if fault:
                self._count("faults", fault)
        if delay:
            await asyncio.sleep(delay)
        if fault == "429":
            headers = {"Retry-After": _fmt_seconds(self.retry_after),
                       "retry-after-ms": str(int(self.retry_after * 1000))}
            return _error(429, "Rate limit reached (injected by the fake server).", "requests", "rate_limit_exceeded",
                          headers=headers)
        if fault == "500":
            return _error(500, "The server had an error (injected by the fake server).", "server_error")
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=499)  # never delivered: the connection is gone
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
        images = sum(len(images_of(m)) for m in messages)
        prompt_tokens = sum(plausible_tokens(text_of(m)) + 4 + image_tokens_of(m) for m in messages) + 2
        with self._lock:
            self._stats["images"] += images
        if self.context_window is not None and prompt_tokens > self.context_window:
            return _error(400, f"This model's maximum context length is {self.context_window} tokens. However, "
                               f"your messages resulted in {prompt_tokens} tokens. Please reduce the length of "
                               f"the messages.", "invalid_request_error", "context_length_exceeded")
        try:
            text = self._reply(model, messages)
        except _ScriptEnd as exc:
            return _error(400, str(exc), "invalid_request_error", "script_exhausted")
        except Exception as exc:  # a broken responder is the test's problem: say so in the reply
            return _error(500, f"responder failed: {type(exc).__name__}: {exc}", "server_error")
        if fault == "malformed":
            return web.Response(status=200, text='{"id": "chatcmpl-broken", "choices": [', content_type="application/json")
        fields = shape(text, fault, body.get("stop"))
        completion_tokens = plausible_tokens(str(fields.get("content") or ""))
        with self._lock:
            self._stats["replies"] += 1
        reply = completion_body(model, fields, int(time.time()), f"chatcmpl-{uuid.uuid4().hex[:24]}")
        if self.report_usage:
            reply["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens}
            cached = self._cached_prefix(model, messages) if self.prompt_cache else 0
            if self.prompt_cache:
                reply["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
            with self._lock:
                self._stats["prompt_tokens"] += prompt_tokens
                self._stats["completion_tokens"] += completion_tokens
                self._stats["cached_tokens"] += cached
        return web.json_response(reply)

    def _reply(self, model: str, messages: list[dict[str, Any]]) -> Reply:
        script = self.script.get(model)
        if script is None:
            out = self.responder(messages)
            return dict(out) if isinstance(out, Mapping) else str(out)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(script):
            raise _ScriptEnd(f"The script for model {model!r} has {len(script)} replies; "
                             f"this request asked for reply {turn + 1}.")
        return script[turn]

    def _cached_prefix(self, model: str, messages: list[dict[str, Any]]) -> int:
        """Tokens of the longest run of leading messages seen before for `model`; remembers this request's."""
        digest = hashlib.sha256(model.encode())
        cached = tokens = 0
        with self._lock:
            for message in messages:
                digest.update(json.dumps(message, sort_keys=True).encode())
                key = digest.hexdigest()
                tokens += plausible_tokens(text_of(message)) + 4
                if key in self._prefixes and cached == tokens - plausible_tokens(text_of(message)) - 4:
                    cached = tokens
                self._prefixes.add(key)
        return cached

    def _rng_for(self, raw: bytes) -> random.Random:
        digest = hashlib.sha256(raw).hexdigest()
        with self._lock:
            nth = self._seen.get(digest, 0)
            self._seen[digest] = nth + 1
        return random.Random(f"{self.seed}:{digest}:{nth}")

    def _draw_fault(self, rng: random.Random, model: str) -> str | None:
        if self.fault_models is not None and model not in self.fault_models:
            return None
        if self.fault_sequence:
            with self._lock:
                turn, self._fault_turn = self._fault_turn, self._fault_turn + 1
            return self.fault_sequence[turn] if turn < len(self.fault_sequence) else None
        return draw_fault(rng, self.faults) if self.faults else None

    def __repr__(self) -> str:
        state = "running" if self._thread is not None else "stopped"
        return f"FakeServer({self.url!r}, {state})"


class _ScriptEnd(Exception):
    pass


def _error(status: int, message: str, kind: str, code: str | None = None,
           headers: Mapping[str, str] | None = None) -> Any:
    from aiohttp import web

    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": code}},
                             status=status, headers=dict(headers or {}))


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def lm_for(url: str, name: str, **kwargs: Any) -> Any:
    """A `LiteLLM` for `name` on a fake server at `url` (provider "openai/", a dummy key)."""
    from rlmnb._models.litellm import LiteLLM

    kwargs.setdefault("api_key", "fake-key")
    return LiteLLM(name if "/" in name else f"openai/{name}", api_base=url, **kwargs)
