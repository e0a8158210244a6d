"""The confined kernel's first code: apply the Landlock policy, then become ipykernel.

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
    from .confinement import Policy
    from .landlock import LandlockError, restrict_self

    with open(policy_path, encoding="utf-8") as f:
        policy = Policy.from_dict(json.load(f))
    started = time.perf_counter()
    try:
        abi = restrict_self(paths=policy.rules(), connect_ports=policy.connect_ports)
    except (LandlockError, OSError) as exc:
        sys.stderr.write(f"rlmnb: could not confine the sandbox kernel: {exc}\n")
        os._exit(78)
    applied.update(landlock=abi, policy=policy_path, landlock_ms=(time.perf_counter() - started) * 1000)
    sys.argv = ["ipykernel_launcher", *rest]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def seal() -> dict[str, object]:
    """At the kernel's boot, before any model code: the seccomp filter on every thread (see seccomp.py).
    Raises when this kernel was not confined by main(), so the host never takes it for confined."""
    if not applied.get("landlock"):
        raise RuntimeError("this kernel was not started by rlmnb's confining launcher")
    if not applied.get("seccomp"):
        from .seccomp import apply

        started = time.perf_counter()
        apply()
        applied.update(seccomp=True, seccomp_ms=(time.perf_counter() - started) * 1000)
    return dict(applied)


def bootstrap(root: str) -> str:
    """The `python -c` code that makes rlmnb importable from `root` and calls main with the arguments."""
    return (f"import sys; sys.path.insert(0, {root!r}) if {root!r} not in sys.path else None; "
            "from rlmnb.sandbox.launch import main; main(sys.argv[1:])")


__all__ = ["applied", "bootstrap", "main", "seal"]
