"""What a confined sandbox kernel may touch, and whether this system can confine it at all (host side).

Landlock rules files, TCP ports and (from ABI 6) signals; seccomp.py refuses what Landlock cannot see.
`auto` takes what the kernel offers, guard by guard (`plan`), and records what does not hold in the
run's `Confinement`; `required` demands every guard. Why Landlock and not bubblewrap:
docs/decisions/landlock-not-bubblewrap.md.

The policy itself: read (and execute) Python, its libraries and the system's shared files; read the
run's inputs (`Field.read_paths`, a file or folder input's path) and what the user allows
(`allow_paths`); write only the kernel's own temp, runtime and IPython directories, its transfer
directory (tables it hands back cross as files there) and `allow_paths` marked `:rw`; connect to the broker, to `Field.endpoints` and to `allow_network`;
bind and listen nowhere; see only its own `/proc/self`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import site
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmnb._ground.errors import ConfigError
from rlmnb._sandbox.confinement import landlock, namespaces, seccomp, tasks

if TYPE_CHECKING:
    from rlmnb.inputs import Field

MODES = ("auto", "required", "off")
_SYSTEM_CODE = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "ssl", "pki", "ca-certificates",
        "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "passwd", "group", "protocols",
        "services", "mime.types", "os-release", "fonts", "locale.alias", "matplotlibrc")
_SHARED_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/sys/devices/system/cpu",
                 "/sys/fs/cgroup", "/dev/urandom", "/dev/random", "/dev/zero")
_DEVICES_RW = ("/dev/null", "/dev/full")


# ---- the user's widenings ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AllowedPath:
    """One `allow_paths` entry: "/data" or "/data:ro" (read-only), "/scratch:rw" (read and write)."""

    path: str
    writable: bool = False

    @classmethod
    def parse(cls, spec: str | os.PathLike[str]) -> AllowedPath:
        text = os.fspath(spec)
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"allow_paths entries must be paths such as '/data' or '/scratch:rw', got {spec!r}.")
        writable = False
        for suffix, flag in ((":rw", True), (":ro", False)):
            if text.endswith(suffix):
                text, writable = text[: -len(suffix)], flag
        where = os.path.abspath(os.path.expanduser(text))
        if not os.path.exists(where):
            raise ConfigError(f"allow_paths: nothing at {where}; create it or drop the entry.")
        return cls(where, writable)

    def __str__(self) -> str:
        return f"{self.path}:{'rw' if self.writable else 'ro'}"


def parse_endpoint(spec: str) -> tuple[str, int]:
    """("host", port) from "host:port", "tcp://host:port" or "[::1]:port"; a ConfigError otherwise."""
    text = str(spec).strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.rstrip("/")
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"allow_network entries must be 'host:port' (e.g. '127.0.0.1:8786'), got {spec!r}.")
    return host, int(port)


def check_settings(mode: str, allow_paths: Iterable[Any], allow_network: Iterable[Any]) -> None:
    """Raise ConfigError for a bad `confinement`, `allow_paths` or `allow_network` (before any model call)."""
    if mode not in MODES:
        raise ConfigError(f"confinement must be one of {', '.join(MODES)}, got {mode!r}.")
    for entry in allow_paths:
        AllowedPath.parse(entry)
    for entry in allow_network:
        parse_endpoint(entry)


# ---- the policy -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """What one confined kernel may do: paths by right, TCP ports it may connect to. JSON-able."""

    read: tuple[str, ...] = ()
    read_exec: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    connect_ports: tuple[int, ...] = ()
    devices: tuple[str, ...] = field(default=_DEVICES_RW)

    def to_dict(self) -> dict[str, Any]:
        return {"read": list(self.read), "read_exec": list(self.read_exec), "write": list(self.write),
                "connect_ports": list(self.connect_ports), "devices": list(self.devices)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        return cls(tuple(data.get("read", ())), tuple(data.get("read_exec", ())), tuple(data.get("write", ())),
                   tuple(int(p) for p in data.get("connect_ports", ())), tuple(data.get("devices", _DEVICES_RW)))

    def rules(self) -> list[tuple[str, int]]:
        """(path, Landlock rights) pairs for landlock.restrict_self."""
        rules = [(p, landlock.READ_EXEC) for p in self.read_exec]
        rules += [(p, landlock.READ) for p in self.read]
        rules += [(p, landlock.READ | landlock.WRITE) for p in self.write]
        rules += [(p, landlock.READ_FILE | landlock.WRITE_FILE) for p in self.devices]
        return rules

    def covers(self, read_paths: Iterable[str], ports: Iterable[int]) -> bool:
        """True when this policy already lets the kernel read every path and reach every port."""
        granted = self.read + self.read_exec + self.write
        return all(any(_under(p, g) for g in granted) for p in read_paths) and set(ports) <= set(self.connect_ports)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def needs(fields: Sequence[Field]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The paths the sandbox must read and the ports it must reach for these inputs."""
    paths: list[str] = []
    ports: list[int] = []
    for f in fields:
        paths.extend(os.path.abspath(p) for p in getattr(f, "read_paths", ()))
        if getattr(f.info, "path", None) and f.info.kind in ("text_file", "binary_file", "directory"):
            paths.append(os.path.abspath(str(f.info.path)))
        ports.extend(parse_endpoint(e)[1] for e in getattr(f, "endpoints", ()))
    return tuple(dict.fromkeys(paths)), tuple(dict.fromkeys(ports))


def reader_policy(*, read: Sequence[str], write: Sequence[str] = ()) -> Policy:
    """The policy of a confined helper that only reads files (e.g. the quotes guard's document reader):
    Python, its libraries and the system's shared files, plus `read`; it writes only `write`; no port."""
    read_exec = tuple(dict.fromkeys([*_SYSTEM_CODE, *python_paths()]))
    shared = [*(os.path.join("/etc", name) for name in _ETC), *_SHARED_FILES, "/proc/self"]
    return Policy(tuple(dict.fromkeys([*read, *shared])), read_exec, tuple(dict.fromkeys(write)))


def build_policy(*, own_dirs: Sequence[str], transfer_dir: str, broker_port: int, input_paths: Sequence[str],
                 input_ports: Sequence[int], allow_paths: Sequence[str], allow_network: Sequence[str]) -> Policy:
    """The whole policy of one kernel (see the module docstring)."""
    allowed = [AllowedPath.parse(p) for p in allow_paths]
    read_exec = list(dict.fromkeys([*_SYSTEM_CODE, *python_paths()]))
    read = [*input_paths, *(a.path for a in allowed if not a.writable),
            *(os.path.join("/etc", name) for name in _ETC), *_SHARED_FILES, "/proc/self"]
    write = [*own_dirs, transfer_dir, *(a.path for a in allowed if a.writable)]  # values cross back as files
    ports = [*([broker_port] if broker_port else []), *input_ports, *(parse_endpoint(e)[1] for e in allow_network)]
    return Policy(tuple(dict.fromkeys(read)), tuple(read_exec), tuple(dict.fromkeys(write)),
                  tuple(sorted(set(ports))))


def python_paths() -> list[str]:
    """Where Python and its libraries live: its prefixes, their site folders, the user's site folder and
    rlmnb's own package folder; never a home or root folder, and no other `sys.path` entry (Jupyter puts
    the notebook's folder there, and `sys.path.insert(0, '..')` is common: such folders hold `.env` files).
    A folder the kernel must import from beyond these is the user's to allow (`allow_paths`)."""
    home = os.path.realpath(os.path.expanduser("~"))
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    sites = [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []
    roots = [os.path.realpath(p) for p in [*prefixes, *sites]]
    candidates = [*roots, *(p for p in sys.path if p and any(_under(os.path.realpath(p), r) for r in roots))]
    candidates.append(str(Path(__file__).resolve().parents[2]))  # the rlmnb package itself, not its parent
    found: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if real in ("/", home) or _under(home, real) or not os.path.exists(real):
            continue  # a folder that holds the home directory would open all of it
        found.append(real)
    return list(dict.fromkeys(found))


# ---- what this system offers ------------------------------------------------------------------------------
GUARDS: dict[str, str] = {
    "files": "reads only Python, its libraries and its inputs; writes only its own folders",
    "network": "connects only to the broker and the allowed TCP ports",
    "signals": "signals no process outside the sandbox",
    "processes": "cannot trace or read other processes (ptrace, process_vm_*, /proc/<pid>, pidfd_getfd)",
    "sockets": "no UDP, unix, raw, MPTCP or SCTP socket, no listening, no TCP Fast Open, no io_uring",
    "lifetime": "every process it starts ends when the sandbox ends",
    "privileges": "holds no capability: root-only calls (reboot, mount, swapoff...) fail",
    "tasks": "runs a bounded number of processes and threads at once (a fork bomb stops there)",
}


@dataclass(frozen=True)
class Guard:
    """One part of the confinement: enforced (and `by` what) or not (and the `reason`)."""

    name: str
    enforced: bool
    by: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "enforced": self.enforced, "by": self.by, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guard:
        return cls(str(data["name"]), bool(data.get("enforced")), str(data.get("by", "")), str(data.get("reason", "")))


def plan(abi: int, seccomp_ok: bool, no_landlock: str = "", *, no_namespaces: str = "unknown",
         share_network: bool = False, tasks_by: str = "") -> tuple[Guard, ...]:
    """Which guards a kernel gets on this system, each with who enforces it.

    `abi`: the Landlock ABI (0: none); `seccomp_ok`: seccomp filtering works; `no_landlock`: why there is no
    Landlock; `no_namespaces`: why the namespaces cannot be built ("" when they can, see namespaces.probe);
    `share_network`: the sandbox keeps the host's network (the user opened TCP endpoints); `tasks_by`: what caps
    its tasks here ("" for nothing, see tasks.mechanism)."""
    tasks_guard = (Guard("tasks", True, f"{tasks_by}, at {tasks.cap()}") if tasks_by else
                   Guard("tasks", False, reason="no writable pids cgroup here, and Linux exempts a sandbox whose "
                                                "user is root outside from RLIMIT_NPROC"))
    lacks = no_landlock or "this Linux kernel has no Landlock (5.13+ with Landlock enabled is needed)"
    no_seccomp = "seccomp filtering is not available on this system"
    landlock_by = f"Landlock ABI {abi}"
    if not no_namespaces:
        return (*_namespaced(abi, seccomp_ok, landlock_by, share_network), tasks_guard)
    files = Guard("files", True, landlock_by) if abi >= 1 else Guard("files", False, reason=lacks)
    if abi >= 4:
        network = Guard("network", True, landlock_by)
    else:
        network = Guard("network", False, reason=f"Landlock ABI {abi} cannot rule TCP ports (Linux 6.7+, ABI 4)"
                        if abi >= 1 else lacks)
    if abi >= 6:
        signals = Guard("signals", True, f"{landlock_by} (scoped)")
    elif seccomp_ok:
        signals = Guard("signals", True, "seccomp (its own pid only)")
    else:
        signals = Guard("signals", False, reason=no_seccomp)
    if abi >= 1 and seccomp_ok:
        processes = Guard("processes", True, f"{landlock_by} + seccomp")
    else:
        processes = Guard("processes", False, reason=no_seccomp if not seccomp_ok else
                          f"other processes' /proc/<pid> files stay readable: {lacks}")
    sockets = Guard("sockets", True, "seccomp") if seccomp_ok else Guard("sockets", False, reason=no_seccomp)
    lifetime = Guard("lifetime", False, reason=f"without a PID namespace a process that leaves the kernel's session "
                                               f"can outlive the run: {no_namespaces}")
    privileges = (Guard("privileges", True, "capabilities dropped + seccomp") if seccomp_ok
                  else Guard("privileges", False, reason=no_seccomp))
    return files, network, signals, processes, sockets, lifetime, privileges, tasks_guard


def _namespaced(abi: int, seccomp_ok: bool, landlock_by: str, share_network: bool) -> tuple[Guard, ...]:
    """The guards of a sandbox in its own namespaces (Landlock and seccomp, where present, as a second layer)."""
    second = "".join(f" + {name}" for name, used in ((landlock_by, abi >= 1), ("seccomp", seccomp_ok)) if used)
    if share_network:
        network = (Guard("network", True, f"{landlock_by} (TCP ports; the host's network is shared for the "
                                          "allowed endpoints)") if abi >= 4 else
                   Guard("network", False, reason="the host's network is shared for the allowed endpoints and "
                                                  f"Landlock ABI {abi} cannot rule TCP ports"))
    else:
        network = Guard("network", True, "an empty network namespace")
    return (Guard("files", True, f"mount namespace{second}"), network,
            Guard("signals", True, "PID namespace"), Guard("processes", True, f"PID namespace{second}"),
            Guard("sockets", True, ("network namespace" if not share_network else landlock_by) + second),
            Guard("lifetime", True, "PID namespace"), Guard("privileges", True, "user namespace without capabilities"))


def _off(reason: str) -> tuple[Guard, ...]:
    return tuple(Guard(name, False, reason=reason) for name in GUARDS)


@dataclass(frozen=True)
class Confinement:
    """Which confinement a run's sandbox has: recorded in the run's start event, shown every run by the
    widget header, `RunResult.confinement` and `%rlm config`.

    `guards` says per guard (GUARDS) whether it is enforced, by what, or why not. `active` names the
    mechanisms in use: "namespaces+landlock+seccomp" (the namespaces as the first layer), "landlock+seccomp",
    "landlock", "seccomp" or "none" (then `reason` says why; for a fallback without namespaces, `reason`
    says why there are none).
    Records from before `guards` existed read back with no guards (`complete` then follows `active`)."""

    mode: str = "auto"
    active: str = "none"
    abi: int = 0
    reason: str = ""
    allow_paths: tuple[str, ...] = ()
    allow_network: tuple[str, ...] = ()
    guards: tuple[Guard, ...] = ()

    @property
    def on(self) -> bool:
        return self.active != "none"

    @property
    def namespaced(self) -> bool:
        """True when the sandbox runs in its own namespaces (the first layer)."""
        return self.active.startswith("namespaces")

    def sharing_network(self) -> Confinement:
        """This confinement for a sandbox that keeps the host's network (its inputs name TCP endpoints, e.g. a
        Dask cluster the user opted into): Landlock's port rules then stand for the network namespace."""
        if not self.namespaced:
            return self
        _, seccomp_ok, _ = probe()
        kept = {g.name: g for g in self.guards}
        guards = tuple(kept.get(g.name, g) if g.name != "network" else g
                       for g in plan(self.abi, seccomp_ok, no_namespaces="", share_network=True))
        return dataclasses.replace(self, guards=guards)

    @property
    def missing(self) -> tuple[Guard, ...]:
        """The guards not enforced (every one when the sandbox is not confined)."""
        if not self.guards:
            return () if self.active.endswith("landlock+seccomp") else _off(self.reason or "not confined")
        return tuple(g for g in self.guards if not g.enforced)

    @property
    def complete(self) -> bool:
        """True when every guard holds (what confinement='required' demands)."""
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "active": self.active, "abi": self.abi, "reason": self.reason,
                "allow_paths": list(self.allow_paths), "allow_network": list(self.allow_network),
                "guards": [g.to_dict() for g in self.guards]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Confinement:
        return cls(str(data.get("mode", "auto")), str(data.get("active", "none")), int(data.get("abi", 0)),
                   str(data.get("reason", "")), tuple(data.get("allow_paths", ())), tuple(data.get("allow_network", ())),
                   tuple(Guard.from_dict(g) for g in data.get("guards", ())))

    def shortfall(self) -> str:
        """"" when complete, else "not enforced: network (why), ..." (one line)."""
        return "" if self.complete else "not enforced: " + "; ".join(f"{g.name} ({g.reason})" for g in self.missing)

    def describe(self) -> str:
        """One line for `%rlm config`, the widget header and RunResult: what is enforced and what is not."""
        if not self.on:
            return f"none ({self.reason})" if self.reason else "none"
        extra = [*(f"path {p}" for p in self.allow_paths), *(f"network {n}" for n in self.allow_network)]
        enforced = [g.name for g in self.guards if g.enforced]
        text = self.active + (f" (Landlock ABI {self.abi})" if self.abi else "") + (f"; allowed: {', '.join(extra)}" if extra else "")
        text += f"; enforced: {', '.join(enforced)}" if enforced else ""
        return text + (f"; {self.shortfall()}" if not self.complete else "")


@functools.cache
def probe() -> tuple[int, bool, str]:
    """(Landlock ABI, seccomp usable, why there is no Landlock or "") of this system, asked once."""
    if not sys.platform.startswith("linux"):
        return 0, False, f"{sys.platform} has no Landlock; the kernel sandbox runs with the user's rights"
    return landlock.abi_version(), seccomp.available(), ""


def no_namespaces() -> str:
    """"" when the sandbox can run in its own namespaces here, else why not (namespaces.probe, asked once)."""
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} has no Linux namespaces"
    return namespaces.probe()


def support() -> tuple[int, str]:
    """(Landlock ABI, what is missing or ""): "" means every guard holds here (confinement='required' works)."""
    abi, seccomp_ok, why = probe()
    missing_ns = no_namespaces()
    found = Confinement(active="probe", abi=abi, guards=plan(abi, seccomp_ok, why, no_namespaces=missing_ns,
                                                             tasks_by=tasks.mechanism(not missing_ns)))
    return abi, found.shortfall()


def resolve(mode: str, allow_paths: Sequence[str] = (), allow_network: Sequence[str] = (),
            sandbox: str = "kernel", *, namespaces: bool = True) -> Confinement:
    """The confinement a run gets. `auto` confines as far as the system allows (its own namespaces first,
    Landlock and seccomp as a second layer, or alone where namespaces cannot be built) and records, guard by
    guard, what holds and what does not; `required` is a ConfigError naming what is missing when any guard
    cannot hold; `off` confines nothing. `namespaces=False` leaves the namespaces out, as where the system
    has none."""
    check_settings(mode, (), allow_network)
    paths = tuple(str(AllowedPath.parse(p)) for p in allow_paths)
    network = tuple(allow_network)
    if sandbox != "kernel":
        reason = ("the local sandbox runs in this process and is never confined" if sandbox == "local"
                  else f"the {sandbox} sandbox is not confined by rlmnb")
        return Confinement(mode, "none", 0, reason, paths, network, _off(reason))
    if mode == "off":
        return Confinement(mode, "none", 0, "confinement='off'", paths, network, _off("confinement='off'"))
    abi, seccomp_ok, why = probe()
    missing_ns = no_namespaces() if namespaces else "the namespaces were turned off (namespaces=False)"
    guards = plan(abi, seccomp_ok, why, no_namespaces=missing_ns, share_network=bool(network),
                  tasks_by=tasks.mechanism(not missing_ns))
    layers = (("namespaces", not missing_ns), ("landlock", abi >= 1), ("seccomp", seccomp_ok))
    active = "+".join(name for name, used in layers if used) or "none"
    reason = missing_ns if active != "none" else (why or "this system has neither Landlock (Linux 5.13+) nor seccomp")
    if active == "none":  # no layer at all: the kernel runs unconfined, whatever one part could have held
        guards = _off(reason)
    found = Confinement(mode, active, abi, reason, paths, network, guards)
    if mode == "required" and not found.complete:
        raise ConfigError(f"confinement='required' but {found.shortfall()}; use confinement='auto' to run with "
                          "what this system can enforce.")
    return found


__all__ = ["GUARDS", "MODES", "AllowedPath", "Confinement", "Guard", "Policy", "build_policy", "check_settings", "needs",
           "no_namespaces", "parse_endpoint", "plan", "probe", "python_paths", "reader_policy", "resolve", "support"]
