"""The environment a kernel sandbox starts with: the host's, minus anything that looks like a secret.

Model code may print `os.environ`, so API keys must never reach the kernel. A variable is dropped when
its name looks like a key, token, secret or password, when it is listed in `secret_env`, when it
belongs to the Jupyter session of the host (the sandbox must not talk to the user's notebook), or when
its value carries credentials in a URL (`scheme://user:password@host`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Words that mark a variable as secret wherever they appear in its name (case-insensitive).
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|_PWD($|_)|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|SESSION|"
    r"(^|_)PAT($|_)|(^|_)DSN($|_)|CONN(ECTION)?_?STR",
    re.IGNORECASE,
)
# Prefixes of variables that tie a process to the host's Jupyter session or shape Python's start-up.
_DROPPED_PREFIXES = ("JPY_", "JUPYTERHUB_", "JUPYTER_SERVER", "KERNEL_", "PYTHONSTARTUP", "IPY_")
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_KEPT = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL",
                   "TERM", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX"})

# Set in every kernel: no debugger start-up warnings, no frozen-module noise.
_KERNEL_DEFAULTS = {"PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONUNBUFFERED": "1"}


def looks_secret(name: str, value: str = "") -> bool:
    """True when a variable should not reach sandbox code (by its name, or credentials in its value)."""
    if name.upper() in _KEPT:
        return False
    if _SECRET_WORDS.search(name) or name.upper().startswith(_DROPPED_PREFIXES):
        return True
    return bool(_URL_CREDENTIALS.search(value))


def scrubbed_env(secret_env: Iterable[str] = (), base: Mapping[str, str] | None = None,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: `base` (default os.environ) without secrets, plus `extra`.

    Args:
        secret_env: more variable names to drop (matched exactly, case-sensitive), default none.
        base: the environment to start from, default `os.environ`.
        extra: variables to set afterwards (they are trusted: rlmnb's own markers).
    """
    source = os.environ if base is None else base
    listed = set(secret_env)
    env = {k: v for k, v in source.items() if k not in listed and not looks_secret(k, v)}
    env.update(_KERNEL_DEFAULTS)
    env.update(extra or {})
    return env


__all__ = ["looks_secret", "scrubbed_env"]
