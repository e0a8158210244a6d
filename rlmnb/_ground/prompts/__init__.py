"""Model-facing text lives here as package data, so it can be read, reviewed and tested like code.

Templates use `$name` placeholders (string.Template), which leaves Python braces in examples alone.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

__all__ = ["ask_plainly", "load", "render"]


@cache
def load(name: str) -> str:
    """The text of prompts/<name>.md, without its trailing newline."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").rstrip("\n")


def render(name: str, **values: object) -> str:
    """Fill a template; a missing placeholder is a KeyError, never silently left in the text."""
    return Template(load(name)).substitute({k: str(v) for k, v in values.items()})


def ask_plainly(question: str, text: str, *, tokens: int, name: str = "context", shown_chars: int | None = None,
                room: int = 0) -> str:
    """The model asked plainly: an instruction, the question, then the input `name` in tags, whole or (with
    `shown_chars` below its length) its first `shown_chars` characters, cut to about `room` tokens of `tokens`.

    One prompt for one idea: the eval's `direct` method sends it to the root model, and a first reading of a
    single text that fits one sub-call sends it too, so the harness has the text read at least the way the model
    alone would read it (recorded in docs/decisions/first-reading.md)."""
    if shown_chars is None or shown_chars >= len(text):
        note, shown = f"all of it, ~{tokens:,} tokens", text
    else:
        note = (f"CUT to its first {shown_chars / max(1, len(text)):.1%} (~{room:,} of ~{tokens:,} tokens) to fit "
                f"the context window; the rest is not shown")
        shown = text[:shown_chars]
    return render("ask_plainly", question=question, input=name, shown=note, context=shown)
