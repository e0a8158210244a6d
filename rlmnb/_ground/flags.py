"""Command-line flags that set RLM settings, declared once for the `%%rlm` magic and the `rlmnb` command.

Each flag is one `SettingFlag` record: its spelling, the RLMConfig setting it sets, how its value is
converted, and whether it repeats. `magic_parsing.declare_arguments` turns them into the magic's
options, `add_flags` into an argparse parser's (the `rlmnb` command's), both through
`argparse_options`, so `--allow-path /data:rw` means the same in a cell and in a shell. The values go
to `RLM(...)` unchanged and are checked there (config.py, sandbox/confinement.py): one `ConfigError`
sentence, before any model call, whichever front end they came from.

No IPython here: the command line imports this without paying for a shell.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CONFINEMENT_SETTINGS", "SETTING_FLAGS", "SettingFlag", "add_flags", "argparse_options", "flags_for",
           "setting_docs", "values_of"]


@dataclass(frozen=True)
class SettingFlag:
    """A command-line flag that sets one RLM keyword (an RLMConfig setting).

    `type` converts the value (int, float, str); None makes a switch that stores `const`.
    The help text defaults to the setting's documentation in config.py.
    """

    flag: str
    setting: str
    type: Callable[[str], Any] | None = None
    const: Any = True
    metavar: str | None = None
    help: str | None = None
    many: bool = False  # repeatable: the values form a tuple

    @property
    def dest(self) -> str:
        return "setting_" + self.setting


SETTING_FLAGS: tuple[SettingFlag, ...] = (
    SettingFlag("--max-iterations", "max_iterations", int, metavar="N"),
    SettingFlag("--max-llm-calls", "max_llm_calls", int, metavar="N"),
    SettingFlag("--timeout", "timeout", float, metavar="SECONDS"),
    SettingFlag("--max-cost", "max_cost", float, metavar="USD"),
    SettingFlag("--max-time", "max_time", float, metavar="SECONDS"),
    SettingFlag("--no-cache", "cache", None, const=False,
                help="Send every sub-call to the model (do not serve repeats from the response cache)."),
    SettingFlag("--depth", "max_depth", int, metavar="N",
                help="Recursion depth: rlm_query starts child runs while their depth is below N (default 1: "
                     "rlm_query is a plain sub-call)."),
    SettingFlag("--strict-depth", "strict_depth", None, const=True,
                help="At the depth cap, fail rlm_query with DepthLimitReached instead of a plain sub-call."),
    SettingFlag("--min-confidence", "min_confidence", float, metavar="X"),
    SettingFlag("--max-revisions", "max_revisions", int, metavar="N"),
    SettingFlag("--refine", "refine", int, metavar="N"),
    SettingFlag("--rounds", "rounds", int, metavar="K"),
    SettingFlag("--confinement", "confinement", str, metavar="auto|required|off"),
    SettingFlag("--allow-path", "allow_paths", str, metavar="PATH[:rw]", many=True,
                help="Let a confined kernel sandbox read PATH (PATH:rw: also write) (repeatable; replaces "
                     "RLMMagics.allow_paths for this cell)."),
    SettingFlag("--allow-network", "allow_network", str, metavar="HOST:PORT", many=True,
                help="Let a confined kernel sandbox connect to HOST:PORT over TCP (repeatable; replaces "
                     "RLMMagics.allow_network for this cell)."),
)

CONFINEMENT_SETTINGS = ("confinement", "allow_paths", "allow_network")


def setting_docs() -> dict[str, str]:
    """RLMConfig's field docs (the string literal under each field), read from config.py's source."""
    from rlmnb._ground import config as config_module

    try:
        tree = ast.parse(Path(config_module.__file__).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    docs: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "RLMConfig":
            body = node.body
            for stmt, after in zip(body, body[1:], strict=False):
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def flags_for(settings: Iterable[str]) -> tuple[SettingFlag, ...]:
    """The flags of these settings, in the order given (KeyError for a setting that has none)."""
    by_setting = {f.setting: f for f in SETTING_FLAGS}
    return tuple(by_setting[name] for name in settings)


def argparse_options(flag: SettingFlag, docs: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments of `add_argument` for one flag (`docs`: setting -> help text)."""
    options: dict[str, Any] = {"dest": flag.dest, "default": None, "help": flag.help or docs.get(flag.setting, flag.setting)}
    if flag.type is None:
        options.update(action="store_const", const=flag.const)
    else:
        options.update(type=flag.type, metavar=flag.metavar or flag.setting.upper())
    if flag.many:
        options["action"] = "append"
    return options


def add_flags(parser: argparse.ArgumentParser, flags: Iterable[SettingFlag], docs: Mapping[str, str],
              rewrite: Mapping[str, str] | None = None) -> None:
    """Declare `flags` on an argparse parser as the magic declares them; `rewrite` replaces words in the
    help texts (the magic's help names RLMMagics, a shell has no such thing)."""
    for flag in flags:
        options = argparse_options(flag, docs)
        for old, new in (rewrite or {}).items():
            options["help"] = options["help"].replace(old, new)
        parser.add_argument(flag.flag, **options)


def values_of(args: argparse.Namespace, flags: Iterable[SettingFlag]) -> dict[str, Any]:
    """The RLM keywords that the given flags set on this command line (repeatable ones as tuples)."""
    return {f.setting: tuple(getattr(args, f.dest)) if f.many else getattr(args, f.dest)
            for f in flags if getattr(args, f.dest, None) is not None}
