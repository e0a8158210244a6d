"""Noticing a step that repeats an earlier one: the same code (comments and layout aside), the same output.

A small model stuck in a loop runs the same code turn after turn and reads the same output each
time; nothing in the output itself tells it so. `Repeats.check` remembers each turn's code and
output and names the earlier turn a new one repeats, so the observation can say it.
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field

_TURN_MARK = re.compile(r"<turn \d+(?:\.\d+)?>")  # tracebacks name the turn: the same error reads the same
_LAYOUT = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def normal_code(code: str) -> str:
    """The code's tokens without comments, blank lines or indentation; whitespace-joined text if it does not tokenize."""
    try:
        return " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                        if t.type not in _LAYOUT)
    except (tokenize.TokenError, SyntaxError):
        return " ".join(code.split())


@dataclass
class Repeats:
    """The steps of one run, by the hash of their normalised code and their output."""

    seen: dict[str, int] = field(default_factory=dict)

    def check(self, turn: int, code: str, output: str) -> int | None:
        """The earlier turn this one repeats, or None; remembers this turn either way."""
        shown = _TURN_MARK.sub("<turn>", output)
        key = hashlib.sha256(f"{normal_code(code)}\x00{shown}".encode("utf-8", "surrogatepass")).hexdigest()
        earlier = self.seen.get(key)
        self.seen[key] = turn
        return earlier
