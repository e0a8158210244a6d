"""The fake OpenAI-compatible server as a command: `python -m rlmnb.testing.fake_cli --port 0`.

It prints `PORT <n>` once it listens, then serves until SIGTERM or SIGINT. `FakeServerProcess`
(fake_process.py) starts it in a child process, so load and fault tests get their own interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from rlmnb.testing.fake_server import FakeServer

__all__ = ["main"]


def _parse_faults(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, rate = part.partition("=")
        out[kind.strip()] = float(rate)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rlmnb.testing.fake_cli",
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
