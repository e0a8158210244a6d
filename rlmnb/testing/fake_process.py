"""The fake OpenAI-compatible server as a separate process, and its command line.

`FakeServerProcess(latency=0.1, faults={"429": 0.1})` runs `python -m rlmnb.testing.fake_cli`
in a child process (its own interpreter and core), for benchmarks where the server must not share
the client's CPU; `main` is that command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from rlmnb.testing.fake_server import Address, lm_for

__all__ = ["FakeServerProcess"]


class FakeServerProcess(Address):
    """`python -m rlmnb.testing.fake_cli` in a child process (its own interpreter and core).

    Takes the command-line knobs as keywords: `FakeServerProcess(latency=0.1, faults={"429": 0.1})`.
    A script must be a path here; a responder a built-in name or import path.
    """

    def __init__(self, **knobs: Any) -> None:
        self.knobs = knobs
        self.host = str(knobs.get("host", "127.0.0.1"))
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self._stderr: Any = None

    def start(self, timeout: float = 30.0) -> FakeServerProcess:
        import tempfile

        args = [sys.executable, "-m", "rlmnb.testing.fake_cli", *_cli_args(self.knobs)]
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
