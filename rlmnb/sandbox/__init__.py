"""Sandboxes: where model code runs. `local` (in-process namespace) and `kernel` (separate process)."""

from __future__ import annotations

from typing import Any

from .base import ExecResult, Sandbox, SandboxHost


def create_sandbox(kind: str, **options: Any) -> Sandbox:
    """A new sandbox of the given kind ('local' or 'kernel')."""
    if kind == "local":
        from .local import LocalSandbox

        return LocalSandbox(max_output_chars=options.get("max_output_chars", 10_000))
    if kind == "kernel":
        from .kernel import KernelSandbox  # type: ignore[import-not-found,unused-ignore]

        return KernelSandbox(**options)  # type: ignore[no-any-return]
    raise ValueError(f"unknown sandbox {kind!r}; use 'local' or 'kernel'")


__all__ = ["ExecResult", "Sandbox", "SandboxHost", "create_sandbox"]
