"""The environment a sandbox process starts with: a fixed allow-list, nothing else inherited.

Model code may print `os.environ`, so nothing secret may reach the kernel. A deny-list by name always
misses some (`REDIS_URL=redis://:pw@host`, `SLACK_WEBHOOK_URL`), so the sandbox gets only what it needs
to run Python: PATH, the locale and time zone, the thread-count knobs of numeric libraries, and the
variables rlmnb itself sets (HOME, TMPDIR, IPYTHONDIR in the sandbox's own scratch). `looks_secret` stays
for the journal, which redacts values of secret-looking host variables from what it writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Words that mark a variable as secret wherever they appear in its name (case-insensitive).
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|_PWD($|_)|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|SESSION|WEBHOOK|"
    r"(^|_)PAT($|_)|(^|_)DSN($|_)|CONN(ECTION)?_?STR",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"://[^/\s@]*:[^/\s@]+@")

# The only host variables a sandbox process sees (exact names, then prefixes). Each is a setting of the
# language runtime or a numeric library; none names a service, a path of the user's or a credential.
ALLOWED = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                     "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                     "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "POLARS_MAX_THREADS", "RAYON_NUM_THREADS"})
ALLOWED_PREFIXES = ("LC_",)
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

# Set in every kernel: no debugger start-up warnings, no frozen-module noise.
_KERNEL_DEFAULTS = {"PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONUNBUFFERED": "1"}


def looks_secret(name: str, value: str = "") -> bool:
    """True when a host variable looks like a secret (by its name, or credentials in its value)."""
    if _SECRET_WORDS.search(name):
        return True
    return bool(_URL_CREDENTIALS.search(value))


def allowed(name: str) -> bool:
    """True when a host variable of this name may reach a sandbox process."""
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)


def sandbox_env(secret_env: Iterable[str] = (), base: Mapping[str, str] | None = None,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A sandbox process's environment: the allowed variables of `base` (default os.environ), plus `extra`.

    Args:
        secret_env: names to drop even when allowed (matched exactly), default none.
        base: the environment to start from, default `os.environ`.
        extra: variables rlmnb sets afterwards (trusted: its own markers and scratch paths).
    """
    source = os.environ if base is None else base
    dropped = set(secret_env)
    env = {k: v for k, v in source.items() if allowed(k) and k not in dropped and not looks_secret(k, v)}
    env.setdefault("PATH", _SAFE_PATH)
    env.update(_KERNEL_DEFAULTS)
    env.update(extra or {})
    return env


__all__ = ["ALLOWED", "ALLOWED_PREFIXES", "allowed", "looks_secret", "sandbox_env"]
