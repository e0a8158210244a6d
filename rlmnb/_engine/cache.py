"""The response cache: identical sub-model requests are answered from disk, within a run and across re-runs.

A request's key is a SHA-256 over the model's identity (its name and the parameters that change
its answers, never an API key), the messages and the call parameters. Only successful replies are
stored. Storage is `diskcache` (SQLite plus files) in `platformdirs.user_cache_dir("rlmnb")/responses`,
bounded to 1 GB by default with least-recently-stored eviction; set `RLMNB_CACHE_DIR` to move it
(tests point it at a temporary folder).

Reads are a single SQLite lookup on the caller's thread (write-ahead logging means a reader never
waits for a writer). Writes go to one background thread, gathered for 0.1 s into one transaction,
so a run's event loop never waits on the disk; until a write lands, the entry is served from memory.

Which models are cached: those with a `cache_identity()` method returning a dict (`LiteLLM` has
one). Scripted test models have none, so their replies are never cached.

The short request hashes events carry (and replay matches requests by) live here too, beside the cache
key: `request_sha` of a root request's messages, `prompt_sha` of a sub-call's prompt.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import Completion, Message

__all__ = ["DEFAULT_SIZE_LIMIT", "ENV_DIR", "ResponseCache", "cache_identity", "close_cache", "default_cache_dir",
           "open_cache", "prompt_sha", "request_key", "request_sha"]

DEFAULT_SIZE_LIMIT = 1 << 30  # 1 GB
ENV_DIR = "RLMNB_CACHE_DIR"
_FORMAT = 1
_GATHER_S = 0.1  # how long the writer gathers writes into one transaction


def default_cache_dir() -> Path:
    """`$RLMNB_CACHE_DIR`, else the user's cache folder for rlmnb plus "responses"."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("rlmnb")) / "responses"


def cache_identity(lm: Any) -> dict[str, Any] | None:
    """The part of a model that decides its answers, or None when the model must not be cached."""
    method = getattr(lm, "cache_identity", None)
    if not callable(method):
        return None
    identity = method()
    return dict(identity) if isinstance(identity, Mapping) else None


def request_key(identity: Mapping[str, Any], messages: list[Message], params: Mapping[str, Any] | None = None) -> str:
    """SHA-256 hex of (identity, messages, params); stable across processes and dict orders."""
    payload = json.dumps({"v": _FORMAT, "model": identity, "messages": messages, "params": dict(params or {})},
                         sort_keys=True, ensure_ascii=False, default=repr, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def request_sha(messages: list[Message]) -> str:
    """A short hash of what a root request sends (roles and contents); replay matches root requests by it."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(str(message.get("role", "")).encode())
        digest.update(b"\x00")
        digest.update(str(message.get("content", "")).encode("utf-8", "surrogatepass"))
        digest.update(b"\x01")
    return digest.hexdigest()[:16]


def prompt_sha(text: str) -> str:
    """A short hash of a sub-call's prompt; replay matches sub-calls by it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ResponseCache:
    """A size-bounded disk cache of model replies, safe across threads and processes.

    Args:
        directory: where to keep it; default `default_cache_dir()`.
        size_limit: bytes on disk before the oldest entries are evicted; default 1 GB.
    """

    def __init__(self, directory: str | Path | None = None, *, size_limit: int = DEFAULT_SIZE_LIMIT) -> None:
        import diskcache

        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.directory.mkdir(parents=True, exist_ok=True)
        # cull_limit=0: eviction runs once per written batch (in the writer thread), not on every set
        self._disk = diskcache.Cache(str(self.directory), size_limit=size_limit, timeout=10, cull_limit=0,
                                     eviction_policy="least-recently-stored")
        self._pending: dict[str, str] = {}  # written by callers, not yet on disk
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, str] | threading.Event | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self.hits = 0
        self.misses = 0

    # ---- reading and writing ----------------------------------------------------------------------
    def get(self, key: str) -> Completion | None:
        """The stored reply as a cached Completion (no tokens or cost spent), or None."""
        with self._lock:
            raw = self._pending.get(key)
        if raw is None and not self._closed:
            try:
                raw = self._disk.get(key)
            except Exception:  # a locked or damaged cache is a miss, never a failed call
                raw = None
        if not isinstance(raw, str):
            self.misses += 1
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            self.misses += 1
            return None
        self.hits += 1
        meta = {"cached": True, "cached_input_tokens": data.get("input_tokens", 0),
                "cached_output_tokens": data.get("output_tokens", 0)}
        return Completion(text=str(data["text"]), usage=CallUsage(0, 0, 0.0, cached=True),
                          model=str(data.get("model", "")), meta=meta)

    def get_many(self, keys: list[str]) -> dict[str, Completion]:
        """The stored replies among `keys`, read in one transaction (call it off the event loop)."""
        found: dict[str, Completion] = {}
        if self._closed or not keys:
            return found
        try:
            with self._disk.transact():
                for key in keys:
                    hit = self.get(key)
                    if hit is not None:
                        found[key] = hit
        except Exception:  # a locked or damaged cache is all misses, never a failed call
            return found
        return found

    def put(self, key: str, completion: Completion) -> None:
        """Store a successful reply (in the background)."""
        if self._closed:
            return
        raw = json.dumps({"text": completion.text, "model": completion.model,
                          "input_tokens": completion.usage.input_tokens,
                          "output_tokens": completion.usage.output_tokens}, ensure_ascii=False)
        with self._lock:
            self._pending[key] = raw
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="rlmnb-cache-writer", daemon=True)
                self._writer.start()
        self._queue.put((key, raw))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued write is on disk; False on timeout."""
        if self._writer is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:  # closed
                return
            if isinstance(first, tuple):
                time.sleep(_GATHER_S)  # let a fan-out's replies pile up: one transaction, fewer GIL hand-offs
            batch: list[tuple[str, str] | threading.Event | None] = [first]
            while len(batch) < 1024:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            writes = [item for item in batch if isinstance(item, tuple)]
            if writes and not self._closed:
                try:
                    with self._disk.transact():
                        for key, raw in writes:
                            self._disk.set(key, raw)
                    self._disk.cull()
                except Exception:  # a cache that cannot be written is only slower
                    pass
            with self._lock:
                for key, raw in writes:
                    if self._pending.get(key) == raw:
                        del self._pending[key]
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if stop:
                return

    # ---- housekeeping -----------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            pending = len(self._pending)
        return len(self._disk) + pending

    def clear(self) -> None:
        """Remove every stored reply."""
        self.flush()
        with self._lock:
            self._pending.clear()
        self._disk.clear()

    def volume(self) -> int:
        """Bytes used on disk."""
        return int(self._disk.volume())

    def close(self) -> None:
        """Write what is pending, stop the writer thread and close the files (idempotent)."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join(5)
        self._disk.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.directory)!r})"


_open: dict[str, ResponseCache] = {}
_open_lock = threading.Lock()


def open_cache(directory: str | Path | None = None) -> ResponseCache:
    """The process-wide cache for a folder (default `default_cache_dir()`), opened on first use."""
    path = str(Path(directory) if directory is not None else default_cache_dir())
    with _open_lock:
        cache = _open.get(path)
        if cache is None or cache._closed:
            cache = _open[path] = ResponseCache(path)
        return cache


def close_cache(directory: str | Path | None = None) -> None:
    """Close the process-wide cache of a folder if it was opened (tests use a folder per test)."""
    path = str(Path(directory) if directory is not None else default_cache_dir())
    with _open_lock:
        cache = _open.pop(path, None)
    if cache is not None:
        cache.close()


@atexit.register
def _flush_all() -> None:
    for cache in list(_open.values()):
        with contextlib.suppress(Exception):
            cache.flush(timeout=5.0)
