"""Stopping a kernel and everything it started, even daemons that left its process session.

Every sandbox kernel carries a random marker in its environment; a process that double-forked out of
the kernel's session still carries it, so `marked_pids` finds it through `/proc/<pid>/environ`.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

MARKER_VAR = "RLMNB_SANDBOX_KERNEL"


def kill_tree(pid: int, marker: str) -> None:
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
    for other in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(other, signal.SIGKILL)
    if psutil is not None and victims:
        with contextlib.suppress(Exception):
            psutil.wait_procs(victims, timeout=2)


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


__all__ = ["MARKER_VAR", "kill_tree", "marked_pids"]
