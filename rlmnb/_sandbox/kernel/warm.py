"""One warm spare kernel, so a new run starts in milliseconds instead of about a second.

The spare is a kernel process launched when a run takes the previous one; it warms itself
up (rlmnb's kernel side, pandas and pyarrow imported) while the run goes on, with no thread of ours
waiting for it. A run takes the spare only if it was made for the same key (interpreter and working
directory policy); a spare no run touched is the only kind ever handed out, so every run gets a
namespace no earlier run saw. The spare is killed at interpreter exit
(docs/decisions/warm-spare-kernel.md).

The pool is generic: the kernel sandbox passes a `spawn` coroutine that launches one kernel and a
`kill` that stops one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

_ENV_SWITCH = "RLMNB_WARM_KERNEL"  # "0" turns the spare off


class WarmPool:
    """At most one spare kernel, replaced after each take."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: tuple[Hashable, Any] | None = None
        self._spawning = 0
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self._generation = 0  # bumped by shutdown: a spare launched before it is never kept after it
        self._kill: Callable[[Any], None] | None = None
        self.enabled = os.environ.get(_ENV_SWITCH, "1") != "0"
        self.hits = 0
        self.misses = 0

    def take(self, key: Hashable) -> Any | None:
        """The spare if it was made for `key` and its process is alive (it may still be warming up)."""
        if not self.enabled:
            return None
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            self.misses += 1
            return None
        spare_key, kernel = spare
        if spare_key != key or not _alive(kernel):
            self._discard(kernel)
            self.misses += 1
            return None
        self.hits += 1
        return kernel

    async def refill(self, key: Hashable, spawn: Callable[[], Awaitable[Any]], kill: Callable[[Any], None]) -> None:
        """Launch a spare for `key` unless one exists or is being launched; failures just mean no spare.

        A cancellation (the run that launches the spare ended) stops the launch and reaches the caller.
        """
        if not self.enabled:
            return
        with self._lock:
            if self._closed or self._spawning or (self._spare is not None and self._spare[0] == key):
                return
            self._kill = kill
            old, self._spare = self._spare, None
            generation = self._generation
            self._spawning += 1
            self._idle.clear()
        if old is not None:
            self._discard(old[1])
        kernel = None
        try:
            kernel = await spawn()
        except Exception:  # noqa: BLE001 - no spare this time: the next run starts cold
            kernel = None
        finally:
            with self._lock:
                self._spawning -= 1
                keep = (kernel is not None and not self._closed and self._spare is None
                        and generation == self._generation)
                if keep:
                    self._spare = (key, kernel)
                if not self._spawning:
                    self._idle.set()
            if kernel is not None and not keep:
                self._discard(kernel)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no spare is being launched (a launch takes tens of milliseconds)."""
        return self._idle.wait(timeout)

    @property
    def has_spare(self) -> bool:
        return self._spare is not None

    def spare(self) -> Any | None:
        """The current spare without taking it (for tests and diagnostics)."""
        spare = self._spare
        return spare[1] if spare else None

    def shutdown(self, *, reopen: bool = False) -> None:
        """Kill the spare and stop making new ones (at exit; tests pass reopen=True to go on)."""
        with self._lock:
            self._closed = True
            self._generation += 1
            spare, self._spare = self._spare, None
        if spare is not None:
            self._discard(spare[1])
        self._idle.wait(30)
        with self._lock:
            spare, self._spare = self._spare, None
            self._closed = not reopen
        if spare is not None:
            self._discard(spare[1])

    def _discard(self, kernel: Any) -> None:
        if self._kill is not None:
            with contextlib.suppress(Exception):  # best effort at cleanup
                self._kill(kernel)


def _alive(kernel: Any) -> bool:
    check = getattr(kernel, "alive", None)
    return bool(check()) if callable(check) else True


pool = WarmPool()
atexit.register(pool.shutdown)

__all__ = ["WarmPool", "pool"]
