"""A one-line terminal progress bar (redrawn with a carriage return; no dependency)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """`done/total`, the run in flight, the mean score so far, the money spent and an ETA."""

    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 24, enabled: bool = True) -> None:
        self.total = max(0, total)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled and total > 0
        self.done = 0
        self.scores: list[float] = []
        self.spent = 0.0
        self.started = time.monotonic()
        self._last = 0

    def start(self, label: str) -> None:
        self._draw(label)

    def advance(self, label: str, score: float, cost: float) -> None:
        self.done += 1
        self.scores.append(score)
        self.spent += cost
        self._draw(label)

    def close(self, message: str = "") -> None:
        if self.enabled:
            self.stream.write("\r" + " " * self._last + "\r")
            if message:
                self.stream.write(message + "\n")
            self.stream.flush()

    def _draw(self, label: str) -> None:
        if not self.enabled:
            return
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        mean = f" mean {100 * sum(self.scores) / len(self.scores):.0f}%" if self.scores else ""
        elapsed = time.monotonic() - self.started
        eta = ""
        if self.done and self.done < self.total:
            eta = f" ETA {_clock(elapsed / self.done * (self.total - self.done))}"
        text = f"[{bar}] {self.done}/{self.total} {label}{mean} ${self.spent:.4f}{eta}"
        pad = max(0, self._last - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last = len(text)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
