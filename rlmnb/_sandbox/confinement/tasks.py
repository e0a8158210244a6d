"""A cap on the tasks (processes and threads) one sandbox kernel runs at once: a fork bomb stops there (host side).

Two mechanisms, whichever this system offers (`mechanism`):

- RLIMIT_NPROC, set by the launcher inside a sandbox in its own user namespace (launch.cap_tasks): the kernel
  counts tasks per user of that namespace, so the cap is the sandbox's own. It does not hold where the
  sandbox's user is root outside (Linux exempts the global root user from RLIMIT_NPROC), which is why:
- a cgroup of the pids controller, made per kernel under this process's own cgroup when that is writable (as
  root in a VM, or where the cgroup is delegated): `pids.max` holds whatever the user is. The kernel process is
  moved into it before any model code runs; everything it starts later is born inside and cannot leave, so
  closing the cgroup also kills every process the kernel left, in either layer.

Where neither holds (root in a container with a read-only cgroupfs), the `tasks` guard says so every run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time

MIN_TASKS, TASKS_PER_CORE = 512, 32  # room for every thread pool a library sizes by the cores, several times over
_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup", "/sys/fs/cgroup/unified")


def cap() -> int:
    """How many tasks one sandbox may run at once here."""
    return max(MIN_TASKS, TASKS_PER_CORE * (os.cpu_count() or 1))


@functools.cache
def pids_folder() -> str | None:
    """This process's own cgroup folder of the pids controller when new cgroups can be made in it, else None."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for root in _CGROUP_ROOTS:
            if controllers == "pids" and root.endswith("/pids"):  # cgroup v1
                folder = root + path
            elif controllers == "" and not root.endswith("/pids"):  # cgroup v2: pids must be enabled for children
                folder = root + path
                try:
                    with open(os.path.join(folder, "cgroup.subtree_control"), encoding="ascii") as f:
                        if "pids" not in f.read().split():
                            continue
                except OSError:
                    continue
            else:
                continue
            if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
                return folder.rstrip("/")
    return None


def mechanism(namespaced: bool) -> str:
    """What caps a sandbox's tasks on this system ("" when nothing does)."""
    if pids_folder() is not None:
        return "a cgroup (pids controller)"
    if namespaced and os.geteuid() != 0:
        return "RLIMIT_NPROC in its user namespace"
    return ""


class TaskCap:
    """One kernel's pids cgroup: made by `open`, the kernel moved in by `admit`, removed by `close`."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def open(cls, limit: int | None = None) -> TaskCap | None:
        """A new cgroup capped at `limit` tasks (default `cap()`), or None where none can be made."""
        base = pids_folder()
        if base is None:
            return None
        folder = os.path.join(base, f"rlmnb-{os.getpid()}-{secrets.token_hex(6)}")
        try:
            os.mkdir(folder)
            with open(os.path.join(folder, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(limit or cap()))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
            return None
        return cls(folder)

    def admit(self, pid: int) -> bool:
        """Move process `pid` (all its threads) into the cgroup; False when it could not be moved."""
        try:
            with open(os.path.join(self.folder, "cgroup.procs"), "w", encoding="ascii") as f:
                f.write(str(pid))
        except OSError:
            return False
        return True

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            with open(os.path.join(self.folder, "cgroup.procs"), encoding="ascii") as f:
                return [int(line) for line in f.read().split()]
        except (OSError, ValueError):
            return []

    def close(self, timeout: float = 5.0) -> bool:
        """Kill every process still in the cgroup (a daemon that left the kernel's session included: it cannot
        leave the cgroup) and remove it. True when it is gone."""
        deadline = time.monotonic() + timeout
        while True:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.folder)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)  # the killed processes are still exiting


__all__ = ["MIN_TASKS", "TASKS_PER_CORE", "TaskCap", "cap", "mechanism", "pids_folder"]
