"""What confinement holds at each kernel, and the seccomp program itself: tests that need no Landlock.

The matrix fakes the Landlock ABI (0-7) and seccomp's availability and checks, for `auto` and
`required`, which guards are enforced, what the record says, and that the ruleset asks the kernel only
for what its ABI knows. The BPF program is run by seccomp.run (the kernel's rules for classic BPF) on
both architectures' tables, including arguments whose high word is set; one test installs the filter in
a child process and makes the real calls.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlmnb._ground.errors import ConfigError
from rlmnb._sandbox.confinement import landlock, seccomp
from rlmnb._sandbox.confinement import policy as confinement
from rlmnb._sandbox.confinement.policy import Confinement, resolve

ROOT = str(Path(__file__).resolve().parents[2])

# ABI -> (guards `auto` enforces, guards it does not) with seccomp available and no user namespaces (the fallback)
_ALL = {"files", "network", "signals", "processes", "sockets", "privileges", "tasks"}
MATRIX: dict[int, tuple[set[str], set[str]]] = {
    0: ({"signals", "sockets", "privileges", "tasks"}, {"files", "network", "processes", "lifetime"}),
    1: (_ALL - {"network"}, {"network", "lifetime"}),
    2: (_ALL - {"network"}, {"network", "lifetime"}),
    3: (_ALL - {"network"}, {"network", "lifetime"}),
    4: (_ALL, {"lifetime"}),
    5: (_ALL, {"lifetime"}),
    6: (_ALL, {"lifetime"}),
    7: (_ALL, {"lifetime"}),
}
NO_NAMESPACES = "user namespaces are off here (faked)"


@pytest.fixture
def fake_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Lets a test set the Landlock ABI, seccomp availability and user namespaces the probe sees (by default
    a system without user namespaces: the fallback)."""
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(confinement, "no_namespaces", lambda: NO_NAMESPACES)
    monkeypatch.setattr(confinement.tasks, "mechanism", lambda namespaced: "a cgroup (pids controller)")
    confinement.probe.cache_clear()
    try:
        yield monkeypatch
    finally:
        confinement.probe.cache_clear()


def _fake(patch: pytest.MonkeyPatch, abi: int, seccomp_ok: bool = True) -> None:
    patch.setattr(landlock, "abi_version", lambda: abi)
    patch.setattr(seccomp, "available", lambda: seccomp_ok)
    confinement.probe.cache_clear()


@pytest.mark.parametrize("abi", sorted(MATRIX))
def test_auto_enforces_what_each_abi_allows_and_says_what_it_does_not(fake_kernel: pytest.MonkeyPatch,
                                                                     abi: int) -> None:
    _fake(fake_kernel, abi)
    found = resolve("auto")
    enforced, missing = MATRIX[abi]
    assert {g.name for g in found.guards if g.enforced} == enforced
    assert {g.name for g in found.missing} == missing
    assert found.active == ("landlock+seccomp" if abi else "seccomp") and found.on and not found.namespaced
    assert found.reason == NO_NAMESPACES
    by = {g.name: g.by for g in found.guards}
    assert by["signals"] == (f"Landlock ABI {abi} (scoped)" if abi >= 6 else "seccomp (its own pid only)")
    assert by["sockets"] == "seccomp"
    line = found.describe()
    assert ("not enforced" in line) == bool(missing)
    if 1 <= abi < 4:
        assert f"network (Landlock ABI {abi} cannot rule TCP ports (Linux 6.7+, ABI 4))" in line
    if abi == 0:
        assert "files (this Linux kernel has no Landlock" in line
    assert Confinement.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    if missing:
        with pytest.raises(ConfigError, match="confinement='required' but not enforced: ") as refused:
            resolve("required")
        assert all(name in str(refused.value) for name in missing)
    assert confinement.support() == (abi, found.shortfall())


def test_without_seccomp_only_landlock_holds_and_required_names_the_rest(fake_kernel: pytest.MonkeyPatch) -> None:
    _fake(fake_kernel, 7, seccomp_ok=False)
    found = resolve("auto")
    assert found.active == "landlock"
    # signals: Landlock scopes them at ABI 7
    assert {g.name for g in found.missing} == {"processes", "sockets", "lifetime", "privileges"}
    _fake(fake_kernel, 5, seccomp_ok=False)
    assert {g.name for g in resolve("auto").missing} == {"signals", "processes", "sockets", "lifetime", "privileges"}
    _fake(fake_kernel, 0, seccomp_ok=False)
    nothing = resolve("auto")
    assert (nothing.active, nothing.on) == ("none", False) and {g.name for g in nothing.missing} == set(
        confinement.GUARDS)
    with pytest.raises(ConfigError, match="files .*network .*signals .*processes .*sockets"):
        resolve("required")


@pytest.mark.parametrize("abi", [0, 3, 7])
def test_in_its_own_namespaces_every_guard_holds_whatever_the_abi(fake_kernel: pytest.MonkeyPatch, abi: int) -> None:
    _fake(fake_kernel, abi)
    fake_kernel.setattr(confinement, "no_namespaces", lambda: "")
    found = resolve("auto")
    assert found.namespaced and found.complete and found.active.startswith("namespaces")
    assert {g.name for g in found.guards} == set(confinement.GUARDS)
    assert resolve("required").complete
    # an allowed TCP endpoint keeps the host's network: then Landlock's port rules decide
    shared = resolve("auto", allow_network=["127.0.0.1:9"])
    assert ({g.name for g in shared.missing} == {"network"}) == (abi < 4)


@pytest.mark.parametrize("abi", [3, 7])
def test_inputs_with_tcp_endpoints_keep_the_host_network_and_the_record_says_so(fake_kernel: pytest.MonkeyPatch,
                                                                              abi: int) -> None:
    _fake(fake_kernel, abi)
    fake_kernel.setattr(confinement, "no_namespaces", lambda: "")
    shared = resolve("auto").sharing_network()
    network = next(g for g in shared.guards if g.name == "network")
    assert network.enforced == (abi >= 4) and shared.namespaced
    assert shared.sharing_network() == shared
    _fake(fake_kernel, abi)
    fake_kernel.setattr(confinement, "no_namespaces", lambda: NO_NAMESPACES)
    fallback = resolve("auto")
    assert fallback.sharing_network() == fallback  # the fallback shares the network anyway


def test_without_a_task_cap_the_record_says_so_and_required_refuses(fake_kernel: pytest.MonkeyPatch) -> None:
    _fake(fake_kernel, 7)
    fake_kernel.setattr(confinement, "no_namespaces", lambda: "")
    fake_kernel.setattr(confinement.tasks, "mechanism", lambda namespaced: "")
    found = resolve("auto")
    assert [g.name for g in found.missing] == ["tasks"] and found.namespaced
    with pytest.raises(ConfigError, match="tasks"):
        resolve("required")


def test_required_refuses_the_fallback_without_namespaces(fake_kernel: pytest.MonkeyPatch) -> None:
    _fake(fake_kernel, 7)
    with pytest.raises(ConfigError, match="lifetime"):
        resolve("required")


def test_off_and_other_sandboxes_enforce_nothing_and_say_why() -> None:
    off = resolve("off")
    assert not off.on and {g.name for g in off.missing} == set(confinement.GUARDS)
    assert off.describe() == "none (confinement='off')"
    local = resolve("auto", sandbox="local")
    assert all(g.reason.startswith("the local sandbox") for g in local.missing)


def test_a_record_from_before_guards_reads_back() -> None:
    old = {"mode": "auto", "active": "landlock+seccomp", "abi": 7, "reason": "", "allow_paths": [],
           "allow_network": ["127.0.0.1:9"]}
    found = Confinement.from_dict(old)
    assert found.complete and found.guards == () and found.allow_network == ("127.0.0.1:9",)
    unconfined = Confinement.from_dict({"active": "none", "reason": "no Landlock"})
    assert not unconfined.complete and {g.reason for g in unconfined.missing} == {"no Landlock"}


@pytest.mark.parametrize("abi", range(8))
def test_the_ruleset_asks_only_for_what_the_abi_knows(abi: int) -> None:
    fs, net, scoped, size = landlock.handled(abi)
    assert fs & landlock.READ_FILE and (fs >> 13 & 1) == (abi >= 2) and (fs >> 14 & 1) == (abi >= 3)
    assert (fs >> 15 & 1) == (abi >= 5) and fs < 1 << 16
    assert net == (landlock.BIND_TCP | landlock.CONNECT_TCP if abi >= 4 else 0)
    assert scoped == (landlock.SCOPE_ABSTRACT_UNIX | landlock.SCOPE_SIGNAL if abi >= 6 else 0)
    assert size == (24 if abi >= 6 else 16 if abi >= 4 else 8)


# ---- the BPF program ----------------------------------------------------------------------------------------
ALLOW, EPERM, EACCES, ENOSYS = (seccomp.RET_ALLOW, seccomp.RET_ERRNO | errno.EPERM, seccomp.RET_ERRNO | errno.EACCES,
                                seccomp.RET_ERRNO | errno.ENOSYS)
HIGH = 1 << 32
PID = 4242
# (call, args, verdict with a signal filter for PID)
CASES: list[tuple[str, tuple[int, ...], int]] = [
    ("socket", (2, 1, 0), ALLOW), ("socket", (10, 1, 6), ALLOW), ("socket", (2, 1 | 0x80000 | 0x800, 0), ALLOW),
    ("socket", (2, 1, 262), EACCES), ("socket", (10, 1, 262), EACCES), ("socket", (2, 1, 132), EACCES),
    ("socket", (2, 2, 0), EACCES), ("socket", (1, 1, 0), EACCES), ("socket", (16, 3, 0), EACCES),
    ("socket", (2, 3, 255), EACCES), ("socket", (2 | HIGH, 1, 0), EACCES), ("socket", (2, 1 | HIGH, 0), EACCES),
    ("socket", (2, 1, 262 | HIGH), EACCES), ("socket", (2, 1, HIGH), EACCES),
    ("socketpair", (1, 1, 0), ALLOW), ("socketpair", (2, 1, 0), EACCES), ("socketpair", (1 | HIGH, 1, 0), EACCES),
    ("sendto", (3, 0, 4, 0), ALLOW), ("sendto", (3, 0, 4, 0x20000000), EACCES),
    ("sendto", (3, 0, 4, 0x20000040), EACCES), ("sendmsg", (3, 0, 0x20000000), EACCES), ("sendmsg", (3, 0, 0x40), ALLOW),
    ("sendmmsg", (3, 0, 1, 0x20000000), EACCES), ("sendmmsg", (3, 0, 1, 0), ALLOW),
    ("setsockopt", (3, 6, 30, 0, 4), EACCES), ("setsockopt", (3, 6, 23, 0, 4), EACCES),
    ("setsockopt", (3, 6 | HIGH, 30, 0, 4), EACCES), ("setsockopt", (3, 6, 1, 0, 4), ALLOW),
    ("setsockopt", (3, 1, 30, 0, 4), ALLOW),
    ("clone", (0x11, 0), ALLOW), ("clone", (0x10000000 | 0x11, 0), EPERM), ("clone", (0x40000000, 0), EPERM),
    ("clone3", (0, 88), ENOSYS),
    ("kill", (PID, 0), ALLOW), ("kill", (PID + 1, 0), EPERM), ("kill", (0, 0), EPERM), ("kill", (-1, 9), EPERM),
    ("kill", (-PID, 9), EPERM), ("kill", (PID | HIGH, 9), EPERM), ("tkill", (PID, 10), ALLOW),
    ("tkill", (PID + 1, 10), EPERM), ("tgkill", (PID, PID + 3, 10), ALLOW), ("tgkill", (1, 1, 10), EPERM),
    ("rt_sigqueueinfo", (1, 10, 0), EPERM), ("rt_sigqueueinfo", (PID, 10, 0), ALLOW),
    ("rt_tgsigqueueinfo", (1, 1, 10, 0), EPERM), ("rt_tgsigqueueinfo", (PID, PID, 10, 0), ALLOW),
    *((name, (1, 0), EPERM) for name in seccomp.DENIED),
]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_program_allows_only_listed_arguments(machine: str) -> None:
    filtered = seccomp.program(machine, own_pid=PID)
    for name, args, verdict in CASES:
        got = seccomp.run(filtered, seccomp.number(name, machine), args, machine=machine)
        assert got == verdict, f"{machine} {name}{args}: {got:#x}, wanted {verdict:#x}"
    ordinary = (0, 1, 3, 9, 202, 231) if machine == "x86_64" else (63, 64, 57, 222, 98, 94)
    for nr in ordinary:  # read, write, close, mmap, futex, exit_group
        assert seccomp.run(filtered, nr, (1, 2, 3), machine=machine) == ALLOW
    assert seccomp.run(filtered, 0x40000000 + 1, machine=machine) == EPERM  # x32
    assert seccomp.run(filtered, 1, arch=0x40000003, machine=machine) == EPERM  # i386 on x86_64


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_without_own_pid_signals_are_left_to_landlock(machine: str) -> None:
    scoped = seccomp.program(machine)
    assert seccomp.run(scoped, seccomp.number("kill", machine), (1, 9), machine=machine) == ALLOW
    for name in ("pidfd_open", "pidfd_send_signal", "ptrace"):
        assert seccomp.run(scoped, seccomp.number(name, machine), (1, 0), machine=machine) == EPERM


_SECCOMP_ONLY = '''
import errno, json, os, signal, socket, sys, threading
sys.path.insert(0, sys.argv[1])
from rlmnb._sandbox.confinement import seccomp
port = int(sys.argv[2])
seccomp.apply(own_pid=os.getpid())
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close())
attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262))
attempt("mptcp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM, 262))
attempt("tfo sendto", lambda: socket.socket().sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", port)))
attempt("tfo connect", lambda: socket.socket().setsockopt(6, 30, 1))
attempt("socketpair", lambda: socket.socketpair())
attempt("signal self", lambda: os.kill(os.getpid(), 0))
attempt("signal parent", lambda: os.kill(os.getppid(), 0))
attempt("signal group", lambda: os.kill(0, 0))
attempt("signal all", lambda: os.kill(-1, 0))
attempt("pidfd", lambda: os.pidfd_open(os.getppid()))
box = []
t = threading.Thread(target=lambda: box.append(1))
t.start(); t.join()
out["thread"] = "allowed" if box else "refused"
attempt("signal own thread", lambda: signal.pthread_kill(threading.main_thread().ident, 0))
print(json.dumps(out))
'''


@pytest.mark.skipif(not seccomp.available(), reason="seccomp filtering is not available here")
def test_the_filter_alone_in_a_real_process() -> None:
    """The filter where Landlock is absent or below ABI 6: it must hold on its own (real calls)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_SECCOMP_ONLY), ROOT,
                               str(listener.getsockname()[1])], capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"tcp": "allowed", "mptcp": "EACCES", "mptcp6": "EACCES", "tfo sendto": "EACCES",
                   "tfo connect": "EACCES", "socketpair": "allowed", "signal self": "allowed",
                   "signal parent": "EPERM", "signal group": "EPERM", "signal all": "EPERM", "pidfd": "EPERM",
                   "thread": "allowed", "signal own thread": "allowed"}


def test_a_partial_confinement_is_said_in_the_widget_and_rlm_config(fake_kernel: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from rlmnb._notebook.widget import confinement_html

    _fake(fake_kernel, 3)
    partial = resolve("auto", allow_network=["127.0.0.1:9"]).to_dict()
    line = confinement_html({"sandbox": "kernel", "confinement": partial})
    assert "sandbox confined (landlock+seccomp); allowed: 127.0.0.1:9; not enforced: network (Landlock ABI 3" in line
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "rlmnb")
    try:
        sh.run_line_magic("rlm", "config")
        report = capsys.readouterr().out
    finally:
        sh.run_line_magic("unload_ext", "rlmnb")
    assert ("landlock+seccomp (Landlock ABI 3); enforced: files, signals, processes, sockets, privileges, tasks; "
            "not enforced: network") in report


@pytest.mark.skipif(landlock.abi_version() < 1, reason="the CI rule applies only where the machine has Landlock")
def test_in_ci_a_skipped_confinement_test_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "test_confinement.py").write_text(
        "import pytest\n\n@pytest.mark.skip(reason='no Landlock here')\ndef test_gap():\n    pass\n\n"
        "@pytest.mark.skip(reason='no SCTP (allowed in CI)')\ndef test_feature():\n    pass\n")
    env = {"PYTHONPATH": f"{ROOT}/tests{os.pathsep}{ROOT}", "PATH": os.environ.get("PATH", "")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "ci_confinement", "-p", "no:cacheprovider", str(tmp_path)]
    in_ci = subprocess.run(command, cwd=tmp_path, env={**env, "CI": "1"}, capture_output=True, text=True, timeout=120)
    assert in_ci.returncode == 1 and "1 skipped, 1 error" in in_ci.stdout, in_ci.stdout  # a skip at setup: an error
    assert "CONFINEMENT TEST SKIPPED IN CI ON A MACHINE WITH LANDLOCK" in in_ci.stdout
    local = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "2 skipped" in local.stdout, local.stdout
