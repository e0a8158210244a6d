"""Model-facing text lives here as package data, so it can be read, reviewed and tested like code.

Templates use `$name` placeholders (string.Template), which leaves Python braces in examples alone.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

__all__ = ["load", "render"]


@cache
def load(name: str) -> str:
    """The text of prompts/<name>.md, without its trailing newline."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").rstrip("\n")


def render(name: str, **values: object) -> str:
    """Fill a template; a missing placeholder is a KeyError, never silently left in the text."""
    return Template(load(name)).substitute({k: str(v) for k, v in values.items()})
