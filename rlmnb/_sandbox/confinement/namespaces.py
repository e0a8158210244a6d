"""The first layer of the kernel sandbox on Linux: its own namespaces, built by bubblewrap (host side).

The sandbox process starts inside new user, PID, mount, IPC, UTS (and, unless the user opened a TCP
endpoint, network) namespaces, so whole classes of access do not exist for it rather than being refused:

- files: its root is a fresh tmpfs that holds only the system's code (`/usr`, `/lib*`, `/bin`), a few
  files of `/etc`, the Python prefix and its libraries, rlmnb's package and the run's inputs, all
  read-only at their host paths; scratch (`SCRATCH`: working folder, temp, home, outbox) is a
  size-capped tmpfs, and so are `/tmp` and `/dev/shm`; the root and `/dev` are read-only. No home folder, no
  working folder of the user, no host `/tmp` or `/dev/shm`.
- processes: host processes are invisible (nothing to signal, trace, prlimit or name), and when the
  sandbox's first process ends every process in it ends (`--die-with-parent` plus the PID namespace).
- network: an empty network namespace (its own loopback only); the broker is a Unix socket file bound in.
- privileges: no capability in any namespace (`--cap-drop ALL`), `no_new_privs` (bubblewrap sets it).

Landlock and seccomp (launch.py) still apply inside, as a second layer. Why bubblewrap and not a
launcher of our own: docs/decisions/sandbox-namespaces.md. Where user namespaces are off (some
distributions and containers) or bubblewrap is missing, `probe` says why and the sandbox falls back
to Landlock and seccomp alone (policy.resolve records it; `confinement="required"` refuses).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

NAMESPACED_ENV = "RLMNB_SANDBOX_NAMESPACED"  # set inside: launch.seal() lets AF_UNIX streams through
SCRATCH = "/rlmnb"              # the sandbox's own size-capped tmpfs (never a host folder)
WORK, TMP, HOME, OUTBOX, IPYTHON = (f"{SCRATCH}/{name}" for name in ("work", "tmp", "home", "out", "ipython"))
SCRATCH_BYTES = 2 << 30         # the scratch tmpfs holds at most this (the kernel's disk)
SHM_BYTES = 256 << 20           # its own /dev/shm (POSIX semaphores, joblib) and /tmp each hold at most this
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "ssl", "pki", "ca-certificates",
        "nsswitch.conf", "passwd", "group", "protocols", "services", "mime.types", "os-release", "fonts",
        "locale.alias", "matplotlibrc", "alternatives")
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Layout:
    """What one namespaced sandbox sees, beyond the fixed system part: host paths bound at the same path.

    `read_only`: folders and files it may read (Python, rlmnb, inputs, `allow_paths`); `read_write`:
    host folders it may write (the kernel's ZMQ socket folder, `allow_paths` marked `:rw`);
    `share_network`: keep the host's network (only when the user opened TCP endpoints: Landlock's port
    rules then decide); `scratch_bytes`: the size of its scratch tmpfs."""

    read_only: tuple[str, ...] = ()
    read_write: tuple[str, ...] = ()
    share_network: bool = False
    scratch_bytes: int = SCRATCH_BYTES
    workdir: str = WORK


def bwrap_path() -> str | None:
    """Where bubblewrap is, or None."""
    return shutil.which("bwrap")


@functools.cache
def probe() -> str:
    """"" when this system can build the namespaces, else one sentence saying why not (asked once)."""
    if not os.path.exists("/proc/self/ns/user"):
        return "this system has no user namespaces"
    bwrap = bwrap_path()
    if bwrap is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        done = subprocess.run([bwrap, *_namespaces(share_network=False), "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start ({exc})"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot create namespaces here ({why[-1] if why else f'exit {done.returncode}'})"
    return ""


def _namespaces(*, share_network: bool) -> list[str]:
    flags = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    return flags if share_network else [*flags, "--unshare-net"]


def _system_mounts() -> list[str]:
    """The system's code read-only, keeping the host's layout (a merged /usr has /lib as a link)."""
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in _ETC:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _nested(paths: Sequence[str]) -> list[str]:
    """The paths to bind, parents first, without one that a parent in the list already holds (its bind holds the
    whole tree; a second bind inside it would have to make a mount point in a read-only mount)."""
    kept: list[str] = []
    for path in sorted(dict.fromkeys(os.path.abspath(p) for p in paths if os.path.exists(p)),
                       key=lambda p: (p.count("/"), p)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def command(argv: Sequence[str], layout: Layout) -> list[str]:
    """The bubblewrap command that runs `argv` inside the namespaces `layout` describes.

    Mount order matters: system, Python and inputs read-only, then the scratch tmpfs and its folders,
    then the writable binds; last, the root and /dev are made read-only (only the tmpfs mounts under
    them stay writable, each with its size cap)."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise FileNotFoundError("bubblewrap is not installed")
    args = [bwrap, *_namespaces(share_network=layout.share_network), "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "rlmnb-sandbox", "--proc", "/proc", "--dev", "/dev",
            "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--size", str(SHM_BYTES), "--tmpfs", "/tmp",
            *_system_mounts()]
    for path in _nested(layout.read_only):
        args += ["--ro-bind", path, path]
    args += ["--size", str(layout.scratch_bytes), "--tmpfs", SCRATCH]
    for folder in (WORK, TMP, HOME, OUTBOX, IPYTHON):
        args += ["--dir", folder]
    for path in _nested(layout.read_write):
        args += ["--bind", path, path]
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", layout.workdir, "--setenv", NAMESPACED_ENV, "1",
             "--setenv", "HOME", HOME, "--setenv", "TMPDIR", TMP, "--setenv", "PWD", layout.workdir, "--"]
    return [*args, *argv]


def _first_child(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            children = f.read().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def inner_pid(outer: int) -> int | None:
    """The host pid of the command bubblewrap `outer` runs (pid 2 inside: pid 1 is bubblewrap's reaper),
    or None. Asked once, before model code runs (later, orphans re-parented to the reaper could come first).

    /proc/<it>/root is the sandbox's own root: the host reaches the sandbox's scratch through it."""
    reaper = _first_child(outer)
    return _first_child(reaper) if reaper is not None else None


def open_outbox(pid: int) -> int:
    """A directory descriptor of the sandbox's outbox, opened through the root of `pid` (a process inside).

    Called once a kernel answers and before any model code runs, so no link planted by model code lies on
    the way; every later host read in the outbox goes through this descriptor without following links
    (transfer.read_beneath), and the descriptor never leaves the host. Raises OSError when it is gone."""
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = root
        for part in OUTBOX.strip("/").split("/"):
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = nxt
        return fd
    finally:
        os.close(root)


__all__ = ["HOME", "NAMESPACED_ENV", "IPYTHON", "OUTBOX", "SCRATCH", "SCRATCH_BYTES", "TMP", "WORK", "Layout", "bwrap_path",
           "command", "inner_pid", "open_outbox", "probe"]
