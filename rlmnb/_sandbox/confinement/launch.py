"""The confined kernel's first code: give up every capability, apply the Landlock policy (where the kernel
has Landlock), then become ipykernel.

Run as `python -c <bootstrap> POLICY.json -f CONNECTION_FILE ...`. The capabilities go first, before
anything else runs: everything here may run as root (Docker, Colab), and a root that keeps them can
reboot, read the kernel log or reach any file past its mode. Landlock binds the calling thread
and everything it starts later, so it must be applied here, while the interpreter has one thread and
before ipykernel (and ZMQ) start theirs. The seccomp half is applied later, by the kernel side at
boot (seal), once the kernel has bound its own ZMQ sockets: it synchronises all threads.

A policy that cannot be applied ends the process with a message on stderr (the host reports the
kernel log), so a kernel that should be confined never runs unconfined.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import runpy
import sys
import time

from rlmnb._sandbox.confinement import tasks
from rlmnb._sandbox.confinement.namespaces import NAMESPACED_ENV  # "1" where bubblewrap started this kernel

applied: dict[str, object] = {}  # what was applied here, read by seal (same process)

_PR_CAPBSET_READ, _PR_CAPBSET_DROP, _PR_GET_SECUREBITS, _PR_SET_SECUREBITS = 23, 24, 27, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_SECBIT_NOROOT, _SECBIT_NOROOT_LOCKED, _SECBIT_NO_SETUID_FIXUP, _SECBIT_NO_SETUID_FIXUP_LOCKED = 1, 2, 4, 8
_SECBIT_KEEP_CAPS_LOCKED, _SECBIT_NO_CAP_AMBIENT_RAISE, _SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 32, 64, 128
# root gains nothing by execve or by a uid change, KEEP_CAPS stays off, and all of it is locked
SECUREBITS = (_SECBIT_NOROOT | _SECBIT_NOROOT_LOCKED | _SECBIT_NO_SETUID_FIXUP | _SECBIT_NO_SETUID_FIXUP_LOCKED
              | _SECBIT_KEEP_CAPS_LOCKED)
_AMBIENT_BITS = _SECBIT_NO_CAP_AMBIENT_RAISE | _SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED  # Linux >= 4.3
_CAPSET_NR = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _status_caps() -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of this process, from /proc/self/status ({} where unreadable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return {k: int(v, 16) for k, _, v in (line.partition(":\t") for line in f) if k.startswith("Cap")}
    except (OSError, ValueError):
        return {}


def _last_cap(libc: ctypes.CDLL) -> int:
    """The highest capability number this kernel knows (cap_last_cap, else probed with PR_CAPBSET_READ)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        cap = 0
        while cap < 63 and libc.prctl(_PR_CAPBSET_READ, ctypes.c_ulong(cap + 1), 0, 0, 0) >= 0:
            cap += 1
        return cap


def drop_capabilities() -> dict[str, object]:
    """Give up every capability for good, in this process and all it will execute; then no_new_privs.

    In order: clear the ambient set; drop the whole bounding set (0..cap_last_cap) and lock the
    securebits (SECUREBITS, plus no ambient raise where the kernel knows it), both only where this
    process holds CAP_SETPCAP (one without it has nothing to drop there and skips them); set the
    effective, permitted and inheritable sets to zero (capset, always allowed since it only lowers);
    PR_SET_NO_NEW_PRIVS. After it a root uid holds no capability and regains none by execve,
    setuid binaries or file capabilities.

    Returns what was done, for `applied`: the sets before (hex, as /proc shows them), how many
    bounding capabilities were dropped, the securebits set (or None when skipped).
    Raises OSError when the kernel refuses to clear the sets (the process must not go on as root).
    """
    if not sys.platform.startswith("linux") or platform.machine() not in _CAPSET_NR:
        return {}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long
    before = _status_caps()
    libc.prctl(_PR_CAP_AMBIENT, ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)  # EINVAL before Linux 4.3
    dropped = 0
    for cap in range(_last_cap(libc) + 1):
        if libc.prctl(_PR_CAPBSET_READ, ctypes.c_ulong(cap), 0, 0, 0) == 1:
            if libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
                break  # EPERM: no CAP_SETPCAP, so nothing of the set can be dropped
            dropped += 1
    securebits: int | None = None
    current = libc.prctl(_PR_GET_SECUREBITS, 0, 0, 0, 0)
    for bits in (SECUREBITS | _AMBIENT_BITS, SECUREBITS):  # EINVAL: a kernel before the ambient bits
        if current >= 0 and current & bits == bits:
            securebits = current  # already set and locked (a parent did it)
            break
        if libc.prctl(_PR_SET_SECUREBITS, ctypes.c_ulong(bits | max(current, 0)), 0, 0, 0) == 0:
            securebits = bits | max(current, 0)
            break
    # securebits None: no CAP_SETPCAP to set them; capset and NO_NEW_PRIVS below still keep root from regaining
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.syscall(ctypes.c_long(_CAPSET_NR[platform.machine()]), ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset to no capabilities failed: {os.strerror(err)}")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
    return {"caps_before": {k: f"{v:016x}" for k, v in before.items()}, "bounding_dropped": dropped,
            "securebits": securebits}


def main(argv: list[str]) -> None:
    policy_path, rest = argv[0], argv[1:]
    try:
        applied.update(capabilities=drop_capabilities())
    except OSError as exc:
        sys.stderr.write(f"rlmnb: could not drop the sandbox kernel's capabilities: {exc}\n")
        os._exit(78)
    from rlmnb._sandbox.confinement.landlock import LandlockError, abi_version, restrict_self
    from rlmnb._sandbox.confinement.policy import Policy

    with open(policy_path, encoding="utf-8") as f:
        policy = Policy.from_dict(json.load(f))
    started = time.perf_counter()
    abi = abi_version()  # what the host's plan (confinement.plan) was made from: the same kernel
    try:
        if abi >= 1:
            restrict_self(paths=policy.rules(), connect_ports=policy.connect_ports, abi=abi)
    except (LandlockError, OSError) as exc:
        sys.stderr.write(f"rlmnb: could not confine the sandbox kernel: {exc}\n")
        os._exit(78)
    applied.update(launched=True, landlock=abi, policy=policy_path, landlock_ms=(time.perf_counter() - started) * 1000)
    if os.environ.get(NAMESPACED_ENV) == "1":
        applied.update(max_tasks=cap_tasks())
    sys.argv = ["ipykernel_launcher", *rest]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def cap_tasks() -> int:
    """Bound the processes and threads the sandbox may run at once (RLIMIT_NPROC, tasks.cap()).

    Only inside the sandbox's own user namespace, where Linux counts tasks per user of that namespace (so the
    cap is the sandbox's own, whatever the host runs); where the sandbox's user is root outside, Linux exempts
    it and the host's pids cgroup caps it instead (tasks.py)."""
    import resource

    limit = tasks.cap()
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    return limit


def seal() -> dict[str, object]:
    """At the kernel's boot, before any model code: the seccomp filter on every thread (see seccomp.py),
    with signals limited to this process where Landlock cannot scope them (ABI < 6), and unix stream
    sockets allowed only where the namespaced launcher set NAMESPACED_ENV to "1" (its mount namespace
    shows no socket file but the broker's; model code has not run yet, so it cannot set the variable).
    Raises when this kernel was not started by main(), so the host never takes it for confined."""
    if not applied.get("launched"):
        raise RuntimeError("this kernel was not started by rlmnb's confining launcher")
    from rlmnb._sandbox.confinement import seccomp

    if not applied.get("seccomp") and seccomp.available():
        started = time.perf_counter()
        abi = applied.get("landlock")
        own_pid = None if isinstance(abi, int) and abi >= 6 else os.getpid()
        unix_stream = os.environ.get(NAMESPACED_ENV) == "1"
        seccomp.apply(own_pid=own_pid, unix_stream=unix_stream)
        applied.update(seccomp=True, signals_by_seccomp=own_pid is not None, unix_stream=unix_stream,
                       seccomp_ms=(time.perf_counter() - started) * 1000)
    return dict(applied)


def bootstrap(root: str) -> str:
    """The `python -c` code that makes rlmnb importable from `root` and calls main with the arguments."""
    return (f"import sys; sys.path.insert(0, {root!r}) if {root!r} not in sys.path else None; "
            "from rlmnb._sandbox.confinement.launch import main; main(sys.argv[1:])")


__all__ = ["NAMESPACED_ENV", "SECUREBITS", "applied", "bootstrap", "drop_capabilities", "main", "seal"]
