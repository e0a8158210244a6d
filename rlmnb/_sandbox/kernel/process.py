"""One sandbox kernel process: launching it, talking to it, and stopping it with everything it started.

`KernelProcess` is the process lifecycle of the kernel sandbox (see sandbox.py for what runs in it): an
ipykernel subprocess started by jupyter_client over ZMQ ipc sockets, in its own process session, with its
fd 1 and 2 in a bounded log the host trims through its own descriptor. A confined kernel on a system with
user namespaces runs inside bubblewrap (confinement/namespaces.py), launched from one long-lived thread
(`_spawner`: bubblewrap ties the sandbox to the thread that started it). The host's runtime folder for a
kernel (log, connection file, policy) is never writable by it; its ZMQ sockets have a folder of their own.
A client on the shell channel only sends requests; results come back in the execute reply (output is
captured inside the kernel), decoded within bounds.

`kill_tree` stops a kernel and everything it started: its PID namespace (every process in it ends with it),
its pids cgroup where there is one (confinement/tasks.py: nothing leaves it), and otherwise a random marker
(MARKER_VAR) in its environment that a process double-forked out of the kernel's session still carries.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rlmnb._ground.errors import SandboxError
from rlmnb._sandbox.bridge import (
    MIME,
    REPLY_BYTES,
    REPLY_ITEMS,
    ProtocolError,
    TooLarge,
    bounded_loads,
    listening_socket,
    unix_listening_socket,
)
from rlmnb._sandbox.confinement import namespaces
from rlmnb._sandbox.confinement.launch import bootstrap
from rlmnb._sandbox.confinement.policy import AllowedPath, Policy, build_policy, python_paths
from rlmnb._sandbox.confinement.tasks import TaskCap
from rlmnb._sandbox.transfer import make_transfer_dir, private_temp_dir, read_beneath

POLL_S = 0.2            # how often a wait checks that the kernel process is alive
LOG_CAP = 4 * 2**20     # the kernel's fd-2 log (raw writes by model code) is cut back to its tail above this
LOG_TAIL = 64 * 2**10
MIRROR_CAP = 4 * 2**20  # at most this much of a dead kernel's mirrored output is read back
GRACE_S = 2.0           # after an interrupt, how long the kernel has to become idle before it is replaced
START_TIMEOUT_S = 60.0  # a kernel that is not ready by then is a SandboxError
CALL_TIMEOUT_S = 600.0  # configure / bind / variables
# ZMQ refuses a larger message from the kernel: the host's memory is not its to fill. The reply JSON
# (REPLY_BYTES at most) travels escaped inside the message's own JSON, which can double it.
MAX_REPLY_BYTES = 2 * REPLY_BYTES + (8 << 20)
REPLY_EXPR = {"r": "__rlmnb__.reply()"}
_KERNEL_ARGS = ("--HistoryManager.enabled=False", "--InteractiveShellApp.exec_PYTHONSTARTUP=False",
                "--Application.log_level=ERROR")
TIMEOUT, DEAD = "timeout", "dead"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_STARTUP = ("import sys as _s; _s.path.insert(0, {root!r}) if {root!r} not in _s.path else None; "
            "import rlmnb._sandbox.kernel.side as __rlmnb__; del _s")
_BOOT = ("import sys as _s\n"
         "if {root!r} not in _s.path:\n"
         "    _s.path.insert(0, {root!r})\n"
         "import rlmnb._sandbox.kernel.side as __rlmnb__\n"
         "del _s\n")
_SEAL = "import rlmnb._sandbox.confinement.launch as _l\n_l.seal()\ndel _l\n"  # seccomp on every thread, before model code
# a confined spare seals itself while it waits (seccomp on every thread costs nothing later)
_EARLY_SEAL = "; import rlmnb._sandbox.confinement.launch as _l; _l.seal(); del _l"
# every spare formats one reply while it waits (IPython's first format builds its formatters), then says it
# is warm (see KernelProcess.warmed)
_WARMED = "; get_ipython().display_formatter.format(__rlmnb__.reply()); __rlmnb__.mark_warm({path!r})"


class Home:
    """A sandbox's transfer directory and broker listener, made together with a warm spare so that the
    spare's confinement can name them; the sandbox that takes the spare adopts them.

    A sandbox in its own namespaces has no network: its broker is a Unix socket file in the transfer
    directory (which it sees read-only); otherwise the broker listens on a loopback TCP port."""

    def __init__(self, *, unix: bool = False) -> None:
        self.dir = make_transfer_dir()
        self.listener = unix_listening_socket(os.path.join(self.dir, "broker.sock")) if unix else listening_socket()

    @property
    def port(self) -> int:
        """The broker's TCP port (0 for a Unix socket)."""
        name = self.listener.getsockname()
        return int(name[1]) if isinstance(name, tuple) else 0

    def discard(self) -> None:
        self.listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- one kernel process ----------------------------------------------------------------------------------
class KernelProcess:
    """One ipykernel subprocess: its manager, process group, private directories and its client.

    The client (shell channel only: results come back in the execute reply, output is captured in the
    kernel) belongs to one event loop; `connect()` makes a new one when the loop changes.
    """

    def __init__(self, env: dict[str, str], cwd: str | None, *, confine: dict[str, Any] | None = None,
                 home: Home | None = None, namespaced: bool = False) -> None:
        """`confine`: build_policy's arguments but the kernel's own directories (None: not confined);
        `home`: the transfer directory and listener made for this kernel when it is a warm spare;
        `namespaced`: run it in its own namespaces (namespaces.py; needs `confine`)."""
        self.namespaced = namespaced and confine is not None
        # the host's own folder (log, connection file, policy): never writable by the kernel, and never
        # mounted into a namespaced one but for its read-only `conf` and writable `sock` sub-folders
        self.runtime_dir = private_temp_dir("kernel")
        self.conf_dir = os.path.join(self.runtime_dir, "conf")
        self.sock_dir = os.path.join(self.runtime_dir, "sock")  # the kernel's ZMQ sockets: it binds them
        os.mkdir(self.conf_dir, 0o700)
        os.mkdir(self.sock_dir, 0o700)
        self.log_path = os.path.join(self.runtime_dir, "kernel.log")  # the kernel's fd 1 and 2 (see trim_log)
        self._log = open(self.log_path, "a+b")  # noqa: SIM115 - the host reads and trims it through this descriptor
        self.warm_marker = os.path.join(self.sock_dir, "warm")  # written when a spare's warm-up is done
        self.own_cwd = cwd is None
        if self.namespaced:
            self.cwd = cwd if cwd is not None else namespaces.WORK
        else:
            self.cwd = cwd if cwd is not None else private_temp_dir("cwd")
        self.marker = secrets.token_hex(8)
        self.base_env = dict(env)  # the environment it started with (and updates pushed since)
        self.env = {**env, MARKER_VAR: self.marker, "PWD": self.cwd}
        if self.namespaced:
            self.env.update(IPYTHONDIR=namespaces.IPYTHON, HOME=namespaces.HOME, TMPDIR=namespaces.TMP)
        else:  # its own IPython folder: no profile or startup file outlives it
            self.env["IPYTHONDIR"] = os.path.join(self.runtime_dir, "ipython")
            if self.own_cwd:
                self.env["TMPDIR"] = self.cwd  # tempfile writes where a confined kernel may write
        self.home = home
        own_dirs = ((namespaces.SCRATCH, self.sock_dir, self.conf_dir) if self.namespaced
                    else (self.runtime_dir, self.cwd))
        self.policy: Policy | None = (build_policy(own_dirs=(*own_dirs, *([cwd] if cwd and self.namespaced else [])),
                                                   **confine) if confine is not None else None)
        self.layout = _layout(self.policy, confine, cwd, self.sock_dir, self.conf_dir) if self.namespaced else None
        # what it was granted beyond its own home (transfer directory, broker port): a spare serves a run
        # only when this equals the run's own grants (see KernelSupply._fits)
        self.grants: dict[str, Any] | None = (
            {k: v for k, v in confine.items() if k not in ("transfer_dir", "broker_port")} if confine is not None
            else None)
        self.outbox_fd: int | None = None  # a namespaced kernel's outbox, opened before any model code ran
        self.kernel_pid: int | None = None  # a namespaced kernel's own host pid (self.pid is bubblewrap's)
        self.task_cap: TaskCap | None = None  # its pids cgroup, where this system lets the host make one
        self.km: Any = None
        self.client: Any = None
        self.context: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid: int | None = None
        self.ready = False
        self.killed = False
        self._reaper: weakref.finalize[Any, Any] | None = None
        self._contexts: list[Any] = []  # the client's ZMQ context while connected (the reaper closes it too)
        self._lock = threading.Lock()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def spawn(self, *, warm: bool) -> None:
        """Launch the process (tens of ms). It loads rlmnb's kernel side at start-up, and with `warm`
        pandas and pyarrow too, before it answers anything: nothing of ours waits meanwhile."""
        from jupyter_client.kernelspec import KernelSpec
        from jupyter_client.manager import AsyncKernelManager

        _live.add(self)
        startup = _STARTUP.format(root=_PACKAGE_ROOT) + ("; __rlmnb__.warm_up()" if warm else "")
        if self.policy is not None and warm:
            startup += _EARLY_SEAL
        if warm:
            startup += _WARMED.format(path=self.warm_marker)
        import zmq
        import zmq.asyncio

        # our own context with LINGER 0: a message still queued for a dead kernel can never make
        # closing (or garbage-collecting) the context block forever
        km_context = zmq.asyncio.Context()
        km_context.setsockopt(zmq.LINGER, 0)
        km = AsyncKernelManager(transport="ipc", ip=os.path.join(self.sock_dir, "k"),
                                connection_file=os.path.join(self.conf_dir, "kernel.json"), context=km_context)
        launcher = ["-m", "ipykernel_launcher"]
        if self.policy is not None:
            policy_path = os.path.join(self.conf_dir, "policy.json")
            with open(policy_path, "w", encoding="utf-8") as f:
                json.dump(self.policy.to_dict(), f)
            launcher = ["-c", bootstrap(_PACKAGE_ROOT), policy_path]
        argv = [sys.executable, *launcher, "-f", "{connection_file}", *_KERNEL_ARGS,
                f"--IPKernelApp.exec_lines={startup}"]
        if self.layout is not None:
            # its parent inside is the namespace's init, never the host: --die-with-parent ends it with the
            # host instead of ipykernel's parent poller (which would take pid 1 for a dead parent)
            argv = namespaces.command([*argv, "--IPKernelApp.parent_handle=1"], self.layout)
        km._kernel_spec = KernelSpec(argv=argv, display_name="rlmnb sandbox", language="python")
        km.autorestart = False
        self.km = km
        try:
            # append mode: after trim_log() cuts the file, the kernel's writes land at its new end
            start = km.start_kernel(env=self.env, cwd=self.runtime_dir if self.namespaced else self.cwd,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log.fileno())
            if self.namespaced:  # launched from a thread that lives as long as this process (see _spawner)
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(start), _spawner()))
            else:
                await start
            self.pid = int(km.provisioner.pid)  # type: ignore[union-attr]
            # a kernel whose object is dropped without kill() (nobody can reach it any more) is stopped then
            self._reaper = weakref.finalize(self, _reap, km, self._contexts, self.marker, self.runtime_dir,
                                            self.cwd if self.own_cwd and not self.namespaced else None)
            if self.killed:
                raise SandboxError("the kernel was stopped while it started")
        except BaseException as exc:
            stopped = self.killed
            self.kill()
            _stop_manager(km, self.marker)  # a kill from another thread may have come before the process existed
            if stopped and isinstance(exc, Exception) and not isinstance(exc, SandboxError):
                raise SandboxError("the kernel was stopped while it started") from exc  # its files went with it
            raise

    async def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Connect on this loop and wait until the kernel answers with rlmnb's kernel side loaded."""
        if self.ready:
            return
        deadline = time.perf_counter() + timeout
        try:
            self.connect()
            await self._wait_ready(deadline)
            if self.namespaced and self.outbox_fd is None and self.pid is not None:
                # before any model code: no orphan to mistake for the kernel, no link planted on the way
                self.kernel_pid = namespaces.inner_pid(self.pid)
                if self.kernel_pid is None:
                    raise SandboxError(f"the sandbox kernel's process could not be found{self._log_tail()}")
                self.outbox_fd = namespaces.open_outbox(self.kernel_pid)
            if self.policy is not None and self.task_cap is None:
                self._cap_tasks()
            boot = _BOOT.format(root=_PACKAGE_ROOT) + (_SEAL if self.policy is not None else "")
            content = await self.wait(self.send(boot), deadline)
            if not isinstance(content, dict) or content.get("status") != "ok":
                raise SandboxError(f"the sandbox kernel could not load rlmnb: {describe_failure(content)}"
                                   f"{self._log_tail()}")
            self.ready = True
        except BaseException:
            self.kill()
            raise

    def _cap_tasks(self) -> None:
        """Move the kernel into a pids cgroup of its own before any model code runs (tasks.py); where none can
        be made, the run's record says the `tasks` guard does not hold."""
        target = self.kernel_pid if self.namespaced else self.pid
        cap = TaskCap.open() if target is not None else None
        if cap is not None and target is not None and not cap.admit(target):
            cap.close()
            cap = None
        self.task_cap = cap

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
        self._contexts.append(self.context)
        self.context.setsockopt(zmq.RECONNECT_IVL, 10)
        self.context.setsockopt(zmq.LINGER, 0)
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
        self.client = self.km.client(context=self.context)
        # the whole message the kernel sends is decoded within bounds too, not only our reply inside it
        self.client.session.unpack = functools.partial(bounded_loads, max_bytes=MAX_REPLY_BYTES, max_items=REPLY_ITEMS)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self.loop = asyncio.get_running_loop()

    def disconnect(self) -> None:
        client, context = self.client, self.context
        self.client = self.context = None
        self._contexts.clear()
        self.loop = None
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop_channels()
        if context is not None:
            with contextlib.suppress(Exception):
                context.destroy(linger=0)

    def warmed(self) -> bool:
        """True once a spare launched with `warm` has done all its waiting-time work (imports, heap settled,
        sealed when confined, first reply formatted): a run that takes it now pays none of that."""
        return os.path.lexists(self.warm_marker)  # never follows what the kernel wrote there

    def alive(self) -> bool:
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        return process is not None and not self.killed and process.poll() is None

    def cause(self) -> str:
        """Why the process ended, for the model: 'exit code 1' or 'signal SIGKILL'."""
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return "unknown cause"
        if self.namespaced and code > 128:
            code = 128 - code  # bubblewrap exits with 128 + the signal that ended the kernel
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by signal {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def interrupt(self) -> None:
        target = self.kernel_pid if self.namespaced else self.pid
        if target is not None and self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGINT)

    def kill(self) -> None:
        """Stop the kernel, every process it started, and remove its files. Idempotent, any thread."""
        with self._lock:
            if self.killed and self.km is None:
                return
            self.killed = True
            km, self.km = self.km, None
        self.disconnect()
        if km is not None:
            _stop_manager(km, self.marker)
        if self._reaper is not None:
            self._reaper.detach()
        outbox, self.outbox_fd = self.outbox_fd, None
        if outbox is not None:
            with contextlib.suppress(OSError):
                os.close(outbox)  # the last reference to the sandbox's scratch: its memory is freed now
        with contextlib.suppress(OSError):
            self._log.close()
        cap, self.task_cap = self.task_cap, None
        if cap is not None:
            cap.close()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)  # fd-based: never follows a link the kernel made
        home, self.home = self.home, None
        if home is not None:
            home.discard()
        if self.own_cwd and not self.namespaced:
            shutil.rmtree(self.cwd, ignore_errors=True)
        _live.discard(self)

    # ---- requests -----------------------------------------------------------------------------------------
    def send(self, code: str, user_expressions: dict[str, str] | None = None) -> str:
        return str(self.client.execute(code, silent=True, store_history=False, allow_stdin=False,
                                       user_expressions=user_expressions or {}, stop_on_error=False))

    async def wait(self, msg_id: str, deadline: float) -> dict[str, Any] | str:
        """The execute reply's content, or TIMEOUT at the deadline, or DEAD once the process is gone."""
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return TIMEOUT if self.alive() else DEAD
            try:
                msg = await self.client.get_shell_msg(timeout=min(remaining, POLL_S))
            except queue.Empty:
                if not self.alive():
                    return DEAD
                self.trim_log()
                continue
            except ProtocolError as exc:  # a message over the bounds (session.unpack): only tampered code sends one
                return {"status": "error", "ename": "ReplyRefused", "evalue": str(exc)}
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]  # type: ignore[no-any-return]

    async def call(self, code: str, timeout: float = CALL_TIMEOUT_S) -> Any:
        """Run one of the kernel side's entry points and return its value; failures are SandboxErrors."""
        content = await self.wait(self.send(code, REPLY_EXPR), time.perf_counter() + timeout)
        data = reply_payload(content)
        if data is None:
            raise SandboxError(f"the sandbox kernel failed: {describe_failure(content)}")
        if "error" in data:
            raise SandboxError(f"the sandbox kernel refused: {data['error']}")
        return data.get("ok")

    def trim_log(self) -> None:
        """Keep the kernel's fd-2 log bounded: model code writing raw bytes to fd 2 cannot fill the disk.
        Through the host's own descriptor: the log's path is never opened again."""
        try:
            fd = self._log.fileno()
            size = os.fstat(fd).st_size
            if size <= LOG_CAP:
                return
            tail = os.pread(fd, LOG_TAIL, size - LOG_TAIL)
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"[... earlier output cut by rlmnb ...]\n" + tail, 0)
        except (OSError, ValueError):
            pass

    def mirrored_output(self, outbox: str | int | None) -> tuple[str, str]:
        """What the running snippet had printed (its first characters, up to the output cap) when the
        kernel died or stuck: the kernel side mirrors them into its outbox as they are written, and the
        host reads them there without following a link (transfer.read_beneath)."""
        texts = []
        for stream in ("stdout", "stderr"):
            data = read_beneath(outbox, f"{stream}.mirror", MIRROR_CAP) if outbox is not None else b""
            texts.append(data.decode("utf-8", errors="replace"))
        return texts[0], texts[1]

    def _log_tail(self) -> str:
        try:
            fd = self._log.fileno()
            size = os.fstat(fd).st_size
            text = os.pread(fd, 4096, max(0, size - 4096)).decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return f"; its log ends with:\n{text[-1500:]}" if text else ""

    def __repr__(self) -> str:
        return f"KernelProcess(pid={self.pid}, alive={self.alive()})"


def _layout(policy: Policy | None, confine: dict[str, Any] | None, cwd: str | None, sock_dir: str,
            conf_dir: str) -> namespaces.Layout:
    """What a namespaced kernel sees: Python and rlmnb, its inputs, the transfer folder (inputs the host wrote,
    the broker's socket) and `allow_paths` read-only; its socket folder, `:rw` allow_paths and a `cwd` the
    user chose writable; the host's network only when the user opened TCP endpoints."""
    assert policy is not None and confine is not None
    allowed = [AllowedPath.parse(p) for p in confine.get("allow_paths", ())]
    read_only = [*python_paths(), *confine.get("input_paths", ()), confine["transfer_dir"], conf_dir,
                 *(a.path for a in allowed if not a.writable), "/sys/devices/system/cpu", "/sys/fs/cgroup"]
    read_write = [sock_dir, *(a.path for a in allowed if a.writable), *([cwd] if cwd else [])]
    share = bool(confine.get("input_ports") or confine.get("allow_network"))
    return namespaces.Layout(tuple(read_only), tuple(read_write), share_network=share,
                             workdir=cwd or namespaces.WORK)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


SPAWNER_THREAD = "rlmnb-sandbox-spawner"  # one per process, by design: it outlives runs (see _spawner)
_spawner_loop: asyncio.AbstractEventLoop | None = None
_spawner_lock = threading.Lock()


def _spawner() -> asyncio.AbstractEventLoop:
    """The event loop of one daemon thread that lives as long as this process, where namespaced kernels are launched.

    bubblewrap's --die-with-parent ties the sandbox to the *thread* that started it (PR_SET_PDEATHSIG): a kernel
    started from a run's worker thread would die with that run, and a kept session or a warm spare would be lost.
    Started from this thread, a sandbox ends with the host process, crash included, and not before."""
    global _spawner_loop
    with _spawner_lock:
        if _spawner_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name=SPAWNER_THREAD, daemon=True).start()
            _spawner_loop = loop
        return _spawner_loop


def _reap(km: Any, contexts: list[Any], marker: str, runtime_dir: str, own_cwd: str | None) -> None:
    """What a KernelProcess leaves when it is garbage-collected without kill(): its process tree, its
    manager's and client's sockets (a ZMQ context left to the collector can block in term()) and its files."""
    for context in contexts:
        with contextlib.suppress(Exception):
            context.destroy(linger=0)
    with contextlib.suppress(Exception):
        _stop_manager(km, marker)
    shutil.rmtree(runtime_dir, ignore_errors=True)
    if own_cwd is not None:
        shutil.rmtree(own_cwd, ignore_errors=True)


def _stop_manager(km: Any, marker: str) -> None:
    """Kill the process tree a kernel manager launched (if it launched one) and remove its files. Idempotent."""
    process = getattr(km.provisioner, "process", None) if km.provisioner is not None else None
    if process is not None:
        # also when the kernel is gone: what it started may not be
        kill_tree(process.pid, marker, reap=functools.partial(process.wait, timeout=5))
        with contextlib.suppress(Exception):
            process.wait(timeout=5)
    with contextlib.suppress(Exception):
        km.cleanup_connection_file()
        km.cleanup_ipc_files()
        km._close_control_socket()
    with contextlib.suppress(Exception):
        km.context.destroy(linger=0)


def reply_payload(content: Any) -> Any:
    """The JSON our kernel side left in the `r` user expression, or None when there is none.

    It is decoded within REPLY_BYTES and REPLY_ITEMS (`bounded_loads`): a reply over them, not JSON, or not a
    mapping (the kernel side keeps its replies within them, so only tampered-with code makes one) reads as an
    outcome with an error, which the model sees; the kernel is kept. A JSON null (no outcome kept) is None.
    """
    if not isinstance(content, dict):
        return None
    expr = (content.get("user_expressions") or {}).get("r") or {}
    if not isinstance(expr, dict) or expr.get("status") != "ok" or not isinstance(expr.get("data"), dict):
        return None
    payload = expr["data"].get(MIME)
    if not isinstance(payload, str):
        return None
    try:
        data = bounded_loads(payload, max_bytes=REPLY_BYTES, max_items=REPLY_ITEMS)
    except ProtocolError as exc:
        why = f"it holds {exc}" if isinstance(exc, TooLarge) else str(exc)
    else:
        if data is None or isinstance(data, dict):
            return data
        why = f"it is a {type(data).__name__}, not a mapping"
    return {"error": f"ReplyRefused: the sandbox's reply was not read: {why}. Print less, and submit a smaller "
                     f"value (a summary or counts).", "error_type": "ReplyRefused"}


def describe_failure(content: Any) -> str:
    if content == TIMEOUT:
        return "no reply in time"
    if content == DEAD:
        return "the process died"
    if isinstance(content, dict) and content.get("status") == "error":
        return f"{content.get('ename')}: {content.get('evalue')}"
    return "no reply"


_live: weakref.WeakSet[KernelProcess] = weakref.WeakSet()


def _kill_live() -> None:
    """At interpreter exit: stop every kernel still running (kept sessions, interrupted starts)."""
    for kernel in list(_live):
        with contextlib.suppress(Exception):
            kernel.kill()


atexit.register(_kill_live)


MARKER_VAR = "RLMNB_SANDBOX_KERNEL"


def kill_tree(pid: int, marker: str, reap: Callable[[], Any] | None = None) -> None:
    """SIGKILL the kernel's process group, its descendants, and anything still carrying its marker, then wait for
    them. `reap` collects the direct child first (its Popen.wait): until it is reaped, a namespaced kernel's
    processes stay zombies under it and would hold the wait to its timeout."""
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
    for other in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(other, signal.SIGKILL)
    if reap is not None:
        with contextlib.suppress(Exception):
            reap()
    if psutil is not None and victims:
        _wait_dead(victims, timeout=2.0)


def _wait_dead(victims: list[Any], timeout: float) -> None:
    """Wait until every process in `victims` is gone or a zombie (dead: a namespaced kernel's processes are no
    children of ours, and are reaped by whoever inherits them, maybe late)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for proc in victims:
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
        if not alive:
            return
        victims = alive
        time.sleep(0.01)


def marked_pids(marker: str) -> list[int]:
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


__all__ = [
    "CALL_TIMEOUT_S", "DEAD", "GRACE_S", "SPAWNER_THREAD", "Home", "KernelProcess", "LOG_CAP", "LOG_TAIL", "MARKER_VAR",
    "POLL_S", "REPLY_EXPR", "START_TIMEOUT_S", "TIMEOUT", "describe_failure", "kill_tree", "marked_pids",
    "reply_payload",
]
