"""The second layer on its own: the seccomp filter against other processes and the host, and the launcher's
capability drop, each tried with real system calls in a forked child.

Each attempt runs in a child that installs the filter (or drops its capabilities) and then makes the
call through ctypes, reporting the errno (0: allowed) through a pipe; the same attempt without the filter
is the control that shows the refusal is the filter's. Calls are chosen so that, were the filter to let
them through, nothing changes on the host: a parent's limit or affinity set to its current value, an
invalid reboot command, a swapoff of a path that does not exist. The BPF program's verdicts on both
architectures are checked by seccomp.run (test_policy.py holds the older cases). A last test goes the
product's way: a scripted root in a kernel sandbox tries the attacks and the run carries on.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmnb._sandbox.confinement import launch, seccomp
from rlmnb._sandbox.confinement import policy as confinement

ROOT = str(Path(__file__).resolve().parents[2])
NEEDS_SECCOMP = pytest.mark.skipif(not seccomp.available(), reason="seccomp filtering is not available here")
ALLOW, EPERM = seccomp.RET_ALLOW, seccomp.RET_ERRNO | errno.EPERM
Attempt = Callable[[], int]


SELF = "the child's own pid"  # an own_pid that the child fills in


def _forked(make: Callable[[], str]) -> str:
    """make() in a forked child: the text it returns. A child that fails fails the test (traceback on stderr)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(read)
            os.write(write, make().encode())
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child failed (its traceback is on stderr)"
    return out


def _in_child(attempt: Attempt, filter_args: dict[str, Any] | None) -> int:
    """attempt() in a forked child, after seccomp.apply(**filter_args) (None: no filter, the control):
    the errno it reports (0: allowed)."""
    def make() -> str:
        if filter_args is not None:
            own_pid = os.getpid() if filter_args.get("own_pid") == SELF else None
            seccomp.apply(own_pid=own_pid, unix_stream=bool(filter_args.get("unix_stream")))
        return str(attempt())
    return int(_forked(make))


def _syscall(name: str, *args: Any) -> int:
    """The raw call by number: its errno, or 0 when it succeeded."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(seccomp.number(name)),
                          *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return 0 if result >= 0 else ctypes.get_errno()


class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def _prlimit_core(pid: Callable[[], int], write: bool = True) -> Attempt:
    """prlimit64 on RLIMIT_CORE of pid(): set to its current value (a no-op if let through), or only read."""
    def attempt() -> int:
        limit = _Rlimit(*resource.getrlimit(resource.RLIMIT_CORE))
        old = _Rlimit()
        return _syscall("prlimit64", pid(), resource.RLIMIT_CORE, ctypes.byref(limit) if write else None,
                        ctypes.byref(old))
    return attempt


def _same_affinity(pid: Callable[[], int]) -> Attempt:
    """sched_setaffinity of pid() to the mask it has (a no-op if let through)."""
    def attempt() -> int:
        bits = (ctypes.c_uint64 * 16)()
        for cpu in os.sched_getaffinity(pid()):
            bits[cpu // 64] |= 1 << (cpu % 64)
        return _syscall("sched_setaffinity", pid(), ctypes.sizeof(bits), ctypes.byref(bits))
    return attempt


def _socket(family: int, kind: int, pair: bool = False) -> Attempt:
    def attempt() -> int:
        try:
            socket.socketpair(family, kind) if pair else socket.socket(family, kind).close()
        except OSError as exc:
            return exc.errno or -1
        return 0
    return attempt


def _fcntl_setown(pid: Callable[[], int], cmd: int = seccomp.F_SETOWN) -> Attempt:
    def attempt() -> int:
        a, b = socket.socketpair()
        return _syscall("fcntl", a.fileno(), cmd, pid())
    return attempt


_NOBODY_UID = 4_000_000  # a uid no process has: a setpriority for it that got through would change nothing
_NO_PGRP = 1 << 30
_BAD_IOPRIO = 7 << 13    # an unknown class: EINVAL if let through
_REBOOT_MAGIC = (0xFEE1DEAD, 0x28121969)
_BAD_REBOOT_CMD = 0x0BADC0DE
_SYSLOG_SIZE_BUFFER = 10

# (name, attempt, filter arguments, errno with the filter); each is also tried without it (the control)
REAL: list[tuple[str, Attempt, dict[str, Any], int]] = [
    ("prlimit64 on the parent", _prlimit_core(os.getppid), {}, errno.EPERM),
    ("prlimit64 on itself by 0", _prlimit_core(lambda: 0), {}, 0),
    ("prlimit64 on itself by pid", _prlimit_core(os.getpid), {}, 0),
    ("prlimit64 read of the parent", _prlimit_core(os.getppid, write=False), {}, 0),
    ("sched_setaffinity on the parent", _same_affinity(os.getppid), {}, errno.EPERM),
    ("sched_setaffinity on itself", _same_affinity(lambda: 0), {}, 0),
    ("sched_setscheduler on the parent", lambda: _syscall("sched_setscheduler", os.getppid(), 99,
                                                          ctypes.byref(ctypes.c_int(0))), {}, errno.EPERM),
    ("setpriority on the parent", lambda: _syscall("setpriority", os.PRIO_PROCESS, os.getppid(),
                                                   os.getpriority(os.PRIO_PROCESS, os.getppid())), {}, errno.EPERM),
    ("setpriority on a user", lambda: _syscall("setpriority", os.PRIO_USER, _NOBODY_UID, 19), {}, errno.EPERM),
    ("setpriority on a process group", lambda: _syscall("setpriority", os.PRIO_PGRP, _NO_PGRP, 19), {}, errno.EPERM),
    ("setpriority on itself", lambda: _syscall("setpriority", os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0)),
     {}, 0),
    ("ioprio_set on the parent", lambda: _syscall("ioprio_set", 1, os.getppid(), _BAD_IOPRIO), {}, errno.EPERM),
    ("reboot", lambda: _syscall("reboot", *_REBOOT_MAGIC, _BAD_REBOOT_CMD, None), {}, errno.EPERM),
    ("syslog", lambda: _syscall("syslog", _SYSLOG_SIZE_BUFFER, None, 0), {}, errno.EPERM),
    ("swapoff", lambda: _syscall("swapoff", ctypes.c_char_p(b"/no/such/swapfile")), {}, errno.EPERM),
    ("socketpair unix datagram", _socket(socket.AF_UNIX, socket.SOCK_DGRAM, pair=True), {}, errno.EACCES),
    ("socketpair unix datagram, cloexec", _socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, pair=True),
     {}, errno.EACCES),
    ("socketpair unix seqpacket", _socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, pair=True), {}, errno.EACCES),
    ("socketpair unix stream", _socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK, pair=True), {}, 0),
    ("unix stream socket", _socket(socket.AF_UNIX, socket.SOCK_STREAM), {}, errno.EACCES),
    ("unix stream socket, namespaced", _socket(socket.AF_UNIX, socket.SOCK_STREAM), {"unix_stream": True}, 0),
    ("unix datagram socket, namespaced", _socket(socket.AF_UNIX, socket.SOCK_DGRAM), {"unix_stream": True},
     errno.EACCES),
    ("unix seqpacket socket, namespaced", _socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC),
     {"unix_stream": True}, errno.EACCES),
    ("tcp socket", _socket(socket.AF_INET, socket.SOCK_STREAM), {}, 0),
    ("F_SETOWN to the parent", _fcntl_setown(os.getppid), {"own_pid": SELF}, errno.EPERM),
    ("F_SETOWN to itself", _fcntl_setown(os.getpid), {"own_pid": SELF}, 0),
    ("F_SETOWN_EX", _fcntl_setown(lambda: 0, seccomp.F_SETOWN_EX), {"own_pid": SELF}, errno.EPERM),
    ("F_SETOWN to the parent, signals scoped by Landlock", _fcntl_setown(os.getppid), {}, 0),
]


@NEEDS_SECCOMP
@pytest.mark.parametrize(("name", "attempt", "filter_args", "wanted"), REAL, ids=[row[0] for row in REAL])
def test_the_filter_refuses_what_reaches_other_processes_and_the_host(name: str, attempt: Attempt,
                                                                      filter_args: dict[str, Any], wanted: int) -> None:
    got = _in_child(attempt, filter_args)
    assert got == wanted, f"{name}: errno {got}, wanted {wanted}"
    if wanted:  # the control: without the filter the same call is not refused this way
        assert _in_child(attempt, None) != wanted, f"{name}: refused even without the filter"


# ---- the program's verdicts on both architectures (seccomp.run) ---------------------------------------------
PID, HIGH = 4242, 1 << 32
SCHED_OTHER, SCHED_IDLE, RESET_ON_FORK = 0, 5, 0x40000000


def _verdicts(machine: str, **build: Any) -> Callable[..., int]:
    program = seccomp.program(machine, **build)
    return lambda name, *args: seccomp.run(program, seccomp.number(name, machine), args, machine=machine)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_call_that_changes_a_process_by_pid_names_only_itself(machine: str) -> None:
    for build in ({"self_pid": PID}, {"own_pid": PID}):
        verdict = _verdicts(machine, **build)
        for name in seccomp.BY_PID:
            arg1 = SCHED_IDLE if name == "sched_setscheduler" else 0
            assert [verdict(name, pid, arg1, 1) for pid in (0, PID, PID + 1, 1, -1)] == [ALLOW, ALLOW] + [EPERM] * 3, name
            assert verdict(name, PID | HIGH, arg1, 1) == ALLOW, name  # the kernel reads an int pid's low word
        # the default policy starves no one, and a thread sets it on itself by its tid (libzmq aborts if refused)
        assert [verdict("sched_setscheduler", pid, policy, 1) for pid, policy in (
            (PID + 7, SCHED_OTHER), (1, SCHED_OTHER | RESET_ON_FORK), (1, 1), (1, 2), (1, SCHED_IDLE))] == [
            ALLOW, ALLOW, EPERM, EPERM, EPERM]
        for name, which in seccomp.BY_WHO.items():
            assert [verdict(name, which, who, 0) for who in (0, PID, 1)] == [ALLOW, ALLOW, EPERM], name
            for other in {0, 1, 2, 3} - {which}:  # a process group, a user (root's: every process), or junk
                assert verdict(name, other, 0, 0) == EPERM, (name, other)
    only_zero = _verdicts(machine)
    assert [only_zero("prlimit64", pid, 0, 1) for pid in (0, PID)] == [ALLOW, EPERM]
    assert only_zero("prlimit64", 1, 0, 0, 8) == ALLOW  # a read of another's limit (new NULL) stays
    assert only_zero("prlimit64", 1, 0, HIGH, 8) == EPERM  # a pointer is 64 bits: not NULL


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_host_wide_calls_are_refused_whatever_their_arguments(machine: str) -> None:
    verdict = _verdicts(machine, own_pid=PID)
    for name in (*seccomp.HOST_WIDE, *seccomp.DENIED_ON.get(machine, ())):
        assert verdict(name, 0, 0, 0, 0) == EPERM, name
    assert {"reboot", "syslog", "swapoff", "swapon", "settimeofday", "clock_settime"} <= set(seccomp.HOST_WIDE)
    assert {"mount", "unshare", "setns", "bpf", "perf_event_open", "userfaultfd", "open_tree_attr"} <= set(seccomp.DENIED)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_unix_sockets_are_streams_only_and_named_ones_only_when_namespaced(machine: str) -> None:
    eacces = seccomp.RET_ERRNO | errno.EACCES
    flags = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    for unix_stream in (False, True):
        verdict = _verdicts(machine, unix_stream=unix_stream)
        assert verdict("socketpair", socket.AF_UNIX, socket.SOCK_STREAM | flags, 0) == ALLOW
        for kind in (socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM | flags, socket.SOCK_STREAM | HIGH):
            assert verdict("socketpair", socket.AF_UNIX, kind, 0) == eacces, kind
            assert verdict("socket", socket.AF_UNIX, kind, 0) == eacces, kind
        assert verdict("socket", socket.AF_UNIX, socket.SOCK_STREAM | flags, 0) == (ALLOW if unix_stream else eacces)
        assert verdict("socket", socket.AF_INET, socket.SOCK_STREAM, 0) == ALLOW
        assert verdict("socket", socket.AF_INET, socket.SOCK_DGRAM, 0) == eacces


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_sigio_owner_is_scoped_with_the_signals(machine: str) -> None:
    scoped_here = _verdicts(machine, own_pid=PID)
    assert [scoped_here("fcntl", 3, seccomp.F_SETOWN, pid) for pid in (0, PID, 1, -PID)] == [ALLOW, ALLOW, EPERM, EPERM]
    assert scoped_here("fcntl", 3, seccomp.F_SETOWN_EX, 0) == EPERM
    assert scoped_here("fcntl", 3, 4, 0o4000) == ALLOW  # F_SETFL
    assert _verdicts(machine)("fcntl", 3, seccomp.F_SETOWN, 1) == ALLOW  # Landlock's signal scope covers SIGIO


# ---- the launcher's capability drop --------------------------------------------------------------------------
_CAP_SETS = ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh")


def _caps(status: str) -> dict[str, int]:
    return {k: int(v, 16) for k, _, v in (line.partition(":") for line in status.splitlines()) if k in _CAP_SETS}


def _drop_and_exec(before: Callable[[], object] = lambda: None) -> Callable[[], str]:
    """A child's job: before(), launch.drop_capabilities(), then its own sets and those of an execve'd cat."""
    def make() -> str:
        before()
        done = launch.drop_capabilities()
        with open("/proc/self/status", encoding="ascii") as f:
            own = f.read()
        execed = subprocess.run(["/bin/cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
        return json.dumps({"done": done, "own": _caps(own), "execed": _caps(execed),
                           "no_new_privs": "NoNewPrivs:\t1" in own})
    return make


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capabilities are Linux's")
def test_the_launcher_gives_up_every_capability_for_good() -> None:
    got = json.loads(_forked(_drop_and_exec()))
    assert got["no_new_privs"]
    assert got["own"]["CapEff"] == got["own"]["CapPrm"] == got["own"]["CapAmb"] == got["own"]["CapInh"] == 0
    assert got["execed"]["CapEff"] == got["execed"]["CapPrm"] == 0  # root's execve regains nothing
    with open("/proc/self/status", encoding="ascii") as f:
        mine = _caps(f.read())
    if mine["CapEff"] >> 8 & 1:  # CAP_SETPCAP, as root here: the bounding set goes and the securebits lock
        assert got["own"]["CapBnd"] == got["execed"]["CapBnd"] == 0
        assert got["done"]["bounding_dropped"] == bin(mine["CapBnd"]).count("1")
        assert got["done"]["securebits"] & launch.SECUREBITS == launch.SECUREBITS
    else:
        assert got["done"]["securebits"] is None and got["done"]["bounding_dropped"] == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capabilities are Linux's")
def test_without_capabilities_the_drop_skips_what_needs_them() -> None:
    def lose_them() -> None:
        if os.geteuid() == 0:
            os.setuid(65534)  # a uid change without KEEP_CAPS clears every set but the bounding one
    got = json.loads(_forked(_drop_and_exec(lose_them)))
    assert got["done"]["bounding_dropped"] == 0 and got["done"]["securebits"] is None
    assert got["own"]["CapEff"] == got["execed"]["CapEff"] == 0 and got["no_new_privs"]


def test_seal_lets_unix_stream_sockets_through_only_for_the_namespaced_launcher(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(seccomp, "available", lambda: True)
    monkeypatch.setattr(seccomp, "apply", lambda **kw: calls.append(kw))
    for flag, wanted in (("1", True), ("0", False), (None, False)):
        monkeypatch.setattr(launch, "applied", {"launched": True, "landlock": 7})
        if flag is None:
            monkeypatch.delenv(launch.NAMESPACED_ENV, raising=False)
        else:
            monkeypatch.setenv(launch.NAMESPACED_ENV, flag)
        assert launch.seal()["unix_stream"] is wanted
        assert calls.pop() == {"own_pid": None, "unix_stream": wanted}


# ---- through the product's path -------------------------------------------------------------------------------
_ATTACKS = [
    ("prlimit the host", "import os, resource\nresource.prlimit(os.getppid(), resource.RLIMIT_CPU, (1, 1))"),
    ("reboot", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               f"if libc.reboot({_BAD_REBOOT_CMD}) != 0:\n    raise OSError(ctypes.get_errno(), 'reboot')"),
    ("syslog", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               f"if libc.klogctl({_SYSLOG_SIZE_BUFFER}, None, 0) < 0:\n    raise OSError(ctypes.get_errno(), 'syslog')"),
]
_CAPS = "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff')][0])"
_HOST = '''
import json, resource, sys
from rlmnb import RLM
from rlmnb.events import CodeExecuted
from rlmnb.testing import ScriptedLM

replies = json.loads(sys.argv[1])
before = resource.getrlimit(resource.RLIMIT_CPU)
result = RLM(ScriptedLM(replies), ScriptedLM(["x"] * 5), sandbox="kernel", max_iterations=len(replies),
             timeout=60).run("q", text="hi")
steps = [{"error_type": e.error_type, "stdout": e.stdout, "restarted": e.restarted}
         for e in result.trajectory.events if isinstance(e, CodeExecuted)]
print(json.dumps({"status": result.status, "answer": result.answer, "steps": steps,
                  "cpu_limit_kept": resource.getrlimit(resource.RLIMIT_CPU) == before}))
'''


@pytest.mark.integration
@pytest.mark.skipif(confinement.support()[1] != "", reason="no Landlock ABI 4 + seccomp here")
def test_a_scripted_root_cannot_starve_reboot_or_read_the_host_and_the_run_carries_on(tmp_path: Path) -> None:
    """The second layer alone must stop these (the namespaces stop them too where they exist)."""
    replies = [f"```python\n{snippet}\n```" for _, snippet in _ATTACKS]
    replies += [f"```python\n{_CAPS}\n```", "```python\nsubmit('carried on')\n```"]
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_HOST), json.dumps(replies)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a host killed by its CPU limit ends with SIGXCPU/SIGKILL
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (got["status"], got["answer"]) == ("submitted", "carried on")
    assert got["cpu_limit_kept"]
    steps = got["steps"]
    assert len(steps) == len(_ATTACKS) + 2
    for (name, _), step in zip(_ATTACKS, steps, strict=False):
        assert step["error_type"] == "PermissionError" and not step["restarted"], (name, step)
    assert steps[len(_ATTACKS)]["error_type"] is None
    assert int(steps[len(_ATTACKS)]["stdout"].strip(), 16) == 0  # CapEff: no capability left
