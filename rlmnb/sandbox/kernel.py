"""The kernel sandbox: every run's code in its own IPython kernel process.

Model code we did not read runs in a separate ipykernel process driven by jupyter_client, so an
infinite loop, a memory blow-up or `os._exit` can never take down the user's kernel:

- start: a warm spare kernel (see warm.py) when one matches, else a cold start (~0.5-1 s); either way
  a kernel no earlier run touched. `--continue` (a kept Session) gets the same kernel back.
- inputs cross as files in a private directory in /dev/shm (see transfer.py), never as code, and are
  shipped once per sandbox; the directory is removed on close, at exit, and by the next process
  after a crash.
- sub-calls reach the host through the loopback broker (see bridge.py); budget, trajectory and
  widget stay on the host.
- limits: a snippet over its timeout is interrupted (SIGINT); if the kernel is not idle within
  `grace` seconds it is replaced, inputs are bound again and the model is told its variables were
  lost. A dead kernel is noticed within `POLL_S` and replaced the same way. `memory_limit` caps the
  kernel's data memory (RLIMIT_DATA), so a blow-up ends in MemoryError, or at worst a restart.
- isolation: a scrubbed environment (see environment.py), a fresh temp working directory, its own
  process session (forks are killed with it), its output captured in the kernel and never
  published to the user's notebook.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import parse_size
from ..errors import InputError, SandboxError
from ..prompts import render
from .base import ExecResult, SandboxHost
from .bridge import MIME, Broker
from .environment import scrubbed_env
from .runner import BoundedBuffer
from .transfer import Shipper, make_transfer_dir, private_temp_dir
from .warm import pool

if TYPE_CHECKING:
    from ..inputs import Field

POLL_S = 0.2            # how often a wait checks that the kernel process is alive
LOG_CAP = 4 * 2**20     # the kernel's fd-2 log (raw writes by model code) is cut back to its tail above this
LOG_TAIL = 64 * 2**10
GRACE_S = 2.0           # after an interrupt, how long the kernel has to become idle before it is replaced
START_TIMEOUT_S = 60.0  # a kernel that is not ready by then is a SandboxError
CALL_TIMEOUT_S = 600.0  # configure / bind / variables
MAX_REPLY_BYTES = 512 << 20  # ZMQ refuses larger messages from the kernel: the host's memory is not its to fill
MARKER_VAR = "RLMNB_SANDBOX_KERNEL"
_REPLY = {"r": "__rlmnb__.reply()"}
_KERNEL_ARGS = ("--HistoryManager.enabled=False", "--InteractiveShellApp.exec_PYTHONSTARTUP=False",
                "--Application.log_level=ERROR")
_TIMEOUT, _DEAD = "timeout", "dead"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_STARTUP = ("import sys as _s; _s.path.insert(0, {root!r}) if {root!r} not in _s.path else None; "
            "import rlmnb.sandbox.kernel_side as __rlmnb__; del _s")
_BOOT = ("import sys as _s\n"
         "if {root!r} not in _s.path:\n"
         "    _s.path.insert(0, {root!r})\n"
         "import rlmnb.sandbox.kernel_side as __rlmnb__\n"
         "del _s\n")


# ---- one kernel process ----------------------------------------------------------------------------------
class KernelProcess:
    """One ipykernel subprocess: its manager, process group, private directories and its client.

    The client (shell channel only: results come back in the execute reply, output is captured in the
    kernel) belongs to one event loop; `connect()` makes a new one when the loop changes.
    """

    def __init__(self, env: dict[str, str], cwd: str | None) -> None:
        self.runtime_dir = private_temp_dir("kernel")
        self.log_path = os.path.join(self.runtime_dir, "kernel.log")  # the kernel's fd 1 and 2 (see trim_log)
        self.own_cwd = cwd is None
        self.cwd = cwd if cwd is not None else private_temp_dir("cwd")
        self.marker = secrets.token_hex(8)
        self.base_env = dict(env)  # the scrubbed environment it started with (and updates pushed since)
        self.env = {**env, MARKER_VAR: self.marker, "PWD": self.cwd, "IPYTHONDIR": _ipython_dir()}
        self.km: Any = None
        self.client: Any = None
        self.context: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid: int | None = None
        self.ready = False
        self.killed = False
        self._lock = threading.Lock()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def spawn(self, *, warm: bool) -> None:
        """Launch the process (tens of ms). It loads rlmnb's kernel side at start-up, and with `warm`
        pandas and pyarrow too, before it answers anything: nothing of ours waits meanwhile."""
        from jupyter_client.kernelspec import KernelSpec
        from jupyter_client.manager import AsyncKernelManager

        _live.add(self)
        startup = _STARTUP.format(root=_PACKAGE_ROOT) + ("; __rlmnb__.warm_up()" if warm else "")
        import zmq
        import zmq.asyncio

        # our own context with LINGER 0: a message still queued for a dead kernel can never make
        # closing (or garbage-collecting) the context block forever
        km_context = zmq.asyncio.Context()
        km_context.setsockopt(zmq.LINGER, 0)
        km = AsyncKernelManager(transport="ipc", ip=os.path.join(self.runtime_dir, "k"),
                                connection_file=os.path.join(self.runtime_dir, "kernel.json"), context=km_context)
        km._kernel_spec = KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                           *_KERNEL_ARGS, f"--IPKernelApp.exec_lines={startup}"],
                                     display_name="rlmnb sandbox", language="python")
        km.autorestart = False
        self.km = km
        try:
            # append mode: after trim_log() cuts the file, the kernel's writes land at its new end
            with open(self.log_path, "ab") as log:
                await km.start_kernel(env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=log)
            self.pid = int(km.provisioner.pid)  # type: ignore[union-attr]
            if self.killed:
                raise SandboxError("the kernel was stopped while it started")
        except BaseException:
            self.kill()
            raise

    async def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Connect on this loop and wait until the kernel answers with rlmnb's kernel side loaded."""
        if self.ready:
            return
        deadline = time.perf_counter() + timeout
        try:
            self.connect()
            await self._wait_ready(deadline)
            content = await self.wait(self.send(_BOOT.format(root=_PACKAGE_ROOT)), deadline)
            if not isinstance(content, dict) or content.get("status") != "ok":
                raise SandboxError(f"the sandbox kernel could not load rlmnb: {_describe_failure(content)}"
                                   f"{self._log_tail()}")
            self.ready = True
        except BaseException:
            self.kill()
            raise

    async def launch(self, *, warm: bool, timeout: float = START_TIMEOUT_S) -> None:
        """spawn() and wait_ready(): a kernel ready for a run."""
        await self.spawn(warm=warm)
        await self.wait_ready(timeout)

    async def _wait_ready(self, deadline: float) -> None:
        msg_id = self.client.kernel_info()
        resend = time.perf_counter() + 2.0
        while True:
            now = time.perf_counter()
            if now > deadline:
                raise SandboxError(f"the sandbox kernel did not start within {START_TIMEOUT_S:g} s{self._log_tail()}")
            if now > resend:
                msg_id, resend = self.client.kernel_info(), now + 2.0
            try:
                msg = await self.client.get_shell_msg(timeout=min(POLL_S, deadline - now))
            except queue.Empty:
                if not self.alive():
                    raise SandboxError(f"the sandbox kernel exited while starting ({self.cause()})"
                                       f"{self._log_tail()}") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return

    def connect(self) -> None:
        """A shell-channel client on the running event loop."""
        import zmq
        import zmq.asyncio

        self.disconnect()
        self.context = zmq.asyncio.Context()
        self.context.setsockopt(zmq.RECONNECT_IVL, 10)
        self.context.setsockopt(zmq.LINGER, 0)
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
        self.client = self.km.client(context=self.context)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self.loop = asyncio.get_running_loop()

    def disconnect(self) -> None:
        client, context = self.client, self.context
        self.client = self.context = None
        self.loop = None
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop_channels()
        if context is not None:
            with contextlib.suppress(Exception):
                context.destroy(linger=0)

    def alive(self) -> bool:
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        return process is not None and not self.killed and process.poll() is None

    def cause(self) -> str:
        """Why the process ended, for the model: 'exit code 1' or 'signal SIGKILL'."""
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return "unknown cause"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by signal {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def interrupt(self) -> None:
        if self.pid is not None and self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGINT)

    def kill(self) -> None:
        """Stop the kernel, every process it started, and remove its files. Idempotent, any thread."""
        with self._lock:
            if self.killed and self.km is None:
                return
            self.killed = True
            km, self.km = self.km, None
        self.disconnect()
        if km is not None:
            process = getattr(km.provisioner, "process", None) if km.provisioner is not None else None
            if process is not None:
                _kill_tree(process.pid, self.marker)
                with contextlib.suppress(Exception):
                    process.wait(timeout=5)
            with contextlib.suppress(Exception):
                km.cleanup_connection_file()
                km.cleanup_ipc_files()
                km._close_control_socket()
            with contextlib.suppress(Exception):
                km.context.destroy(linger=0)
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        if self.own_cwd:
            shutil.rmtree(self.cwd, ignore_errors=True)
        _live.discard(self)

    # ---- requests -----------------------------------------------------------------------------------------
    def send(self, code: str, user_expressions: dict[str, str] | None = None) -> str:
        return str(self.client.execute(code, silent=True, store_history=False, allow_stdin=False,
                                       user_expressions=user_expressions or {}, stop_on_error=False))

    async def wait(self, msg_id: str, deadline: float) -> dict[str, Any] | str:
        """The execute reply's content, or _TIMEOUT at the deadline, or _DEAD once the process is gone."""
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return _TIMEOUT if self.alive() else _DEAD
            try:
                msg = await self.client.get_shell_msg(timeout=min(remaining, POLL_S))
            except queue.Empty:
                if not self.alive():
                    return _DEAD
                self.trim_log()
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]  # type: ignore[no-any-return]

    async def call(self, code: str, timeout: float = CALL_TIMEOUT_S) -> Any:
        """Run one of the kernel side's entry points and return its value; failures are SandboxErrors."""
        content = await self.wait(self.send(code, _REPLY), time.perf_counter() + timeout)
        data = reply_payload(content)
        if data is None:
            raise SandboxError(f"the sandbox kernel failed: {_describe_failure(content)}")
        if "error" in data:
            raise SandboxError(f"the sandbox kernel refused: {data['error']}")
        return data.get("ok")

    def trim_log(self) -> None:
        """Keep the kernel's fd-2 log bounded: model code writing raw bytes to fd 2 cannot fill the disk."""
        try:
            if os.path.getsize(self.log_path) <= LOG_CAP:
                return
            with open(self.log_path, "r+b") as f:
                f.seek(-LOG_TAIL, os.SEEK_END)
                tail = f.read()
                f.seek(0)
                f.truncate()
                f.write(b"[... earlier output cut by rlmnb ...]\n" + tail)
        except OSError:
            pass

    def mirrored_output(self) -> tuple[str, str]:
        """What the running snippet had printed (its first characters, up to the output cap) when the
        kernel died or stuck: the kernel side mirrors them into its runtime directory as they are written."""
        texts = []
        for stream in ("stdout", "stderr"):
            try:
                texts.append(Path(self.runtime_dir, f"{stream}.mirror").read_text(errors="replace"))
            except OSError:
                texts.append("")
        return texts[0], texts[1]

    def _log_tail(self) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace").strip()
        except OSError:
            return ""
        return f"; its log ends with:\n{text[-1500:]}" if text else ""

    def __repr__(self) -> str:
        return f"KernelProcess(pid={self.pid}, alive={self.alive()})"


def reply_payload(content: Any) -> Any:
    """The JSON our kernel side left in the `r` user expression, or None when there is none."""
    if not isinstance(content, dict):
        return None
    expr = (content.get("user_expressions") or {}).get("r") or {}
    if expr.get("status") != "ok" or MIME not in expr.get("data", {}):
        return None
    return json.loads(expr["data"][MIME])


def _describe_failure(content: Any) -> str:
    if content == _TIMEOUT:
        return "no reply in time"
    if content == _DEAD:
        return "the process died"
    if isinstance(content, dict) and content.get("status") == "error":
        return f"{content.get('ename')}: {content.get('evalue')}"
    return "no reply"


def _kill_tree(pid: int, marker: str) -> None:
    """SIGKILL the kernel's process group, its descendants, and anything still carrying its marker."""
    victims: list[Any] = []
    try:
        import psutil

        with contextlib.suppress(psutil.Error):
            victims = psutil.Process(pid).children(recursive=True)
    except ImportError:
        psutil = None  # type: ignore[assignment,unused-ignore]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the kernel leads its own session (start_new_session)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    for proc in victims:
        with contextlib.suppress(Exception):
            proc.kill()
    for other in _marked_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(other, signal.SIGKILL)
    if psutil is not None and victims:
        with contextlib.suppress(Exception):
            psutil.wait_procs(victims, timeout=2)


def _marked_pids(marker: str) -> list[int]:
    """Processes whose environment carries the kernel's marker (daemons that left its session)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me, uid = os.getpid(), os.getuid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


_ipython_lock = threading.Lock()
_ipython_path: list[str] = []


def _ipython_dir() -> str:
    """An empty IPython directory shared by this process's kernels: no user profile or startup files run."""
    with _ipython_lock:
        if not _ipython_path:
            _ipython_path.append(private_temp_dir("ipython"))
        return _ipython_path[0]


# ---- the sandbox --------------------------------------------------------------------------------------------
class KernelSandbox:
    """The Sandbox protocol over a separate kernel process (see the module docstring).

    Args:
        max_output_chars: characters of stdout (and of stderr) kept per snippet, head and tail; 10,000.
        memory_limit: cap on the kernel's data memory, in bytes or a string such as "2GB"; None for none.
        secret_env: more environment variable names kept out of the kernel (beyond the name patterns).
        cwd: the kernel's working directory; default a fresh temp dir, removed on close.
        warm: take and refill the warm spare kernel (default True).
        grace: seconds an interrupted snippet has to stop before the kernel is replaced (2.0).
    """

    kind = "kernel"

    def __init__(self, *, max_output_chars: int = 10_000, memory_limit: int | str | None = None,
                 secret_env: Sequence[str] = (), cwd: str | os.PathLike[str] | None = None, warm: bool = True,
                 grace: float = GRACE_S) -> None:
        self.max_output_chars = max_output_chars
        self.memory_limit = parse_size(memory_limit, "memory_limit")
        self.secret_env = tuple(secret_env)
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.warm = warm
        self.grace = grace
        self.restarts = 0
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
        self._manifests = 0
        self._launching: KernelProcess | None = None
        self._steps = 0

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def start(self, host: SandboxHost) -> None:
        """Attach to a run. The first start obtains a kernel (in the background: bind ships inputs meanwhile)."""
        if self._closed:
            raise SandboxError("this kernel sandbox is closed; start a new run")
        if self._dir is None:
            self._dir = make_transfer_dir()
            self._shipper = Shipper(self._dir)
            self._broker = Broker(self._dir)
            _open.add(self)
            self._kernel_task = asyncio.get_running_loop().create_task(self._obtain())
        self._host = host
        assert self._broker is not None
        await self._broker.attach(host)
        self._configured = False

    async def bind(self, fields: Sequence[Field]) -> None:
        """Ship new inputs as files (unless already shipped) and bind them in the kernel."""
        fields = list(fields)
        for f in fields:
            self._fields[f.name] = f
        specs = await asyncio.to_thread(self._ship, fields) if fields else []
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
                    await task
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
        for kernel in (self._kernel, self._launching):
            if kernel is not None:
                kernel.kill()
        self._kernel = self._launching = None
        if self._broker is not None:
            self._broker.close_now()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        _open.discard(self)

    async def variables(self) -> list[str]:
        kernel = await self._ready()
        return list(await kernel.call("__rlmnb__.variables()"))

    # ---- running ----------------------------------------------------------------------------------------
    async def execute(self, code: str, timeout: float, *, turn: int = 0) -> ExecResult:
        kernel = await self._ready()
        earlier = None
        if not kernel.alive():
            earlier = render("kernel_died_idle", cause=kernel.cause())
            kernel = await self._replace()
        assert self._broker is not None
        started = time.perf_counter()
        self._steps += 1
        step = self._steps
        msg_id = kernel.send(f"__rlmnb__.run({turn!r}, {step!r}, {code!r})", _REPLY)
        timed_out = False
        try:
            content = await kernel.wait(msg_id, started + timeout)
            if content == _TIMEOUT:
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
        if content == _DEAD:
            self._broker.drop_step(step)
            cause = kernel.cause()
            out, err = kernel.mirrored_output()
            await self._replace()
            return ExecResult(stdout=out, stderr=err, error=f"KernelDied: the sandbox kernel process died ({cause})",
                              error_type="KernelDied", duration_s=duration, timed_out=timed_out, restarted=True,
                              notice=_join(earlier, render("kernel_died", cause=cause)))
        if content == _TIMEOUT:
            out, err = kernel.mirrored_output()
            await self._replace()
            return ExecResult(stdout=out, stderr=err, duration_s=duration, timed_out=True, restarted=True,
                              notice=_join(earlier, render("kernel_stuck")))
        data = reply_payload(content)
        if data is None:  # an interrupt landed outside the snippet: the outcome is still kept in the kernel
            data = await self._fetch_outcome(kernel)
        if data is None:  # model code took the kernel side apart (e.g. through get_ipython())
            await self._replace()
            return ExecResult(error=f"SandboxBroken: {_describe_failure(content)}", error_type="SandboxBroken",
                              duration_s=duration, timed_out=timed_out, restarted=True,
                              notice=_join(earlier, render("kernel_broken")))
        return _exec_result(data, timed_out, duration, earlier, self.max_output_chars)

    async def _fetch_outcome(self, kernel: KernelProcess) -> dict[str, Any] | None:
        content = await kernel.wait(kernel.send("pass", _REPLY), time.perf_counter() + max(self.grace, 1.0))
        data = reply_payload(content)
        return data if isinstance(data, dict) else None

    # ---- internals -------------------------------------------------------------------------------------------
    def _key(self) -> tuple[Any, ...]:
        return (sys.executable, self.cwd)

    async def _obtain(self) -> KernelProcess:
        """A ready kernel no run has touched: the warm spare when it fits, else a cold start.

        A spare fits when it was started with no variable this run's scrubbed environment lacks (a
        variable it has cannot be taken back: /proc/self/environ keeps it); variables added or changed
        since are set in the kernel by `configure`. A spare that fails to come up is replaced by a cold start.
        """
        key = self._key()
        wanted = scrubbed_env(self.secret_env)
        kernel = pool.take(key) if self.warm else None
        if kernel is not None and not set(kernel.base_env) <= set(wanted):
            await asyncio.to_thread(kernel.kill)
            kernel = None
        if kernel is not None:
            self._launching = kernel
            try:
                await kernel.wait_ready()
            except SandboxError:
                kernel = None
            finally:
                self._launching = None
        if kernel is None:
            kernel = self._launching = KernelProcess(wanted, self.cwd)
            try:
                await kernel.launch(warm=False)
            finally:
                self._launching = None
        if self._closed:
            kernel.kill()
            raise SandboxError("the kernel sandbox was closed while its kernel started")
        if self.warm:
            await pool.refill(key, self._spawner(), _kill_kernel)
        return kernel

    def _spawner(self) -> Any:
        env, cwd = scrubbed_env(self.secret_env), self.cwd

        async def spawn() -> KernelProcess:
            kernel = KernelProcess(env, cwd)
            await kernel.spawn(warm=True)
            return kernel

        return spawn

    async def _ready(self) -> KernelProcess:
        """The current kernel, connected on this loop and configured for the attached run."""
        if self._closed:
            raise SandboxError("this kernel sandbox is closed")
        if self._kernel is None:
            task = self._kernel_task
            if task is None:
                raise SandboxError("the kernel sandbox was not started")
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

    async def _configure(self, kernel: KernelProcess) -> None:
        assert self._broker is not None and self._host is not None
        tools = {name: (getattr(fn, "__doc__", None) or "") for name, fn in self._host.tools.items()}
        wanted = scrubbed_env(self.secret_env)
        env = {k: v for k, v in wanted.items() if kernel.base_env.get(k) != v}
        settings = {"bridge": self._broker.settings(), "max_output_chars": self.max_output_chars,
                    "mirror_dir": kernel.runtime_dir, "tools": tools, "memory_limit": self.memory_limit, "env": env}
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
        assert self._dir is not None
        kernel = await self._ready()
        self._manifests += 1
        path = os.path.join(self._dir, f"manifest{self._manifests}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(specs, f)
        try:
            await kernel.call(f"__rlmnb__.bind({path!r})")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)

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
        duration_s=duration, timed_out=timed_out or interrupted, notice=earlier)


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


def _kill_kernel(kernel: KernelProcess) -> None:
    kernel.kill()


# ---- exit ---------------------------------------------------------------------------------------------------
_open: weakref.WeakSet[KernelSandbox] = weakref.WeakSet()
_live: weakref.WeakSet[KernelProcess] = weakref.WeakSet()


def _close_all() -> None:
    """At interpreter exit: stop every kernel still open (kept sessions, interrupted starts)."""
    for sandbox in list(_open):
        with contextlib.suppress(Exception):
            sandbox._close_now()
    for kernel in list(_live):
        with contextlib.suppress(Exception):
            kernel.kill()
    for path in _ipython_path:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_close_all)

__all__ = ["KernelProcess", "KernelSandbox"]
