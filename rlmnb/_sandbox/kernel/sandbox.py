"""The kernel sandbox: every run's code in its own IPython kernel process (this module: running snippets
and handling faults; the process itself is process.py).

Model code we did not read runs in a separate ipykernel process driven by jupyter_client, so an
infinite loop, a memory blow-up or `os._exit` can never take down the user's kernel:

- start: a warm spare kernel (see warm.py) when one matches, else a cold start; either way
  a kernel no earlier run touched. `--continue` (a kept Session) gets the same kernel back.
- inputs cross as files in a private directory in /dev/shm (see transfer.py), never as code, and are
  shipped once per sandbox; the directory is removed on close, at exit, and by the next process
  after a crash.
- sub-calls reach the host through the broker (see bridge.py: a Unix socket for a namespaced kernel,
  loopback TCP otherwise); budget, trajectory and widget stay on the host.
- limits: a snippet over its timeout is interrupted (SIGINT); if the kernel is not idle within
  `grace` seconds it is replaced, inputs are bound again and the model is told its variables were
  lost. A dead kernel is noticed within `POLL_S` and replaced the same way. `memory_limit` caps the
  kernel's data memory (RLIMIT_DATA), so a blow-up ends in MemoryError, or at worst a restart.
- isolation: an allow-listed environment (see environment.py), a working directory of its own, its
  own process session (forks are killed with it), its output captured in the kernel and never
  published to the user's notebook.
- confinement (Linux, docs/sandbox.md): its own namespaces where the system has them
  (confinement/namespaces.py: it sees Python, rlmnb and its inputs read-only and a capped scratch, has no
  network but its broker's socket, sees no other process), with Landlock and seccomp inside
  (launch.py, landlock.py, seccomp.py), or those alone where it has none; its tasks capped
  (confinement/tasks.py); kernels are obtained in supply.py. The host reads what the kernel writes only
  through folder descriptors without following links (transfer.py). A refused access reaches the model as
  its error plus a note that the sandbox is confined.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._ground.config import parse_size
from rlmnb._ground.errors import InputError, SandboxError
from rlmnb._ground.prompts import render
from rlmnb._sandbox.base import ExecResult, SandboxHost
from rlmnb._sandbox.bridge import Broker
from rlmnb._sandbox.confinement.namespaces import OUTBOX
from rlmnb._sandbox.confinement.policy import Confinement, resolve
from rlmnb._sandbox.kernel.environment import sandbox_env
from rlmnb._sandbox.kernel.process import (  # noqa: F401 - LOG_CAP and LOG_TAIL are read from here by tests
    DEAD,
    GRACE_S,
    LOG_CAP,
    LOG_TAIL,
    REPLY_EXPR,
    TIMEOUT,
    Home,
    KernelProcess,
    describe_failure,
    reply_payload,
)
from rlmnb._sandbox.kernel.supply import KernelSupply
from rlmnb._sandbox.kernel.warm import pool
from rlmnb._sandbox.runner import BoundedBuffer
from rlmnb._sandbox.transfer import Shipper

if TYPE_CHECKING:
    from rlmnb.inputs import Field


# ---- the sandbox --------------------------------------------------------------------------------------------
class KernelSandbox(KernelSupply):
    """The Sandbox protocol over a separate kernel process (see the module docstring).

    Args:
        max_output_chars: characters of stdout (and of stderr) kept per snippet, head and tail; 10,000.
        memory_limit: cap on the kernel's data memory, in bytes or a string such as "2GB"; None for none.
        secret_env: more environment variable names kept out of the kernel (beyond the name patterns).
        cwd: the kernel's working directory; default a fresh temp dir, removed on close.
        warm: take and refill the warm spare kernel (default True).
        grace: seconds an interrupted snippet has to stop before the kernel is replaced (2.0).
        confinement: "auto" (confine as far as the system can, recording every run what is not enforced),
            "required" (a ConfigError unless every guard holds) or "off"; see confinement.py.
        allow_paths: more paths the kernel may read ("/data", "/data:ro") or read and write ("/out:rw").
        allow_network: more "host:port" addresses the kernel may connect to (TCP).
        namespaces: put the kernel in its own namespaces where the system can (default True); False keeps
            Landlock and seccomp alone, as on a system without user namespaces (for measurements, and as
            a way out should the namespaces break a library).
    """

    kind = "kernel"

    def __init__(self, *, max_output_chars: int = 10_000, memory_limit: int | str | None = None,
                 secret_env: Sequence[str] = (), cwd: str | os.PathLike[str] | None = None, warm: bool = True,
                 grace: float = GRACE_S, confinement: str = "auto", allow_paths: Sequence[str] = (),
                 allow_network: Sequence[str] = (), namespaces: bool = True) -> None:
        self.max_output_chars = max_output_chars
        self.memory_limit = parse_size(memory_limit, "memory_limit")
        self.secret_env = tuple(secret_env)
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.warm = warm
        self.grace = grace
        self.restarts = 0
        self.confinement: Confinement = resolve(confinement, allow_paths, allow_network, namespaces=namespaces)
        self.allow_paths, self.allow_network = tuple(allow_paths), tuple(allow_network)
        self._spare: KernelProcess | None = None
        self._port = 0
        self._notice: str | None = None
        self._host: SandboxHost | None = None
        self._fields: dict[str, Field] = {}
        self._specs: dict[str, dict[str, Any]] = {}
        self._kernel: KernelProcess | None = None
        self._kernel_task: asyncio.Task[KernelProcess] | None = None
        self._configured = False
        self._dir: str | None = None
        self._shipper: Shipper | None = None
        self._broker: Broker | None = None
        self._closed = False
        self._launching: KernelProcess | None = None
        self._steps = 0

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def start(self, host: SandboxHost) -> None:
        """Attach to a run. The first start obtains a kernel (in the background: bind ships inputs meanwhile)."""
        if self._closed:
            raise SandboxError("this kernel sandbox is closed; start a new run")
        if self._dir is None:
            _open.add(self)
            spare = pool.take(self._key()) if self.warm else None
            home = (spare.home if spare is not None and spare.home is not None
                    else Home(unix=self.confinement.namespaced))
            if spare is not None:
                spare.home, self._spare = None, spare  # launched for this home: it is ours now
            self._dir, self._port = home.dir, home.port
            self._shipper = Shipper(self._dir)
            self._broker = Broker(self._dir, home.listener)
        self._host = host
        assert self._broker is not None
        await self._broker.attach(host)
        self._configured = False

    async def bind(self, fields: Sequence[Field]) -> None:
        """Ship new inputs as files (unless already shipped) and bind them in the kernel."""
        fields = list(fields)
        for f in fields:
            self._fields[f.name] = f
        widened = self._kernel is not None and not self._covers(self._kernel)
        if self._kernel_task is None and (self._kernel is None or widened):
            self._kernel_task = asyncio.get_running_loop().create_task(self._obtain())
        specs = await asyncio.to_thread(self._ship, fields) if fields else []
        if widened and self._kernel is not None:  # a new input outside what the confined kernel may reach
            old, self._kernel = self._kernel, None
            await asyncio.to_thread(old.kill)
            self.restarts += 1
            self._configured = False
            self._notice = render("kernel_widened", names=", ".join(repr(f.name) for f in fields))
            specs = list(self._specs.values())
        await self._ready()
        if specs:
            await self._bind_specs(specs)

    async def restart(self) -> None:
        """A fresh kernel with the same inputs; variables are lost."""
        await self._ready()
        await self._replace()

    async def close(self) -> None:
        """Stop the kernel and every process it started; remove every file. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        task, self._kernel_task = self._kernel_task, None
        if task is not None and not task.done():
            if task.get_loop() is asyncio.get_running_loop():
                task.cancel()
                with contextlib.suppress(BaseException):
                    # a kernel the task still returned (it finished before the cancel landed) is stopped below
                    self._kernel = self._kernel or await task
            elif not task.get_loop().is_closed():
                task.get_loop().call_soon_threadsafe(task.cancel)
        elif task is not None and not task.cancelled() and task.exception() is None:
            self._kernel = self._kernel or task.result()
        if self._broker is not None:
            await self._broker.close()
        self._close_now()

    def _close_now(self) -> None:
        """The synchronous part of closing (also run at interpreter exit)."""
        self._closed = True
        for kernel in (self._kernel, self._launching, self._spare):
            if kernel is not None:
                kernel.kill()
        self._kernel = self._launching = self._spare = None
        if self._broker is not None:
            self._broker.release()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        _open.discard(self)

    async def variables(self) -> list[str]:
        kernel = await self._ready()
        return list(await kernel.call("__rlmnb__.variables()"))

    # ---- running ----------------------------------------------------------------------------------------
    async def execute(self, code: str, timeout: float, *, turn: int = 0) -> ExecResult:
        kernel = await self._ready()
        earlier, self._notice = self._notice, None
        if not kernel.alive():
            earlier = _join(earlier, render("kernel_died_idle", cause=kernel.cause()))
            kernel = await self._replace()
        assert self._broker is not None
        started = time.perf_counter()
        self._steps += 1
        step = self._steps
        msg_id = kernel.send(f"__rlmnb__.run({turn!r}, {step!r}, {code!r})", REPLY_EXPR)
        timed_out = False
        try:
            content = await kernel.wait(msg_id, started + timeout)
            if content == TIMEOUT:
                timed_out = True
                self._broker.drop_step(step)
                kernel.interrupt()
                content = await kernel.wait(msg_id, time.perf_counter() + self.grace)
        except asyncio.CancelledError:  # the user's interrupt: stop the snippet too
            self._broker.drop_step(step)
            kernel.interrupt()
            raise
        duration = time.perf_counter() - started
        kernel.trim_log()
        if content == DEAD:
            self._broker.drop_step(step)
            cause = kernel.cause()
            out, err = kernel.mirrored_output(self._outbox(kernel))
            await self._replace()
            return ExecResult(stdout=out, stderr=err, error=f"KernelDied: the sandbox kernel process died ({cause})",
                              error_type="KernelDied", duration_s=duration, timed_out=timed_out, restarted=True,
                              notice=_join(earlier, render("kernel_died", cause=cause)))
        if content == TIMEOUT:
            out, err = kernel.mirrored_output(self._outbox(kernel))
            await self._replace()
            return ExecResult(stdout=out, stderr=err, duration_s=duration, timed_out=True, restarted=True,
                              notice=_join(earlier, render("kernel_stuck")))
        data = reply_payload(content)
        if data is None:  # an interrupt landed outside the snippet: the outcome is still kept in the kernel
            data = await self._fetch_outcome(kernel)
        if data is None:  # model code took the kernel side apart (e.g. through get_ipython())
            await self._replace()
            return ExecResult(error=f"SandboxBroken: {describe_failure(content)}", error_type="SandboxBroken",
                              duration_s=duration, timed_out=timed_out, restarted=True,
                              notice=_join(earlier, render("kernel_broken")))
        if self.confinement.on and _refused(data):
            earlier = _join(earlier, render("access_refused", allowed=self._allowed()))
        return _exec_result(data, timed_out, duration, earlier, self.max_output_chars)

    def _allowed(self) -> str:
        """What the confined kernel may reach beyond its inputs, for the model."""
        extra = [*(f"path {p}" for p in self.confinement.allow_paths),
                 *(f"network {n}" for n in self.confinement.allow_network)]
        return "; also " + ", ".join(extra) if extra else ""

    async def _fetch_outcome(self, kernel: KernelProcess) -> dict[str, Any] | None:
        content = await kernel.wait(kernel.send("pass", REPLY_EXPR), time.perf_counter() + max(self.grace, 1.0))
        data = reply_payload(content)
        return data if isinstance(data, dict) else None

    # ---- internals -------------------------------------------------------------------------------------------
    async def _ready(self) -> KernelProcess:
        """The current kernel, connected on this loop and configured for the attached run."""
        if self._closed:
            raise SandboxError("this kernel sandbox is closed")
        if self._kernel is None:
            if self._dir is None:
                raise SandboxError("the kernel sandbox was not started")
            task = self._kernel_task or asyncio.get_running_loop().create_task(self._obtain())
            try:
                self._kernel = await task
            finally:
                self._kernel_task = None
        kernel = self._kernel
        if kernel.loop is not asyncio.get_running_loop():
            kernel.connect()
        if not self._configured:
            await self._configure(kernel)
        return kernel

    def _outbox(self, kernel: KernelProcess) -> str | int | None:
        """Where this kernel writes what the host reads (values, images, output mirrors), as the host
        reaches it: a namespaced kernel's outbox descriptor, else the transfer directory."""
        return kernel.outbox_fd if kernel.namespaced else self._dir

    async def _configure(self, kernel: KernelProcess) -> None:
        assert self._broker is not None and self._host is not None and self._dir is not None
        tools = {name: (getattr(fn, "__doc__", None) or "") for name, fn in self._host.tools.items()}
        wanted = sandbox_env(self.secret_env)
        env = {k: v for k, v in wanted.items() if kernel.base_env.get(k) != v}
        outbox = self._outbox(kernel)
        if outbox is None:
            raise SandboxError("the sandbox kernel's outbox could not be opened")
        self._broker.outbox = outbox
        kernel_outbox = OUTBOX if kernel.namespaced else self._dir  # the same folder, as the kernel sees it
        bridge = {**self._broker.settings(), "transfer_dir": kernel_outbox, "inbox": self._dir}
        settings = {"bridge": bridge, "max_output_chars": self.max_output_chars,
                    "mirror_dir": kernel_outbox, "tools": tools, "memory_limit": self.memory_limit, "env": env}
        try:
            await kernel.call(f"__rlmnb__.configure({settings!r})")
            kernel.base_env.update(env)
        except SandboxError as exc:
            if "memory_limit" in str(exc):
                raise SandboxError(f"{exc}. Raise memory_limit, or pass None for no cap.") from None
            raise
        self._configured = True

    def _ship(self, fields: list[Field]) -> list[dict[str, Any]]:
        assert self._shipper is not None
        specs = []
        for f in fields:
            try:
                spec = self._shipper.spec(f)
            except InputError:
                raise  # already one sentence naming the input and what to do
            except Exception as exc:
                raise SandboxError(f"input {f.name!r} could not be written for the kernel sandbox: "
                                   f"{type(exc).__name__}: {exc}") from exc
            self._specs[f.name] = spec
            specs.append(spec)
        return specs

    async def _bind_specs(self, specs: list[dict[str, Any]]) -> None:
        """Bind the inputs' specs in the kernel. The specs are small JSON the host made; they travel in the
        request itself as a JSON string literal (no file the kernel could swap for a link)."""
        kernel = await self._ready()
        await kernel.call(f"__rlmnb__.bind({json.dumps(specs)!r})")

    async def _replace(self) -> KernelProcess:
        """Swap in a fresh kernel (the old one is killed with its processes) and bind the inputs again."""
        old, self._kernel = self._kernel, None
        if old is not None:
            await asyncio.to_thread(old.kill)
        self.restarts += 1
        self._kernel = await self._obtain()
        self._configured = False
        kernel = await self._ready()
        if self._specs:
            await self._bind_specs(list(self._specs.values()))
        return kernel

    @property
    def kernel_pid(self) -> int | None:
        """The current kernel's process id (None before it started)."""
        return self._kernel.pid if self._kernel is not None else None

    @property
    def transfer_dir(self) -> str | None:
        return self._dir

    @property
    def bytes_shipped(self) -> int:
        return self._shipper.bytes_written if self._shipper is not None else 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._kernel is not None else "starting")
        return f"KernelSandbox({state}, inputs={len(self._fields)}, restarts={self.restarts})"


# what a refused access looks like from inside: Landlock and seccomp say EPERM/EACCES; in its own namespaces
# what is out of reach does not exist (ENOENT, ESRCH, ENETUNREACH)
_REFUSALS = ("PermissionError", "ConnectionRefusedError", "FileNotFoundError", "ProcessLookupError")


def _refused(data: dict[str, Any]) -> bool:
    """Whether a snippet's error is an access the sandbox's confinement refused."""
    kind = data.get("error_type")
    text = str(data.get("error") or "")
    return kind in _REFUSALS or (kind == "OSError" and any(
        why in text for why in ("unreachable", "Read-only file system", "No space left on device")))


def _exec_result(data: dict[str, Any], timed_out: bool, duration: float, earlier: str | None,
                 limit: int) -> ExecResult:
    error, error_type = data.get("error"), data.get("error_type")
    interrupted = bool(data.get("interrupted"))
    if (timed_out or interrupted) and error_type == "KeyboardInterrupt":
        error = error_type = None  # our own interrupt, reported as the timeout
    submitted = bool(data.get("submitted"))
    return ExecResult(
        stdout=_bounded(data.get("stdout"), limit), stderr=_bounded(data.get("stderr"), limit), error=error,
        error_type=error_type, submitted=submitted, answer=data.get("answer") if submitted else None,
        submit_error=data.get("submit_error"), submit_during_exception=data.get("submit_during_exception"),
        duration_s=duration, timed_out=timed_out or interrupted, notice=earlier,
        tables=[t for t in data.get("tables") or [] if isinstance(t, dict)])


def _bounded(value: Any, limit: int) -> str:
    """The kernel side already keeps head and tail; this only guards against a kernel that did not."""
    text = str(value or "")
    if len(text) <= 2 * limit + 1000:
        return text
    buffer = BoundedBuffer(limit)
    buffer.write(text)
    return buffer.getvalue()


def _join(*parts: str | None) -> str | None:
    text = " ".join(p for p in parts if p)
    return text or None


# ---- exit ---------------------------------------------------------------------------------------------------
_open: weakref.WeakSet[KernelSandbox] = weakref.WeakSet()


def _close_all() -> None:
    """At interpreter exit: stop every sandbox still open (kept sessions, interrupted starts)."""
    for sandbox in list(_open):
        with contextlib.suppress(Exception):
            sandbox._close_now()


atexit.register(_close_all)

__all__ = ["KernelProcess", "KernelSandbox"]
