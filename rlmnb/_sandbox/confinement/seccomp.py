"""A seccomp filter for what Landlock cannot see: other protocols, other processes, the host's kernel.

Landlock (landlock.py) rules files by path, TCP connect and bind by port, and (ABI 6) signals. This
filter is the other half. The contract, per system call (x86_64 and aarch64; any other architecture's
calls, x32 included, are refused):

Allowed only with arguments from a list (anything else refused with EACCES for sockets, EPERM otherwise):
- `socket`: family AF_INET or AF_INET6 (and AF_UNIX when built with `unix_stream`), type SOCK_STREAM
  (with SOCK_NONBLOCK/SOCK_CLOEXEC), protocol 0 or IPPROTO_TCP; each argument's high word must be 0.
  So no UDP, raw, netlink, packet, MPTCP (262) or SCTP (132) socket (Landlock's port rules see plain
  TCP only), and no unix datagram or seqpacket socket ever (one `sendto(path)` reaches any pathname
  datagram socket on the machine). `unix_stream` is for a sandbox in its own mount namespace, which
  reaches its broker over a unix socket and sees no other socket file.
- `socketpair`: AF_UNIX, SOCK_STREAM only (an unnamed connected pair reaches no one; asyncio and
  multiprocessing use it); a datagram pair could `sendto` any path.
- `sendto` (arg 3), `sendmsg` (arg 2), `sendmmsg` (arg 3): flags without MSG_FASTOPEN, which connects
  without Landlock's connect check.
- `setsockopt`: not TCP_FASTOPEN (23) nor TCP_FASTOPEN_CONNECT (30) at level IPPROTO_TCP.
- `clone`: no CLONE_NEW* namespace flag. `clone3` (whose flags sit in memory a filter cannot read)
  answers ENOSYS, so the C library falls back to `clone`.
- The calls that change another process named by its pid (EPERM unless the pid is 0, which names the
  caller, or `self_pid`, the sandbox's own pid): `prlimit64` (arg 0; a read, new limit NULL in arg 2,
  stays allowed), `sched_setaffinity`, `sched_setscheduler` (but to the default policy SCHED_OTHER, which
  starves no one and which threads set on themselves by their tid), `sched_setparam`, `sched_setattr`,
  `migrate_pages`, `move_pages` (arg 0); `setpriority` and `ioprio_set` only with `which` (arg 0)
  naming one process (PRIO_PROCESS, IOPRIO_WHO_PROCESS: a process group or a user, root's being
  every process on the machine, is refused) and `who` (arg 1) 0 or `self_pid`. Each pid is an int the
  kernel truncates, so its low word is compared. Reads of another process (sched_get*, getpriority,
  ioprio_get, getpgid) stay allowed: a filter cannot tell a forked worker's own pid from a host's, and
  libraries ask for their own (`psutil.Process().cpu_affinity()` when Dask starts).
- `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo` (when built with `own_pid`, i.e.
  where Landlock cannot scope signals): the target (arg 0, pid or thread-group id) must be the
  sandbox's own pid exactly, high word 0; so kill(0), kill(-1) and process groups are refused too.
  With `own_pid`, `fcntl(F_SETOWN)` (the process that gets SIGIO, or any signal F_SETSIG names) must
  also be 0 or `own_pid`, and `F_SETOWN_EX` (its target in memory) is refused.

Refused outright (EPERM), DENIED: `listen`; `ptrace`, `process_vm_readv`, `process_vm_writev`, `kcmp`,
`process_madvise`, `process_mrelease`, `pidfd_open`, `pidfd_getfd`, `pidfd_send_signal` (other
processes); `io_uring_setup`, `io_uring_enter`, `io_uring_register` (operations a filter cannot see);
`userfaultfd`, `bpf`, `perf_event_open`, `fanotify_init`; `keyctl`, `add_key`, `request_key`; `mount`,
`umount2`, `pivot_root`, `chroot`, `open_tree`, `open_tree_attr`, `move_mount`, `fsopen`, `fsconfig`,
`fsmount`, `fspick`, `mount_setattr`, `unshare`, `setns`; `name_to_handle_at`, `open_by_handle_at` (a
path around Landlock); `kexec_load`, `kexec_file_load`, `init_module`, `finit_module`, `delete_module`;
and the host-wide calls a root user could make (launch.py drops the capabilities too; this holds where
it could not): `reboot`, `syslog` (the kernel log needs no capability where `dmesg_restrict` is 0),
`swapon`, `swapoff`, `acct`, `settimeofday`, `clock_settime`, `clock_adjtime`, `adjtimex`, `sethostname`,
`setdomainname`, `quotactl`, `quotactl_fd`, `vhangup`, `lookup_dcookie`; on x86_64 also `iopl`, `ioperm`.

Every other call is allowed: Python and its libraries use hundreds (and new ones with each C library),
so the allow-list is by argument on the calls that open a channel or name a process, and a refusal
list for the rest. Arguments are compared as the kernel reads them: 32-bit arguments by their low word
(the kernel truncates), and the ones where a high word could change meaning (socket, kill targets,
prlimit's new-limit pointer) must have it 0.

It is applied with SECCOMP_FILTER_FLAG_TSYNC, to every thread of the process at once, after the
kernel has bound its own ZMQ sockets and before any model code runs. Standard library only: a
classic BPF program built with ctypes. See docs/decisions/seccomp-filter.md for the measurements.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Sequence

# per architecture: audit arch, and the numbers of the syscalls we filter (from the kernel's unistd tables)
_UNIFIED = {"pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
            "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
            "quotactl_fd": 443, "process_mrelease": 448, "open_tree_attr": 467}
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "listen": 50, "sendto": 44, "sendmsg": 46, "sendmmsg": 307,
        "setsockopt": 54, "clone": 56, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
        "userfaultfd": 323, "bpf": 321, "perf_event_open": 298, "fanotify_init": 300, "keyctl": 250,
        "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "name_to_handle_at": 303, "open_by_handle_at": 304, "kexec_load": 246,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "seccomp": 317, "fcntl": 72,
        "prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
        "sched_setattr": 314, "migrate_pages": 256, "move_pages": 279, "setpriority": 141, "ioprio_set": 251,
        "reboot": 169, "syslog": 103, "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170, "setdomainname": 171,
        "quotactl": 179, "vhangup": 153, "lookup_dcookie": 212, "kexec_file_load": 320, "iopl": 172,
        "ioperm": 173, **_UNIFIED}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "listen": 201, "sendto": 206, "sendmsg": 211, "sendmmsg": 269,
        "setsockopt": 208, "clone": 220, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
        "userfaultfd": 282, "bpf": 280, "perf_event_open": 241, "fanotify_init": 262, "keyctl": 219,
        "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "name_to_handle_at": 264, "open_by_handle_at": 265, "kexec_load": 104,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "seccomp": 277, "fcntl": 25,
        "prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
        "sched_setattr": 274, "migrate_pages": 238, "move_pages": 239, "setpriority": 140, "ioprio_set": 30,
        "reboot": 142, "syslog": 116, "swapon": 224, "swapoff": 225, "acct": 89, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "sethostname": 161, "setdomainname": 162,
        "quotactl": 60, "vhangup": 58, "lookup_dcookie": 18, "kexec_file_load": 294, **_UNIFIED}),
}
HOST_WIDE = ("reboot", "syslog", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
             "adjtimex", "sethostname", "setdomainname", "quotactl", "quotactl_fd", "vhangup", "lookup_dcookie",
             "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")
DENIED = ("listen", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "process_madvise", "process_mrelease",
          "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "io_uring_setup", "io_uring_enter", "io_uring_register",
          "userfaultfd", "bpf", "perf_event_open", "fanotify_init", "keyctl", "add_key", "request_key", "mount",
          "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr", "move_mount", "fsopen", "fsconfig",
          "fsmount", "fspick", "mount_setattr", "unshare", "setns", "name_to_handle_at", "open_by_handle_at",
          *HOST_WIDE)
DENIED_ON = {"x86_64": ("iopl", "ioperm")}  # refused outright too, on the architectures that have them
BY_PID = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "migrate_pages",
          "move_pages")  # arg 0 is the pid of the process they change
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
BY_WHO = {"setpriority": PRIO_PROCESS, "ioprio_set": IOPRIO_WHO_PROCESS}  # (which, who): `which` value for one process
SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_X32_BIT = 0x40000000
AF_UNIX, AF_INET, AF_INET6, SOCK_STREAM, IPPROTO_TCP = 1, 2, 10, 1, 6
_SOCK_FLAGS = 0x800 | 0x80000  # SOCK_NONBLOCK | SOCK_CLOEXEC (the same on both architectures)
MSG_FASTOPEN = 0x20000000
TCP_FASTOPEN, TCP_FASTOPEN_CONNECT = 23, 30
F_SETOWN, F_SETOWN_EX = 8, 15
SCHED_OTHER, SCHED_RESET_ON_FORK = 0, 0x40000000
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000  # CLONE_NEWNS .. CLONE_NEWNET
# classic BPF opcodes
LD_W_ABS, JEQ_K, JGE_K, JSET_K, AND_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH = 0, 4
_SET_MODE_FILTER, _FLAG_TSYNC, _FLAG_SPEC_ALLOW = 1, 1, 4
_PR_SET_NO_NEW_PRIVS = 38

Insn = tuple[int, int, int, int]


def available() -> bool:
    """True on Linux on an architecture whose syscall numbers this module knows."""
    return sys.platform.startswith("linux") and platform.machine() in _ARCHES


def _lo(arg: int) -> int:
    return 16 + 8 * arg  # struct seccomp_data: nr, arch, ip (8), args[6] (u64, little endian)


def _hi(arg: int) -> int:
    return 16 + 8 * arg + 4


class _Assembler:
    """Classic BPF with named forward labels (jumps are resolved when the program is finished; a backward
    or too long jump is a ValueError, never a wrong program)."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def finish(self) -> list[Insn]:
        out: list[Insn] = []
        for at, (code, jt, jf, k) in enumerate(self.code):
            jumps = [j if isinstance(j, int) else self.labels[j] - at - 1 for j in (jt, jf)]
            if not all(0 <= j <= 255 for j in jumps):
                raise ValueError(f"BPF jump out of range at {at}: {jumps}")
            out.append((code, jumps[0], jumps[1], k))
        return out


def program(machine: str | None = None, *, own_pid: int | None = None, self_pid: int | None = None,
            unix_stream: bool = False) -> list[Insn]:
    """The BPF program as (code, jt, jf, k) instructions (the contract is the module docstring).

    Args:
        machine: "x86_64" or "aarch64" (default: this machine).
        own_pid: when given, signals (and F_SETOWN) may go to this pid only; None leaves signals to
            Landlock's scope.
        self_pid: the pid, besides 0, by which the sandbox may change itself with the BY_PID and BY_WHO
            calls (default: own_pid; None and no own_pid: only 0).
        unix_stream: also allow socket(AF_UNIX, SOCK_STREAM) (a sandbox in its own mount namespace).
    """
    machine = machine or platform.machine()
    arch, nrs = _ARCHES[machine]
    self_pid = own_pid if self_pid is None else self_pid
    a = _Assembler()
    a.op(LD_W_ABS, _OFF_ARCH)
    a.op(JEQ_K, arch, 0, "eperm")
    a.op(LD_W_ABS, _OFF_NR)
    a.op(JGE_K, _X32_BIT, "eperm", 0)
    dispatch: list[tuple[str, str]] = [("socket", "socket"), ("socketpair", "socketpair"), ("sendto", "flags3"),
                                       ("sendmsg", "flags2"), ("sendmmsg", "flags3"), ("setsockopt", "setsockopt"),
                                       ("clone", "clone"), ("clone3", "enosys"), ("prlimit64", "prlimit")]
    dispatch += [(name, "self_arg0") for name in BY_PID if name not in ("prlimit64", "sched_setscheduler")]
    dispatch += [("sched_setscheduler", "setscheduler")]
    dispatch += [(name, name) for name in BY_WHO]
    if own_pid is not None:
        dispatch += [(name, "own_arg0") for name in SIGNALS] + [("fcntl", "fcntl")]
    dispatch += [(name, "eperm") for name in DENIED + DENIED_ON.get(machine, ())]
    for name, target in dispatch:
        a.op(JEQ_K, nrs[name], target, 0)
    a.op(RET_K, RET_ALLOW)  # every call not dispatched above
    families = (AF_INET, AF_INET6, AF_UNIX) if unix_stream else (AF_INET, AF_INET6)
    for call, allowed in (("socket", families), ("socketpair", (AF_UNIX,))):
        # socket/socketpair(family, type, protocol): each high word 0, each low word from the list
        a.label(call)
        for arg in (0, 1, 2):
            a.op(LD_W_ABS, _hi(arg))
            a.op(JEQ_K, 0, 0, "eacces")
        a.op(LD_W_ABS, _lo(0))
        for at, family in enumerate(allowed):
            a.op(JEQ_K, family, "socket_type", "eacces" if at == len(allowed) - 1 else 0)
    a.label("socket_type")
    a.op(LD_W_ABS, _lo(1))
    a.op(AND_K, 0xFFFFFFFF & ~_SOCK_FLAGS)
    a.op(JEQ_K, SOCK_STREAM, 0, "eacces")
    a.op(LD_W_ABS, _lo(2))
    a.op(JEQ_K, 0, "allow", 0)
    a.op(JEQ_K, IPPROTO_TCP, "allow", "eacces")
    for arg in (2, 3):  # the send calls' flags (unsigned int: the kernel reads the low word)
        a.label(f"flags{arg}")
        a.op(LD_W_ABS, _lo(arg))
        a.op(JSET_K, MSG_FASTOPEN, "eacces", "allow")
    a.label("setsockopt")
    a.op(LD_W_ABS, _lo(1))
    a.op(JEQ_K, IPPROTO_TCP, 0, "allow")
    a.op(LD_W_ABS, _lo(2))
    a.op(JEQ_K, TCP_FASTOPEN, "eacces", 0)
    a.op(JEQ_K, TCP_FASTOPEN_CONNECT, "eacces", "allow")
    a.label("clone")
    a.op(LD_W_ABS, _lo(0))
    a.op(JSET_K, _CLONE_NEW, "eperm", "allow")
    if own_pid is not None:
        a.label("own_arg0")  # a signal's target: exactly own_pid, high word 0
        a.op(LD_W_ABS, _hi(0))
        a.op(JEQ_K, 0, 0, "eperm")
        a.op(LD_W_ABS, _lo(0))
        a.op(JEQ_K, own_pid, "allow", "eperm")
        a.label("fcntl")
        a.op(LD_W_ABS, _lo(1))
        a.op(JEQ_K, F_SETOWN, "self_arg2", 0)
        a.op(JEQ_K, F_SETOWN_EX, "eperm", "allow")
    a.label("prlimit")  # prlimit64(pid, resource, new, old): a read (new NULL) of anyone, a change of itself
    a.op(LD_W_ABS, _hi(2))
    a.op(JEQ_K, 0, 0, "self_arg0")
    a.op(LD_W_ABS, _lo(2))
    a.op(JEQ_K, 0, "allow", "self_arg0")
    # sched_setscheduler(pid, policy, param): the default policy (SCHED_OTHER, priority 0) starves no one, and a
    # thread sets it on itself by its own tid (libzmq's I/O threads do, and abort when refused); any other
    # policy (SCHED_IDLE, real-time) only on itself
    a.label("setscheduler")
    a.op(LD_W_ABS, _lo(1))
    a.op(AND_K, 0xFFFFFFFF & ~SCHED_RESET_ON_FORK)
    a.op(JEQ_K, SCHED_OTHER, "allow", "self_arg0")
    for name, which in BY_WHO.items():
        a.label(name)
        a.op(LD_W_ABS, _lo(0))
        a.op(JEQ_K, which, "self_arg1", "eperm")
    for arg in (0, 1, 2):  # a pid the kernel truncates to int: 0 (the caller) or self_pid
        a.label(f"self_arg{arg}")
        a.op(LD_W_ABS, _lo(arg))
        if self_pid is None:
            a.op(JEQ_K, 0, "allow", "eperm")
        else:
            a.op(JEQ_K, 0, "allow", 0)
            a.op(JEQ_K, self_pid, "allow", "eperm")
    for name, action in (("allow", RET_ALLOW), ("eperm", RET_ERRNO | errno.EPERM),
                         ("eacces", RET_ERRNO | errno.EACCES), ("enosys", RET_ERRNO | errno.ENOSYS)):
        a.label(name)  # the verdicts last: classic BPF jumps forward only
        a.op(RET_K, action)
    return a.finish()


def run(insns: Sequence[Insn], nr: int, args: Sequence[int] = (), arch: int | None = None,
        machine: str | None = None) -> int:
    """Evaluate the program on one call as the kernel would (for tests): the action it returns.

    `args` are 64-bit values (a negative one is taken as the kernel sees it, two's complement)."""
    data = struct.pack("<iI8x6Q", nr, _ARCHES[machine or platform.machine()][0] if arch is None else arch,
                       *[(list(args) + [0] * 6)[i] & 0xFFFFFFFFFFFFFFFF for i in range(6)])
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == AND_K:
            acc &= k
        elif code == RET_K:
            return k
        elif code in (JEQ_K, JGE_K, JSET_K):
            hit = acc == k if code == JEQ_K else acc >= k if code == JGE_K else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise ValueError(f"unknown BPF opcode {code:#x}")


def number(name: str, machine: str | None = None) -> int:
    """The syscall number of `name` on `machine` (default: this one)."""
    return _ARCHES[machine or platform.machine()][1][name]


class SeccompError(OSError):
    """The filter could not be installed: the process is not filtered."""


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply(*, own_pid: int | None = None, unix_stream: bool = False) -> None:
    """Install the filter on every thread of this process (it can never be removed).

    Args:
        own_pid: filter signals to this pid only (pass os.getpid() where Landlock cannot scope signals).
        unix_stream: allow socket(AF_UNIX, SOCK_STREAM); only for a sandbox in its own mount namespace,
            where the broker's is the only socket file in sight.
    The calls that change a process by pid accept 0 and this process's pid (os.getpid() now).
    Raises SeccompError when the kernel refuses (the process is then not filtered).
    """
    if not available():
        raise SeccompError("seccomp filtering is not available on this platform")
    insns = program(own_pid=own_pid, self_pid=os.getpid(), unix_stream=unix_stream)
    raw = b"".join(struct.pack("=HBBI", *insn) for insn in insns)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    prog = _Fprog(len(insns), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    nr = _ARCHES[platform.machine()][1]["seccomp"]
    # SPEC_ALLOW: no forced Spectre-v4 mitigation (it can slow numeric code; nothing in the kernel process
    # is hidden from the code it runs anyway); kernels before 4.17 do not know the flag
    for flags in (_FLAG_TSYNC | _FLAG_SPEC_ALLOW, _FLAG_TSYNC):
        result = libc.syscall(ctypes.c_long(nr), ctypes.c_uint(_SET_MODE_FILTER), ctypes.c_uint(flags),
                              ctypes.byref(prog))
        if result == 0 or ctypes.get_errno() != errno.EINVAL:
            break
    if result != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp(SET_MODE_FILTER, TSYNC) failed (result {result}, errno {err})")


__all__ = ["BY_PID", "BY_WHO", "DENIED", "DENIED_ON", "HOST_WIDE", "MSG_FASTOPEN", "RET_ALLOW", "RET_ERRNO", "SIGNALS",
           "SeccompError", "apply", "available", "number", "program", "run"]
