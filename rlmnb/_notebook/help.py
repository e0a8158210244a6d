"""What `%%rlm?` prints: the usage line as `%%rlm`, the options grouped by what they are for, examples.

IPython's `magic_arguments` would print a `::` line, call the magic `%rlm` and list the options in one
block; this module writes the help from the same argparse parser instead, so every option stays
documented once (in magic_parsing.py) and nothing is listed twice or missed: an option that no group
names lands under "Other options".
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

__all__ = ["GROUPS", "help_text"]

# (title, option strings): the order of the help
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Models", ("--model", "--sub-model", "--child-model")),
    ("Inputs", ("--input", "--file", "--no-interpolate")),
    ("Limits", ("--max-iterations", "--max-llm-calls", "--max-cost", "--max-time", "--timeout", "--no-cache")),
    ("Where the code runs", ("--sandbox", "--confinement", "--allow-path", "--allow-network")),
    ("Recursion and checking", ("--depth", "--strict-depth", "--verify", "--min-confidence", "--max-revisions",
                                "--refine", "--rounds", "--schema")),
    ("Results and sessions", ("--out", "--quiet", "--continue", "--dry-run", "--replay")),
)

EXAMPLES = """\
Examples:
  %%rlm -m openai/gpt-5 -s openai/gpt-5-mini -i tickets=df
  Which product areas get the most billing complaints? Quote two tickets for each.

  %%rlm -f contracts=./contracts/*.md --max-cost 0.50 --dry-run
  Which contracts renew automatically? (shows the first prompt and a cost estimate; no model call)

  %%rlm -i logs=big_text -o run --max-llm-calls 200
  When did the first timeout happen? (`run` keeps the RunResult; run.to_frame() lists its sub-calls)
"""

LINE_COMMANDS = """\
Line commands:
  %rlm config               the effective settings by topic, and where each comes from
  %rlm models               the models in use, where each came from, whether its provider key is set
  %rlm last                 show the last run again
  %rlm export PATH [NAME]   save the last run, or the RunResult in NAME, or with --all every run of
                            this kernel: .json (the RunResult) or .html (a standalone page)
  %rlm view PATH            show a saved trajectory (.json)
Defaults: %config RLMMagics.model = "openai/gpt-5" (see %config RLMMagics for every setting)."""


def _invocation(action: argparse.Action) -> str:
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (action.dest.upper() if not action.choices else
                                 "{" + ",".join(str(c) for c in action.choices) + "}")
    return f"{names} {metavar}"


def _entry(action: argparse.Action, width: int) -> str:
    head = "  " + _invocation(action)
    body = " ".join((action.help or "").split())
    if len(head) <= 26:
        wrapped = textwrap.wrap(body, width - 28) or [""]
        return "\n".join([f"{head:<28}{wrapped[0]}", *(" " * 28 + line for line in wrapped[1:])])
    return "\n".join([head, *(" " * 28 + line for line in textwrap.wrap(body, width - 28))])


def help_text(parser: argparse.ArgumentParser, description: str, *, width: int = 100) -> str:
    """The whole `%%rlm?` text: usage as `%%rlm`, the description, grouped options, examples, line commands."""
    actions = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    usage = " ".join(parser.format_usage().split()[2:])  # without "usage:" and the program name
    usage_lines = textwrap.wrap(usage, width - 13, break_on_hyphens=False)
    parts = ["Usage: %%rlm " + (usage_lines[0] if usage_lines else ""), *(" " * 13 + u for u in usage_lines[1:]),
             "             <your question, on the lines below>", "", description.strip(), ""]
    placed: set[str] = set()
    by_flag = {flag: a for a in actions for flag in a.option_strings}
    for title, flags in GROUPS:
        group = [by_flag[f] for f in flags if f in by_flag]
        if not group:
            continue
        parts.append(f"{title}:")
        for action in group:
            placed.add(action.dest)
            parts.append(_entry(action, width))
        parts.append("")
    others = [a for a in actions if a.dest not in placed]
    if others:
        parts.append("Other options:")
        parts.extend(_entry(a, width) for a in others)
        parts.append("")
    parts.extend([EXAMPLES, LINE_COMMANDS])
    return "\n".join(parts)


def install_help(func: Any, description: str) -> None:
    """Give a `declare_arguments` magic the help above and a parser that says `%%rlm` and takes no
    abbreviations (`--max-iter` is an error, not a silent `--max-iterations`)."""
    parser = func.parser
    parser.prog = "%%rlm"
    parser.allow_abbrev = False
    func.__doc__ = help_text(parser, "\n\n".join(textwrap.fill(p, 100) for p in description.split("\n\n")))
