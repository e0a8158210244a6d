"""Where a kernel sandbox's kernels come from: the warm spare it adopted, the pool, or a cold start,
each under the sandbox's confinement (a mixin of KernelSandbox, kept apart from running snippets).

A confined kernel's rules name its transfer directory and broker port, so a spare is launched with a
home of its own (see kernel_process.Home) and the sandbox that takes it adopts that home; a spare is
also launched under the rules for the inputs of the run that made it, so a next run over the same
files (or, after a run without files, a next run without files) finds it warm. A run takes a confined
spare only when the spare's grants are exactly the run's own (`grants`): Landlock can only narrow a
process's rights, so a spare that may read more than the run (an earlier run's private file) is killed
and the run starts cold.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import SandboxError
from rlmnb._sandbox.confinement.policy import Confinement, needs
from rlmnb._sandbox.kernel.environment import sandbox_env
from rlmnb._sandbox.kernel.process import Home, KernelProcess
from rlmnb._sandbox.kernel.warm import pool

if TYPE_CHECKING:
    from rlmnb.inputs import Field


class KernelSupply:
    """Obtaining kernels for a KernelSandbox (whose constructor sets these attributes)."""

    secret_env: tuple[str, ...]
    cwd: str | None
    warm: bool
    confinement: Confinement
    allow_paths: tuple[str, ...]
    allow_network: tuple[str, ...]
    _fields: dict[str, Field]
    _spare: KernelProcess | None
    _launching: KernelProcess | None
    _dir: str | None
    _port: int
    _closed: bool

    def _key(self) -> tuple[Any, ...]:
        return (sys.executable, self.cwd, self.confinement.active, self.allow_paths, self.allow_network)

    def _grants(self) -> dict[str, Any]:
        """What a kernel for this sandbox's inputs is granted beyond every kernel's base rules, in a form
        that compares equal exactly when two kernels may read and reach the same things."""
        paths, ports = needs(list(self._fields.values()))
        return {"input_paths": tuple(sorted(paths)), "input_ports": tuple(sorted(ports)),
                "allow_paths": tuple(self.allow_paths), "allow_network": tuple(self.allow_network)}

    def _fits(self, kernel: KernelProcess) -> bool:
        """Whether a spare may serve this sandbox: unconfined, or confined with exactly this run's grants
        (a spare granted more, e.g. an earlier run's file, must never serve a run that was not given it)."""
        return kernel.policy is None or kernel.grants == self._grants()

    def _covers(self, kernel: KernelProcess) -> bool:
        """Whether the kernel's confinement lets it read and reach every input bound so far."""
        return kernel.policy is None or kernel.policy.covers(*needs(list(self._fields.values())))

    def _confine(self, transfer_dir: str, port: int) -> dict[str, Any] | None:
        """build_policy's arguments for a kernel serving this sandbox's inputs (None: not confined)."""
        if not self.confinement.on:
            return None
        return {"transfer_dir": transfer_dir, "broker_port": port, **self._grants()}

    async def _obtain(self) -> KernelProcess:
        """A ready kernel no run has touched: the warm spare when it fits, else a cold start.

        A spare fits when it was started with no variable this run's scrubbed environment lacks (a
        variable it has cannot be taken back: /proc/self/environ keeps it) and, when confined, when its
        grants are exactly this run's (`_fits`); variables added or changed since are set in the kernel by `configure`.
        A confined sandbox only takes the spare it adopted at its first start (the spare's rules name
        that spare's transfer directory and broker port). A spare that fails to come up is replaced by a
        cold start.
        """
        key = self._key()
        wanted = sandbox_env(self.secret_env)
        kernel, self._spare = self._spare, None
        if kernel is None and self.warm and not self.confinement.on:
            kernel = pool.take(key)
        if kernel is not None:
            try:  # the inputs' grants can fail (an input the kernel cannot reach): the spare is ours to stop
                usable = set(kernel.base_env) <= set(wanted) and self._fits(kernel)
            except BaseException:
                kernel.kill()
                raise
            if not usable:
                await _stop(kernel)
                kernel = None
        if kernel is not None:
            self._launching = kernel
            try:
                await kernel.wait_ready()
            except SandboxError:
                await _stop(kernel)  # a spare that failed to come up is stopped, not dropped
                kernel = None
            except BaseException:  # cancelled while waiting (the run ended): the spare is ours to stop
                kernel.kill()
                raise
            finally:
                self._launching = None
        if kernel is None:
            assert self._dir is not None
            kernel = self._launching = KernelProcess(wanted, self.cwd, confine=self._confine(self._dir, self._port),
                                                     namespaced=self.confinement.namespaced)
            try:
                await kernel.launch(warm=False)
            except BaseException:  # failed or cancelled mid-launch: the process may exist
                kernel.kill()
                raise
            finally:
                self._launching = None
        if self._closed:
            kernel.kill()
            raise SandboxError("the kernel sandbox was closed while its kernel started")
        if self.warm:
            try:
                await pool.refill(key, self._spawner(), _kill_kernel)
            except BaseException:  # cancelled while the spare launched (the run ended): this kernel is ours to stop
                kernel.kill()
                raise
            if self._closed:
                kernel.kill()
                raise SandboxError("the kernel sandbox was closed while its kernel started")
        return kernel

    def _spawner(self) -> Any:
        """Launches a spare for the next sandbox like this one: with its own home, under the same rules
        for the inputs bound now (a next run over the same files finds it warm)."""
        env, cwd, confine = sandbox_env(self.secret_env), self.cwd, self._confine
        namespaced = self.confinement.namespaced

        async def spawn() -> KernelProcess:
            home = Home(unix=namespaced)
            try:
                kernel = KernelProcess(env, cwd, confine=confine(home.dir, home.port), home=home, namespaced=namespaced)
            except BaseException:
                home.discard()
                raise
            try:
                await kernel.spawn(warm=True)
            except BaseException:  # cancelled or failed mid-launch: the process may exist, stop it
                kernel.kill()
                raise
            return kernel

        return spawn


async def _stop(kernel: KernelProcess) -> None:
    """Kill a kernel off the event loop; cancelled meanwhile (the run ended), kill it here before going on."""
    try:
        await asyncio.to_thread(kernel.kill)
    except BaseException:
        kernel.kill()  # idempotent: a kill already under way in the thread returns at once
        raise


def _kill_kernel(kernel: KernelProcess) -> None:
    kernel.kill()


__all__ = ["KernelSupply"]
