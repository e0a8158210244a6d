"""Which HTTP client for the direct lane: aiohttp or httpx, same requests, same server, same run.

A bare `asyncio.gather` under a semaphore of 64 posts ~2 KB chat bodies to the fake server (in its
own process) with one pooled client: N calls at 0 ms (calls/s and client CPU per call) and M calls at
100 ms (wall against the ideal ceil(M/64) x 0.1 s). httpx gets generous pool limits
(max_connections=100, max_keepalive_connections=100) so the pool is not what is measured.
Run: `.venv/bin/python bench/http_clients.py [--calls 3000] [--slow-calls 640]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time
from collections.abc import Awaitable, Callable

BODY = {"model": "fake-sub", "messages": [{"role": "user", "content": "lorem ipsum " * 170 + "magic number is 1"}]}


async def _gather(post: Callable[[bytes], Awaitable[bytes]], n: int, concurrency: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(concurrency)
    data = json.dumps(BODY).encode()

    async def one() -> None:
        async with gate:
            json.loads(await post(data))

    await asyncio.gather(*(one() for _ in range(64)))  # warm the pool
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - t0, time.process_time() - c0


async def with_aiohttp(url: str, n: int, concurrency: int) -> tuple[float, float]:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def post(data: bytes) -> bytes:
            async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as r:
                return await r.read()

        return await _gather(post, n, concurrency)


async def with_httpx(url: str, n: int, concurrency: int) -> tuple[float, float]:
    import httpx

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def post(data: bytes) -> bytes:
            r = await client.post(url, content=data, headers={"Content-Type": "application/json"})
            return r.content

        return await _gather(post, n, concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--slow-calls", type=int, default=640)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    from rlmnb.testing.fake_process import FakeServerProcess

    fast = FakeServerProcess(latency=0).start()
    slow = FakeServerProcess(latency=0.1).start()
    rows: list[tuple[str, int, int, float, float]] = []
    try:
        for name, fn in (("aiohttp", with_aiohttp), ("httpx", with_httpx)):
            for latency, server, n in ((0, fast, args.calls), (100, slow, args.slow_calls)):
                wall, cpu = asyncio.run(fn(f"{server.url}/chat/completions", n, args.concurrency))
                rows.append((name, latency, n, wall, cpu))
    finally:
        fast.stop()
        slow.stop()
    ideal = math.ceil(args.slow_calls / args.concurrency) * 0.1
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {args.concurrency} in flight; "
          f"fake server in its own process; ideal at 100 ms: {ideal:.1f} s")
    print(f"{'client':<9}{'server':>8}{'calls':>7}{'wall s':>8}{'calls/s':>9}{'CPU ms/call':>13}{'x ideal':>9}")
    for name, latency, n, wall, cpu in rows:
        x_ideal = f"{wall / ideal:>9.2f}" if latency else f"{'':>9}"
        print(f"{name:<9}{latency:>6}ms{n:>7}{wall:>8.2f}{n / wall:>9.0f}{1000 * cpu / n:>13.3f}{x_ideal}")


if __name__ == "__main__":
    main()
