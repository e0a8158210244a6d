"""The warm spare kernel does its one-time work while it waits, confined or not, so the run that takes it
pays none of it: imports (the input families too), a full collection then gc.freeze(), a first formatted
reply, and (confined) the seal; then it says it is warm."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import EchoHost, leftovers

from rlmnb._ground.errors import SandboxError
from rlmnb._sandbox.confinement import policy as confinement
from rlmnb._sandbox.kernel.environment import sandbox_env
from rlmnb._sandbox.kernel.process import KernelProcess
from rlmnb._sandbox.kernel.sandbox import KernelSandbox
from rlmnb._sandbox.kernel.warm import WarmPool, pool

pytestmark = pytest.mark.integration

MODES = ["off", pytest.param("auto", marks=pytest.mark.skipif(confinement.support()[1] != "",
                                                             reason="no Landlock ABI 4 + seccomp here"))]
PROBE = ("import gc, sys\n"
         "print(gc.get_freeze_count() > 10_000, 'rlmnb.inputs._families.relations' in sys.modules, "
         "'rlmnb._sandbox.confinement.seccomp' in sys.modules)")


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    yield
    pool.shutdown(reopen=True)
    assert leftovers() == {}


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_takes_a_spare_that_did_its_one_time_work_while_waiting(mode: str) -> None:
    first = KernelSandbox(confinement=mode)
    await first.start(EchoHost(asyncio.get_running_loop()))
    await first.bind([])
    await first.close()
    assert pool.wait_idle(60) and pool.has_spare
    spare = pool.spare()
    await spare.wait_ready()  # answers only once its start-up code has run
    assert spare.warmed()
    second = KernelSandbox(confinement=mode)
    try:
        await second.start(EchoHost(asyncio.get_running_loop()))
        await second.bind([])
        assert second.kernel_pid == spare.pid
        result = await second.execute(PROBE, 30)
        assert result.ok, result
        sealed = mode != "off"
        assert result.stdout == f"True True {sealed}\n"
    finally:
        await second.close()


async def test_a_cold_kernel_does_not_claim_to_be_warm() -> None:
    sandbox = KernelSandbox(confinement="off", warm=False)
    try:
        await sandbox.start(EchoHost(asyncio.get_running_loop()))
        await sandbox.bind([])
        assert sandbox._kernel is not None and not sandbox._kernel.warmed()
        result = await sandbox.execute(PROBE, 30)
        assert result.stdout.startswith("False False")
    finally:
        await sandbox.close()


async def test_a_cancelled_refill_reaches_its_caller_and_keeps_no_spare() -> None:
    spares = WarmPool()
    started = asyncio.Event()

    async def spawn() -> Any:
        started.set()
        await asyncio.Event().wait()  # a launch still going when the run that started it ends

    task = asyncio.ensure_future(spares.refill("key", spawn, lambda kernel: None))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not spares.has_spare and spares.wait_idle(0)


async def test_a_sandbox_closed_while_its_spare_launches_stops_its_own_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    launching = asyncio.Event()
    refill = pool.refill

    async def slow_spawn() -> Any:
        launching.set()
        await asyncio.Event().wait()

    async def refill_slowly(key: Any, spawn: Any, kill: Any) -> None:
        await refill(key, slow_spawn, kill)

    monkeypatch.setattr(pool, "refill", refill_slowly)
    sandbox = KernelSandbox(confinement="off")
    await sandbox.start(EchoHost(asyncio.get_running_loop()))
    binding = asyncio.ensure_future(sandbox.bind([]))
    await asyncio.wait_for(launching.wait(), 60)  # the run's own kernel is up; the spare is launching
    await sandbox.close()
    binding.cancel()
    with contextlib.suppress(BaseException):
        await binding
    # no_leftovers: the run's kernel was stopped, not left running behind a swallowed cancellation


async def test_a_kernel_killed_from_another_thread_as_it_launches_is_not_left_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_client.provisioning.local_provisioner import LocalProvisioner

    kernel = KernelProcess(sandbox_env(()), None)
    launch = LocalProvisioner.launch_kernel

    async def killed_meanwhile(self: Any, cmd: list[str], **kw: Any) -> Any:
        info = await launch(self, cmd, **kw)
        process, self.process = self.process, None
        kernel.kill()  # another thread's kill, landing while the new process is not yet visible to it
        self.process = process
        return info

    monkeypatch.setattr(LocalProvisioner, "launch_kernel", killed_meanwhile)
    with pytest.raises(SandboxError, match="stopped while it started"):
        await kernel.spawn(warm=False)
    # no_leftovers: the process launched behind the kill's back was stopped too


async def test_a_kernel_object_dropped_without_kill_is_stopped_when_collected() -> None:
    import gc

    import psutil

    kernel = KernelProcess(sandbox_env(()), None)
    await kernel.spawn(warm=False)
    process = psutil.Process(kernel.pid)
    runtime_dir = kernel.runtime_dir
    del kernel  # e.g. a spare taken by a run that failed before it could stop it: nobody can reach it now
    gc.collect()
    assert process.wait(timeout=30) is not None or not process.is_running()
    assert not Path(runtime_dir).exists()
    # no_leftovers: nothing else either
