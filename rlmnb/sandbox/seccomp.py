"""A seccomp filter for what Landlock cannot see: sockets other than TCP, listening, and process access.

Landlock (landlock.py) rules TCP connect and bind by port, files by path, and signals; it cannot see
UDP, unix-domain sockets reached by path (a Docker or D-Bus socket is a way out of any sandbox), raw
or netlink sockets, `listen()` on a socket the kernel bound on its own, io_uring (whose operations a
seccomp filter cannot inspect), or ptrace-style access that root's CAP_SYS_PTRACE lets through. This
filter refuses all of them with EACCES/EPERM, so code sees an ordinary "permission denied".

It is applied with SECCOMP_FILTER_FLAG_TSYNC, to every thread of the process at once, after the
kernel has bound its own ZMQ sockets and before any model code runs. Standard library only: a
classic BPF program built with ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

# per architecture: audit arch, and the numbers of the syscalls we filter
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {"socket": 41, "listen": 50, "ptrace": 101, "process_vm_readv": 310,
                            "process_vm_writev": 311, "kcmp": 312, "seccomp": 317, "io_uring_setup": 425,
                            "io_uring_enter": 426, "io_uring_register": 427, "pidfd_getfd": 438}),
    "aarch64": (0xC00000B7, {"socket": 198, "listen": 201, "ptrace": 117, "process_vm_readv": 270,
                             "process_vm_writev": 271, "kcmp": 272, "seccomp": 277, "io_uring_setup": 425,
                             "io_uring_enter": 426, "io_uring_register": 427, "pidfd_getfd": 438}),
}
_DENIED = ("listen", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "io_uring_setup", "io_uring_enter",
           "io_uring_register", "pidfd_getfd")
_X32_BIT = 0x40000000
_AF_INET, _AF_INET6, _SOCK_STREAM, _SOCK_TYPE_MASK = 2, 10, 1, 0xF
_LD_W_ABS, _JEQ_K, _JGE_K, _AND_K, _RET_K = 0x20, 0x15, 0x35, 0x54, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EACCES = 0x00050000 | errno.EACCES
_RET_EPERM = 0x00050000 | errno.EPERM
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24  # struct seccomp_data (args little endian, low word)
_SET_MODE_FILTER, _FLAG_TSYNC, _FLAG_SPEC_ALLOW = 1, 1, 4
_PR_SET_NO_NEW_PRIVS = 38


def available() -> bool:
    """True on Linux on an architecture whose syscall numbers this module knows."""
    return sys.platform.startswith("linux") and platform.machine() in _ARCHES


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF program as (code, jt, jf, k) instructions: sockets only AF_INET/AF_INET6 streams; the
    calls in _DENIED refused; every other call (and other architectures' calls) as before."""
    arch, nrs = _ARCHES[machine or platform.machine()]
    insns: list[tuple[int, int, int, int]] = []
    denied = [nrs[name] for name in _DENIED]
    # layout: 0 ld arch | 1 jeq arch | 2 ret EPERM | 3 ld nr | 4 jge x32 | 5 jeq socket | deny checks | allow |
    #         socket: ld arg0 | jeq inet | jeq inet6 | ret EACCES | ld arg1 | and mask | jeq stream | ret EACCES | allow
    insns.append((_LD_W_ABS, 0, 0, _OFF_ARCH))
    insns.append((_JEQ_K, 1, 0, arch))
    insns.append((_RET_K, 0, 0, _RET_EPERM))
    insns.append((_LD_W_ABS, 0, 0, _OFF_NR))
    n_deny = len(denied)
    # after insn 4 (x32), insn 5 (socket) and n_deny checks comes "ret allow", then "ret EPERM", then the socket block
    allow_at = 6 + n_deny
    eperm_at = allow_at + 1
    socket_at = eperm_at + 1
    insns.append((_JGE_K, eperm_at - 5, 0, _X32_BIT))
    insns.append((_JEQ_K, socket_at - 6, 0, nrs["socket"]))
    for i, nr in enumerate(denied):
        here = 6 + i
        insns.append((_JEQ_K, eperm_at - here - 1, 0, nr))
    insns.append((_RET_K, 0, 0, _RET_ALLOW))
    insns.append((_RET_K, 0, 0, _RET_EPERM))
    # socket block (socket_at): domain, then type
    insns.append((_LD_W_ABS, 0, 0, _OFF_ARG0))
    insns.append((_JEQ_K, 2, 0, _AF_INET))    # -> ld arg1
    insns.append((_JEQ_K, 1, 0, _AF_INET6))   # -> ld arg1
    insns.append((_RET_K, 0, 0, _RET_EACCES))
    insns.append((_LD_W_ABS, 0, 0, _OFF_ARG1))
    insns.append((_AND_K, 0, 0, _SOCK_TYPE_MASK))
    insns.append((_JEQ_K, 1, 0, _SOCK_STREAM))
    insns.append((_RET_K, 0, 0, _RET_EACCES))
    insns.append((_RET_K, 0, 0, _RET_ALLOW))
    return insns


class SeccompError(OSError):
    """The filter could not be installed: the process is not filtered."""


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply() -> None:
    """Install the filter on every thread of this process (it can never be removed)."""
    if not available():
        raise SeccompError("seccomp filtering is not available on this platform")
    insns = program()
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


__all__ = ["SeccompError", "apply", "available", "program"]
