"""The confined kernel's first code: apply the Landlock policy (where the kernel has Landlock), then
become ipykernel.

Run as `python -c <bootstrap> POLICY.json -f CONNECTION_FILE ...`. Landlock binds the calling thread
and everything it starts later, so it must be applied here, while the interpreter has one thread and
before ipykernel (and ZMQ) start theirs. The seccomp half is applied later, by the kernel side at
boot (kernel_side.seal), once the kernel has bound its own ZMQ sockets: it synchronises all threads.

A policy that cannot be applied ends the process with a message on stderr (the host reports the
kernel log), so a kernel that should be confined never runs unconfined.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time

applied: dict[str, object] = {}  # what was applied here, read by kernel_side.seal (same process)


def main(argv: list[str]) -> None:
    policy_path, rest = argv[0], argv[1:]
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
    sys.argv = ["ipykernel_launcher", *rest]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def seal() -> dict[str, object]:
    """At the kernel's boot, before any model code: the seccomp filter on every thread (see seccomp.py),
    with signals limited to this process where Landlock cannot scope them (ABI < 6).
    Raises when this kernel was not started by main(), so the host never takes it for confined."""
    if not applied.get("launched"):
        raise RuntimeError("this kernel was not started by rlmnb's confining launcher")
    from rlmnb._sandbox.confinement import seccomp

    if not applied.get("seccomp") and seccomp.available():
        started = time.perf_counter()
        abi = applied.get("landlock")
        own_pid = None if isinstance(abi, int) and abi >= 6 else os.getpid()
        seccomp.apply(own_pid=own_pid)
        applied.update(seccomp=True, signals_by_seccomp=own_pid is not None,
                       seccomp_ms=(time.perf_counter() - started) * 1000)
    return dict(applied)


def bootstrap(root: str) -> str:
    """The `python -c` code that makes rlmnb importable from `root` and calls main with the arguments."""
    return (f"import sys; sys.path.insert(0, {root!r}) if {root!r} not in sys.path else None; "
            "from rlmnb._sandbox.confinement.launch import main; main(sys.argv[1:])")


__all__ = ["applied", "bootstrap", "main", "seal"]
