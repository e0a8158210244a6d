"""Helpers and fixtures shared by the sandbox tests (not a test module; conftest.py loads it as a plugin).

`kind` runs a test in both sandboxes (the kernel one as an integration test) and checks that the
kernel left nothing behind; a module that starts kernels marks itself
`pytestmark = pytest.mark.usefixtures("stop_the_spare")` so the warm spare is stopped when it ends.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psutil
import pytest

from rlmnb._sandbox.kernel.warm import pool
from rlmnb._sandbox.transfer import transfer_root
from rlmnb.testing import ScriptedLM

KINDS = ["local", pytest.param("kernel", marks=pytest.mark.integration)]
# how a refused access looks from inside a confined kernel: Landlock and seccomp say EPERM/EACCES; in its own
# namespaces what is out of reach does not exist (ENOENT, ESRCH), or is read-only or unreachable (OSError)
REFUSED = frozenset({"PermissionError", "FileNotFoundError", "ProcessLookupError", "ConnectionRefusedError", "OSError"})


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """The sandbox kind a test runs in; a kernel must leave no process or file behind."""
    yield request.param
    if request.param == "kernel":
        assert leftovers() == {}


@pytest.fixture(scope="module")
def stop_the_spare() -> Iterator[None]:
    """Stop the warm spare kernel when the module ends (the next module starts from a fresh pool)."""
    yield
    pool.shutdown(reopen=True)


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def observations(lm: ScriptedLM) -> list[str]:
    """The observation texts the root model was shown, in order (the last request's user turns)."""
    last = lm.requests[-1]
    return [m["content"] for m in last[2:] if m["role"] == "user"]


class EchoHost:
    """A SandboxHost without models: llm_query upper-cases its prompt."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tools: Mapping[str, Any] | None = None) -> None:
        self.loop = loop
        self.tools = dict(tools or {})
        self.prompts: list[str] = []

    async def llm_query(self, prompt: str, model: str | None = None) -> str:
        self.prompts.append(prompt)
        await asyncio.sleep(0)
        return prompt.upper()

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None) -> list[str]:
        return [await self.llm_query(p) for p in prompts]

    async def rlm_query(self, prompt: str, inputs: Mapping[str, Any] | None = None) -> Any:
        return {"prompt": prompt, "inputs": sorted(inputs or {})}

    async def rlm_query_batched(self, prompts: Sequence[str], inputs_list: Any = None) -> list[Any]:
        return [await self.rlm_query(p) for p in prompts]


def _spare_paths() -> tuple[set[int], set[str]]:
    spare = pool.spare()
    if spare is None:
        return set(), set()
    home = getattr(spare, "home", None)
    dirs = {spare.runtime_dir, spare.cwd} | ({home.dir} if home is not None else set())
    return {spare.pid} if spare.pid else set(), dirs


def leftovers(wait: float = 30.0) -> dict[str, list[Any]]:
    """Sandbox processes, transfer directories and kernel temp dirs still around (the warm spare excepted),
    after waiting up to `wait` seconds for them to go (a loaded machine stops a kernel tree slowly; a leak
    never goes)."""
    pool.wait_idle(60)
    gc.collect()  # a kernel object dropped without kill() is stopped when it is collected (process._reap)
    deadline = time.monotonic() + wait
    while True:
        spare_pids, spare_dirs = _spare_paths()
        procs = [p for p in psutil.Process().children(recursive=True)
                 if p.pid not in spare_pids and not _is_spare_child(p, spare_pids) and _alive(p)]
        shm = [n for n in _listdir(transfer_root()) if re.match(rf"^rlmnb-{os.getpid()}-[0-9a-f]+$", n)
               and os.path.join(transfer_root(), n) not in spare_dirs]
        mine = tuple(f"rlmnb-{kind}-{os.getpid()}-" for kind in ("kernel", "cwd"))
        tmp = [os.path.join(tempfile.gettempdir(), n) for n in _listdir(tempfile.gettempdir()) if n.startswith(mine)]
        tmp = [p for p in tmp if p not in spare_dirs]
        found = {"processes": [f"{p.pid} {_cmd(p)}" for p in procs], "transfer_dirs": shm, "temp_dirs": tmp}
        if not any(found.values()) or time.monotonic() > deadline:
            return {k: v for k, v in found.items() if v}
        time.sleep(0.05)


def _is_spare_child(p: psutil.Process, spare_pids: set[int]) -> bool:
    try:
        return any(parent.pid in spare_pids for parent in p.parents())
    except psutil.Error:
        return False


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:120]
    except psutil.Error:
        return "?"


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


async def run_bound(kind: str, values: Mapping[str, Any], body: str, timeout: float = 120) -> tuple[str, int]:
    """What `body` prints in a fresh sandbox of `kind` with `values` bound as inputs, and how many data
    bytes were shipped to it (the kernel sandbox's transfer files; 0 for the local sandbox)."""
    from rlmnb._ground.config import RLMConfig
    from rlmnb._sandbox import create_sandbox
    from rlmnb.inputs import bind_inputs

    fields, _ = bind_inputs(values, RLMConfig())
    sandbox = create_sandbox(kind)
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind(fields)
        result = await sandbox.execute(body, timeout)
        assert result.error is None, result.error
        shipper = getattr(sandbox, "_shipper", None)
        return result.stdout, shipper.bytes_written if shipper is not None else 0
    finally:
        await sandbox.close()
