"""A fake OpenAI-compatible chat server on 127.0.0.1, for tests, notebooks and benchmarks offline.

It speaks enough of the OpenAI API for litellm (`model="openai/<name>", api_base=server.url`):
`POST /v1/chat/completions` and `GET /v1/models`, plus `GET /stats` and `POST /reset` for tests.

Replies follow a policy:

- a *script* of root dialogues, `{"model-name": ["reply 1", "reply 2", ...]}` (a dict or a JSON
  file): a request for a scripted model gets the reply numbered by the assistant turns already in
  its conversation, so one script serves any number of independent runs;
- a *responder* for every other model: a callable `f(messages) -> str`, an import path
  `"package.module:function"`, or a built-in: `"needle"` (the 7-digit number after "magic number
  is" in the prompt, else "NONE") and `"echo"` (the last user message).

Knobs: `latency` (seconds, or a seeded distribution such as "uniform:0.05,0.15", "exp:0.1",
"normal:0.1,0.02"), `faults` injected at given rates (`{"429": 0.1, "500": 0.05, "drop": 0.01,
"timeout": 0.01, "malformed": 0.01}`, with `retry_after` seconds on 429s), `api_key` (other keys
get a 401), `context_window` (larger prompts get the provider's context-length error) and `seed`.
Random choices are drawn from (seed, request body, how often that body was seen), so a run is
reproducible whatever order concurrent requests arrive in, and a retried request gets a fresh draw.

In process: `with FakeServer(script=...) as server: ...` (its own thread and event loop).
As a process: `python -m rlmnb.testing.fake_server --port 0` prints `PORT <n>` then serves;
`FakeServerProcess` starts and stops that for you.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import math
import random
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Responder = Callable[[list[dict[str, Any]]], str]
FAULT_KINDS = ("429", "500", "drop", "timeout", "malformed")
_NEEDLE = re.compile(r"magic number is\D{0,20}?(\d{7})(?!\d)", re.IGNORECASE)


# ---- reply policies --------------------------------------------------------------------------------
def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def needle_responder(messages: list[dict[str, Any]]) -> str:
    """The 7-digit number that follows "magic number is" in the conversation, else "NONE"."""
    for message in reversed(messages):
        found = _NEEDLE.search(_text_of(message))
        if found:
            return found.group(1)
    return "NONE"


def echo_responder(messages: list[dict[str, Any]]) -> str:
    """The last user message, unchanged."""
    users = [m for m in messages if m.get("role") == "user"]
    return _text_of(users[-1]) if users else ""


BUILTIN_RESPONDERS: dict[str, Responder] = {"needle": needle_responder, "echo": echo_responder}


def load_responder(spec: str | Responder) -> Responder:
    """A callable as is, a built-in name, or "package.module:function"."""
    if callable(spec):
        return spec
    if spec in BUILTIN_RESPONDERS:
        return BUILTIN_RESPONDERS[spec]
    try:  # the shared deterministic behaviours (find_needle, count_labels, ...)
        from .responders import BUILTIN
    except ImportError:
        BUILTIN = {}
    if spec in BUILTIN:
        return BUILTIN[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"responder {spec!r} is neither built in ({', '.join(BUILTIN_RESPONDERS)}) "
                         f"nor an import path like 'package.module:function'.")
    fn = getattr(importlib.import_module(module_name), attr)
    if not callable(fn):
        raise ValueError(f"responder {spec!r} is not callable.")
    return fn  # type: ignore[no-any-return]


def load_script(script: str | Path | Mapping[str, Any] | None) -> dict[str, list[str]]:
    """A script dict, or the path of a JSON file holding one."""
    if script is None:
        return {}
    data = json.loads(Path(script).read_text(encoding="utf-8")) if isinstance(script, str | Path) else script
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError('a script maps model names to lists of replies: {"model": ["reply 1", ...]}')
    return {str(k): [str(r) for r in v] for k, v in data.items()}


class Latency:
    """Seconds to wait before answering: fixed, or drawn from a seeded distribution.

    Specs: a number, "fixed:S", "uniform:A,B", "exp:MEAN", "normal:MEAN,SD" (clipped at 0).
    """

    def __init__(self, spec: float | str = 0.0) -> None:
        self.spec = spec
        self.args: tuple[float, ...]
        if isinstance(spec, int | float):
            self.kind, self.args = "fixed", (float(spec),)
        else:
            kind, _, rest = str(spec).partition(":")
            if not rest:
                kind, rest = "fixed", kind
            try:
                self.kind, self.args = kind, tuple(float(x) for x in rest.split(","))
            except ValueError:
                self.kind, self.args = "?", ()
        arity = {"fixed": 1, "uniform": 2, "exp": 1, "normal": 2}
        if arity.get(self.kind) != len(self.args) or any(a < 0 for a in self.args):
            raise ValueError(f"latency {spec!r}: use seconds, 'uniform:A,B', 'exp:MEAN' or 'normal:MEAN,SD'.")

    def draw(self, rng: random.Random) -> float:
        a = self.args
        if self.kind == "fixed":
            return a[0]
        if self.kind == "uniform":
            return rng.uniform(a[0], a[1])
        if self.kind == "exp":
            return rng.expovariate(1.0 / a[0]) if a[0] > 0 else 0.0
        return max(0.0, rng.gauss(a[0], a[1]))


def plausible_tokens(text: str) -> int:
    """A cheap, stable token count (about four characters a token), like a provider would report."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


# ---- the server ---------------------------------------------------------------------------------
class FakeServer:
    """An OpenAI-compatible server on its own thread and event loop. See the module docs for knobs.

    Args:
        script: root dialogues by model name (dict or JSON path); default none.
        responder: replies for unscripted models; default "needle".
        latency: seconds or a distribution spec; default 0.
        faults: {kind: rate} with kinds 429, 500, drop, timeout, malformed; default none.
        fault_models: models the faults apply to; default all.
        retry_after: the Retry-After seconds sent with injected 429s; default 0.
        hang_s: how long a "timeout" fault waits before answering; default 30.
        api_key: the only accepted bearer key; default: any key.
        context_window: prompt tokens above which requests get a context-length error; default none.
        report_usage: include a usage block in replies (some local servers omit it); default True.
        seed: makes latency and fault draws reproducible; default 0.
        port: 0 picks a free port.
    """

    def __init__(self, *, script: str | Path | Mapping[str, Any] | None = None,
                 responder: str | Responder = "needle", latency: float | str = 0.0,
                 faults: Mapping[str, float] | None = None, fault_models: set[str] | None = None,
                 retry_after: float = 0.0, hang_s: float = 30.0, api_key: str | None = None,
                 context_window: int | None = None, report_usage: bool = True, seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = load_script(script)
        self.responder = load_responder(responder)
        self.latency = Latency(latency)
        self.faults = dict(faults or {})
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown or sum(self.faults.values()) > 1 or any(r < 0 for r in self.faults.values()):
            raise ValueError(f"faults are rates (summing to at most 1) for {', '.join(FAULT_KINDS)}; "
                             f"got {self.faults!r}.")
        self.fault_models = set(fault_models) if fault_models else None
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.api_key = api_key
        self.context_window = context_window
        self.report_usage = report_usage
        self.seed = seed
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
    @property
    def url(self) -> str:
        """The OpenAI base URL (pass as litellm's api_base)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def lm(self, name: str = "fake-sub", **kwargs: Any) -> Any:
        """A `LiteLLM` for `name` on this server (provider "openai/", a dummy key); kwargs go to LiteLLM."""
        return _lm_for(self.url, name, **kwargs)

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
                "statuses": {}, "models": {}, "prompt_tokens": 0, "completion_tokens": 0}

    def stats(self) -> dict[str, Any]:
        """Requests, in-flight and peak in-flight, replies, faults injected, statuses, models, usage reported."""
        with self._lock:
            copy: dict[str, Any] = json.loads(json.dumps(self._stats))
        return copy

    def reset(self) -> None:
        """Clear the stats and the per-request draw history (the script restarts by construction)."""
        with self._lock:
            in_flight = self._stats["in_flight"]
            self._stats = self._empty_stats()
            self._stats["in_flight"] = in_flight
            self._seen.clear()

    def _count(self, key: str, value: str) -> None:
        bucket = self._stats[key]
        bucket[value] = bucket.get(value, 0) + 1

    # ---- handlers -------------------------------------------------------------------------------
    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        names = sorted({*self.script, "fake-sub", "fake-root"})
        return web.json_response({"object": "list", "data": [
            {"id": n, "object": "model", "created": 0, "owned_by": "rlmnb-fake"} for n in names]})

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
        try:
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
            self._count("models", model)
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
        prompt_tokens = sum(plausible_tokens(_text_of(m)) + 4 for m in messages) + 2
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
        completion_tokens = plausible_tokens(text)
        with self._lock:
            self._stats["replies"] += 1
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": "fp_rlmnb_fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": "stop"}]}
        if self.report_usage:
            reply["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens}
            with self._lock:
                self._stats["prompt_tokens"] += prompt_tokens
                self._stats["completion_tokens"] += completion_tokens
        return web.json_response(reply)

    def _reply(self, model: str, messages: list[dict[str, Any]]) -> str:
        script = self.script.get(model)
        if script is None:
            return str(self.responder(messages))
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(script):
            raise _ScriptEnd(f"The script for model {model!r} has {len(script)} replies; "
                             f"this request asked for reply {turn + 1}.")
        return script[turn]

    def _rng_for(self, raw: bytes) -> random.Random:
        digest = hashlib.sha256(raw).hexdigest()
        with self._lock:
            nth = self._seen.get(digest, 0)
            self._seen[digest] = nth + 1
        return random.Random(f"{self.seed}:{digest}:{nth}")

    def _draw_fault(self, rng: random.Random, model: str) -> str | None:
        if not self.faults or (self.fault_models is not None and model not in self.fault_models):
            return None
        u = rng.random()
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += self.faults.get(kind, 0.0)
            if u < edge:
                return kind
        return None

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


# ---- as a separate process ------------------------------------------------------------------------
class FakeServerProcess:
    """`python -m rlmnb.testing.fake_server` in a child process (its own interpreter and core).

    Takes the command-line knobs as keywords: `FakeServerProcess(latency=0.1, faults={"429": 0.1})`.
    A script must be a path here; a responder a built-in name or import path.
    """

    def __init__(self, **knobs: Any) -> None:
        self.knobs = knobs
        self.host = str(knobs.get("host", "127.0.0.1"))
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self._stderr: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> FakeServerProcess:
        import tempfile

        args = [sys.executable, "-m", "rlmnb.testing.fake_server", *_cli_args(self.knobs)]
        # a file, not a pipe, so a chatty server never blocks; closed in stop()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        assert self.proc.stdout is not None
        import select

        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                return self
            if not line and self.proc.poll() is not None:
                break
        self.proc.poll()
        self._stderr.seek(0)
        err = self._stderr.read()[-2000:]
        self.stop()
        raise RuntimeError(f"the fake server did not start: {line.strip() or err.strip() or 'no output'}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def lm(self, name: str = "fake-sub", **kwargs: Any) -> Any:
        return _lm_for(self.url, name, **kwargs)

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = _http_json("GET", f"{self.base_url}/stats")
        return stats

    def reset(self) -> None:
        _http_json("POST", f"{self.base_url}/reset")

    def __enter__(self) -> FakeServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FakeServerProcess({self.url!r}, {'running' if self.proc else 'stopped'})"


def _lm_for(url: str, name: str, **kwargs: Any) -> Any:
    from ..litellm_lm import LiteLLM

    kwargs.setdefault("api_key", "fake-key")
    return LiteLLM(name if "/" in name else f"openai/{name}", api_base=url, **kwargs)


def _http_json(method: str, url: str) -> Any:
    import urllib.request

    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:  # loopback only
        return json.loads(resp.read())


def _cli_args(knobs: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in knobs.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if key == "faults":
            out += [flag, ",".join(f"{k}={v}" for k, v in dict(value).items())]
        elif key == "fault_models":
            out += [flag, ",".join(value)]
        elif key == "responder" and callable(value):
            raise ValueError("a subprocess server needs the responder as a built-in name or import path")
        elif key == "report_usage":
            out += [] if value else ["--no-usage"]
        else:
            out += [flag, str(value)]
    return out


def _parse_faults(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, rate = part.partition("=")
        out[kind.strip()] = float(rate)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rlmnb.testing.fake_server",
                                     description="A fake OpenAI-compatible chat server on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed as 'PORT <n>')")
    parser.add_argument("--script", help="JSON file: {model: [reply, ...]}")
    parser.add_argument("--responder", default="needle", help="needle, echo or package.module:function")
    parser.add_argument("--latency", default="0", help="seconds, uniform:A,B, exp:MEAN or normal:MEAN,SD")
    parser.add_argument("--faults", default="", help="e.g. 429=0.1,500=0.05,drop=0,timeout=0,malformed=0")
    parser.add_argument("--fault-models", default="", help="comma-separated models the faults apply to")
    parser.add_argument("--retry-after", type=float, default=0.0)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--context-window", type=int, default=None)
    parser.add_argument("--no-usage", action="store_true", help="leave the usage block out of replies")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    latency: float | str = float(ns.latency) if re.fullmatch(r"[\d.]+", ns.latency) else ns.latency
    server = FakeServer(script=ns.script, responder=ns.responder, latency=latency, faults=_parse_faults(ns.faults),
                        fault_models=set(filter(None, ns.fault_models.split(","))) or None,
                        retry_after=ns.retry_after, hang_s=ns.hang_s, api_key=ns.api_key,
                        context_window=ns.context_window, report_usage=not ns.no_usage, seed=ns.seed,
                        host=ns.host, port=ns.port)

    async def serve() -> None:
        await server.start_async()
        print(f"PORT {server.port}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop_async()

    import contextlib
    import signal

    loop = asyncio.new_event_loop()
    task = loop.create_task(serve())
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        loop.run_until_complete(task)
    loop.close()


if __name__ == "__main__":
    main()
