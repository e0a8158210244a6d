"""The fake OpenAI-compatible server as a separate process, and its command line.

`FakeServerProcess(latency=0.1, faults={"429": 0.1})` runs `python -m rlmnb.testing.fake_server`
in a child process (its own interpreter and core), for benchmarks where the server must not share
the client's CPU; `main` is that command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any


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
        return lm_for(self.url, name, **kwargs)

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


def lm_for(url: str, name: str, **kwargs: Any) -> Any:
    """A `LiteLLM` for `name` on a fake server at `url` (provider "openai/", a dummy key)."""
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
    from .fake_server import FakeServer

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
