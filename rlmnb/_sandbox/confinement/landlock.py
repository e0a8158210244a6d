"""Landlock, Linux's unprivileged access control, through its three system calls (standard library only).

Why this and not a package: PyPI has no maintained binding that covers network rules (ABI 4) and
scoping (ABI 6), and the kernel interface is three syscalls and three small structs. A process that
calls `restrict_self` can, from then on, open only the paths under its rules (with the rights each
rule grants), connect and bind only to the TCP ports under its rules, and (ABI 6) neither signal
nor reach abstract unix sockets of processes outside its domain. Landlock also refuses ptrace, and so
`/proc/<pid>/environ` and `/proc/<pid>/mem`, of every process outside the domain. A ruleset only
narrows, is inherited by every child, and binds the calling thread only: call it before the process
starts threads (see launch.py).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Iterable

# syscall numbers: the same on every architecture that has Landlock (the unified table)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a rule on a file may carry
READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER
         | TRUNCATE)


def _fs_rights(abi: int) -> int:
    """Every filesystem right this ABI knows: what the ruleset handles (denies unless a rule allows)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def handled(abi: int) -> tuple[int, int, int, int]:
    """What a ruleset for this ABI handles: (filesystem rights, network rights, scopes, struct size).

    Only what the ABI knows: ABI 1-3 have no network field (TCP unrestricted), ABI < 6 no scope field
    (signals and abstract unix sockets unscoped); a kernel refuses a ruleset naming more."""
    net = (BIND_TCP | CONNECT_TCP) if abi >= 4 else 0
    scoped = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    return _fs_rights(abi), net, scoped, size


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, e.g. not Linux, too old, or disabled at boot)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64", "riscv64"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(abi), 0)


class LandlockError(OSError):
    """A Landlock call failed: the process is not confined."""


def restrict_self(*, paths: Iterable[tuple[str, int]], connect_ports: Iterable[int] = (),
                  bind_ports: Iterable[int] = (), abi: int | None = None) -> int:
    """Confine this thread (and every thread and process it starts later) to the given rules.

    Args:
        paths: (path, rights) pairs; a path that does not exist is skipped; rights on a file are cut to
            FILE_RIGHTS. Everything else on the filesystem is refused.
        connect_ports, bind_ports: TCP ports this process may connect to / bind (ABI >= 4; else TCP is
            not restricted). Every other port is refused.
        abi: the ABI to use (default: the kernel's).
    Returns the ABI used. Raises LandlockError when the kernel refuses (the process stays unconfined).
    """
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError("Landlock is not available on this system")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    fs, net, scoped, size = handled(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=net, scoped=scoped)
    ruleset = libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:

        for path, rights in paths:
            _add_path(libc, int(ruleset), path, rights & fs)
        if abi >= 4:
            ports: dict[int, int] = {}
            for port in connect_ports:
                ports[int(port)] = ports.get(int(port), 0) | CONNECT_TCP
            for port in bind_ports:
                ports[int(port)] = ports.get(int(port), 0) | BIND_TCP
            for port, rights in sorted(ports.items()):
                rule = _NetPortAttr(allowed_access=rights, port=port)
                _check(libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_NET_PORT),
                                    ctypes.byref(rule), ctypes.c_uint32(0)), f"port {port}")
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(int(ruleset))
    return abi


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that is not there needs no rule
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        if not rights:
            return
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _check(libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                            ctypes.byref(rule), ctypes.c_uint32(0)), path)
    finally:
        os.close(fd)


def _check(result: int, what: str) -> None:
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"Landlock refused {what}: {os.strerror(errno)}")


__all__ = ["BIND_TCP", "CONNECT_TCP", "EXECUTE", "FILE_RIGHTS", "READ", "READ_EXEC", "SCOPE_ABSTRACT_UNIX",
           "SCOPE_SIGNAL", "WRITE", "LandlockError", "abi_version", "handled", "restrict_self"]
