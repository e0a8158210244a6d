"""The warm spare kernel does its one-time work while it waits, confined or not, so the run that takes it
pays none of it: imports (the input families too), a full collection then gc.freeze(), a first formatted
reply, and (confined) the seal; then it says it is warm."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sandbox_support import EchoHost, leftovers

from rlmnb._sandbox.confinement import policy as confinement
from rlmnb._sandbox.kernel.sandbox import KernelSandbox
from rlmnb._sandbox.kernel.warm import pool

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
