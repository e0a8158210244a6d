"""Confinement of the kernel sandbox: the policy (what a kernel may read, write and reach),
Landlock and seccomp, and the launcher that applies them.
"""

__all__: list[str] = []
