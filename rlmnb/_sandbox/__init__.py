"""Sandboxes: where model code runs. `local` (in-process namespace) and `kernel` (separate process)."""

from __future__ import annotations

from typing import Any

from rlmnb._sandbox.base import ExecResult, Sandbox, SandboxHost


def create_sandbox(kind: str, **options: Any) -> Sandbox:
    """A new sandbox of the given kind ('kernel' or 'local'); options go to its constructor."""
    if kind == "local":
        from rlmnb._sandbox.local import LocalSandbox

        return LocalSandbox(max_output_chars=options.get("max_output_chars", 10_000))
    if kind == "kernel":
        from rlmnb._sandbox.kernel.sandbox import KernelSandbox

        return KernelSandbox(**options)
    raise ValueError(f"unknown sandbox {kind!r}; use 'local' or 'kernel'")


__all__ = ["ExecResult", "Sandbox", "SandboxHost", "create_sandbox"]
