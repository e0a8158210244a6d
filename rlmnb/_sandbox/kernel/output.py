"""Printing inside the sandbox kernel: where a snippet's stdout and stderr go.

`OutputRouter` stands in for `sys.stdout`/`sys.stderr` so every write lands in the current snippet's
bounded buffer (a snippet printing 100 MB keeps only its head and tail); `MirroredBuffer` also copies
the first characters to a file, so the host can still show them when the kernel dies mid-snippet.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from rlmnb._sandbox.runner import BoundedBuffer


class OutputRouter:
    """Stands in for sys.stdout/sys.stderr: every write goes to the current snippet's bounded buffer.

    Between snippets (background threads) writes go to a spare buffer that opens the next snippet's output.
    """

    def __init__(self, original: Any, limit: int) -> None:
        self.original = original
        self.limit = limit
        self.lock = threading.Lock()
        self.sink = BoundedBuffer(limit)

    def swap(self, sink: BoundedBuffer) -> BoundedBuffer:
        with self.lock:
            old, self.sink = self.sink, sink
        return old

    def write(self, text: str) -> int:
        with self.lock:
            return self.sink.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return "utf-8"

    @property
    def errors(self) -> str:
        return "strict"

    def fileno(self) -> int:
        return int(self.original.fileno())


class MirroredBuffer(BoundedBuffer):
    """A snippet's output buffer whose first `limit` characters also go straight to a file, so the host
    can still show them when the kernel dies or is replaced before the snippet returns."""

    def __init__(self, limit: int, path: str | None) -> None:
        super().__init__(limit)
        self.path = path
        self.room = limit if path else 0
        self.fd: int | None = None

    def write(self, text: str) -> int:
        if self.room > 0:
            piece = str(text)[:self.room]
            self.room -= len(piece)
            if self.fd is None:
                self.fd = os.open(str(self.path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(self.fd, piece.encode("utf-8", "replace"))
        return super().write(text)

    def discard(self) -> None:
        """The snippet returned normally: its output travels in the reply, the mirror is not needed."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            with contextlib.suppress(OSError):
                os.unlink(str(self.path))


__all__ = ["MirroredBuffer", "OutputRouter"]
