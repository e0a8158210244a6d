"""What the user typed into a `%%rlm` cell, parsed and checked before anything runs.

The option line is declared with `magic_arguments` (so `%%rlm?` documents every option, and each
RLMConfig flag is one `SettingFlag` line), the question is filled from the user's namespace, and
every mistake is one `UsageError` sentence. Nothing here evaluates the user's expressions or
starts a run: magic.py does that with what this returns.

`%%rlm?` prints help written from the same argparse parser (`help_text`): the usage line as `%%rlm`,
the options grouped by what they are for, examples and the line commands. Every option stays
documented once, in its declaration; an option that no group names lands under "Other options".
"""

from __future__ import annotations

import argparse
import inspect
import keyword
import string
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from rlmnb._ground.config import SANDBOXES
from rlmnb._ground.flags import SETTING_FLAGS, SettingFlag, argparse_options, values_of
from rlmnb._notebook.settings import setting_docs

__all__ = ["GROUPS", "MAX_QUESTION_CHARS", "SETTING_FLAGS", "SettingFlag", "check_out_name", "declare_arguments",
           "fill_question", "help_text", "install_help", "parse_line", "setting_values", "split_binding", "unquote",
           "verify_guard"]

MAX_QUESTION_CHARS = 20_000  # an interpolated question longer than this carries data, not a question
CLOSE_MATCH = 0.7  # difflib ratio of an unknown option's name to a declared one's for "did you mean" (--max-iter
# -> --max-iterations is 0.73; --bogus -> --rounds is 0.55)


# ==================================================================================================
# the argument declarations


_ARGUMENTS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("-m", "--model"), {"metavar": "MODEL", "help": "Root model: a variable holding a model object (e.g. a "
                         "ScriptedLM) or a litellm model name such as openai/gpt-5. Default: "
                         "RLMMagics.model, then $RLMNB_MODEL."}),
    (("-s", "--sub-model"), {"metavar": "MODEL", "dest": "sub_model", "help": "Model behind llm_query, "
                             "given like --model. Default: RLMMagics.sub_model, then $RLMNB_SUB_MODEL, "
                             "then the root model."}),
    (("-i", "--input"), {"metavar": "NAME=EXPR", "action": "append", "dest": "inputs", "default": [],
                         "help": "Bind inputs[NAME] to EXPR evaluated in your namespace (repeatable); "
                         "-i df binds df under its own name. Quote an EXPR with spaces."}),
    (("-f", "--file"), {"metavar": "NAME=PATH", "action": "append", "dest": "files", "default": [],
                        "help": "Bind inputs[NAME] to a file, a directory (a lazy mapping of relative "
                        "path -> content) or a glob (the same mapping over the matches) (repeatable)."}),
    (("--sandbox",), {"choices": SANDBOXES, "default": None,
                      "help": "Where the model's code runs. Default: RLMMagics.sandbox."}),
    (("--schema",), {"metavar": "NAME", "help": "A pydantic model or dataclass in your namespace the "
                     "answer must validate against."}),
    (("-o", "--out"), {"metavar": "NAME", "help": "Also store the RunResult in this variable, whatever its "
                       "status (interrupted and failed runs too); _rlm always holds the last one."}),
    (("--continue",), {"action": "store_true", "dest": "continue_run", "help": "Carry on the previous "
                       "run's sandbox state and conversation with this new question."}),
    (("--dry-run",), {"action": "store_true", "dest": "dry_run", "help": "Show the inputs summary, the "
                      "exact first root prompt, its token count and an estimated cost range; call no model."}),
    (("--quiet",), {"action": "store_true", "help": "Show no widget; the cell's value is still the answer."}),
    (("--child-model",), {"metavar": "MODEL", "dest": "child_model", "help": "Root model of child runs "
                          "(rlm_query), given like --model. Default: the sub-model."}),
    (("--verify",), {"metavar": "RULE", "action": "append", "dest": "verify", "default": [],
                     "help": "Check each answer and revise while it scores below --min-confidence "
                     "(repeatable): min_chars=N, pattern=REGEX, judge=MODEL, quotes (every quoted passage must "
                     "be in the inputs; quotes=N counts passages of N+ characters, default 20)."}),
    (("--replay",), {"metavar": "PATH", "help": "Re-run a saved trajectory (.json) with every model reply "
                     "served from the record: same code, zero cost. Bind the run's in-memory inputs with -i."}),
    (("--resume",), {"metavar": "RUN", "nargs": "?", "const": "last", "help": "Continue a run from its journal "
                     "(RUN: a .jsonl path, a name or a number from %rlm runs; default the newest): answered calls "
                     "are served from it, the rest go live. The cell's question is not used. Bind in-memory inputs "
                     "again with -i."}),
    (("--force",), {"action": "store_true", "help": "With --resume: resume even if an input changed."}),
    (("--no-interpolate",), {"action": "store_false", "dest": "interpolate", "default": None,
                             "help": "Take the question literally: do not fill {name} from your namespace."}),
)


def declare_arguments(func: Any) -> Any:
    """Apply the argument declarations (ours, then SETTING_FLAGS) in the order they are listed."""
    docs = setting_docs()
    specs = list(_ARGUMENTS)
    for flag in SETTING_FLAGS:  # options that map to RLM keywords (setting_flags.py, shared with the CLI)
        specs.append(((flag.flag,), argparse_options(flag, docs)))
    description = inspect.cleandoc(func.__doc__ or "")
    func.__doc__ = description
    for names, options in reversed(specs):
        func = argument(*names, **options)(func)  # type: ignore[no-untyped-call]
    func = magic_arguments()(func)  # type: ignore[no-untyped-call]
    install_help(func, description)  # %%rlm? help grouped with examples; no abbreviated options
    return func


# ==================================================================================================
# parsing a cell


def parse_line(magic: Any, line: str) -> Any:
    """The option line of `magic` (a function declared with `declare_arguments`) as an argparse Namespace."""
    try:
        args = parse_argstring(magic, line)  # type: ignore[no-untyped-call]
    except UsageError as exc:
        raise UsageError(f"{exc}{_did_you_mean(magic, str(exc))} (see %%rlm? for the options)") from None
    repeated = _repeated_option(magic.parser, line)
    if repeated is not None:
        raise UsageError(f"{repeated} is given more than once; give it once (see %%rlm? for the options).")
    for name in ("model", "sub_model", "schema", "out"):  # IPython keeps quotes around option values
        value = getattr(args, name)
        if isinstance(value, str):
            setattr(args, name, unquote(value))
    return args


def _repeated_option(parser: argparse.ArgumentParser, line: str) -> str | None:
    """The first single-valued option the line gives twice (argparse would keep the last one silently), e.g.
    `-m a ... --model b`; None when there is none. Repeatable (append) options and flags may repeat."""
    from IPython.utils.process import arg_split  # type: ignore[attr-defined]  # the split parse_argstring uses

    seen: dict[str, str] = {}
    words = arg_split(line)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        name, has_value = (word.split("=", 1)[0], True) if word.startswith("--") and "=" in word else (word, False)
        action = parser._option_string_actions.get(name)
        if action is None or type(action).__name__ != "_StoreAction":
            continue  # a value, a flag, a repeatable option
        if action.dest in seen:
            return f"{seen[action.dest]} / {name}" if seen[action.dest] != name else name
        seen[action.dest] = name
        if has_value:
            continue
        if action.nargs is None or (action.nargs == "?" and index < len(words) and not words[index].startswith("-")):
            index += 1  # its value, which may itself start with a dash
    return None


def _did_you_mean(magic: Any, message: str) -> str:
    """"; did you mean --max-iterations?" for each unrecognized option close to a declared one (as model
    names get); "" when none is close."""
    import difflib

    if "unrecognized arguments:" not in message:
        return ""
    parser = getattr(magic, "parser", None)
    declared = sorted(getattr(parser, "_option_string_actions", {}))
    words = message.split("unrecognized arguments:", 1)[1].split()
    hints = []
    for word in (w.split("=", 1)[0] for w in words if w.startswith("-")):
        same = [d for d in declared if d.startswith("--") == word.startswith("--")]
        longer = [d for d in same if d.startswith(word) and len(word) > 3]  # an abbreviation, refused as such
        bare = {d.lstrip("-"): d for d in same}  # compared without the dashes, which every option shares
        near = difflib.get_close_matches(word.lstrip("-"), list(bare), n=1, cutoff=CLOSE_MATCH)
        close = longer[:1] if len(longer) == 1 else [bare[n] for n in near]
        if close and close[0] != word:
            hints.append(f"{word}: did you mean {close[0]}?")
    return f"; {'; '.join(hints)}" if hints else ""


def setting_values(args: Any) -> dict[str, Any]:
    """The RLM keywords the SETTING_FLAGS options given on the line set."""
    return values_of(args, SETTING_FLAGS)


def fill_question(cell: str, interpolate: bool, namespace: Mapping[str, Any]) -> str:
    """The cell's question with {name} filled from the user's namespace (UsageError when it cannot be)."""
    if not cell.strip():
        raise UsageError("The cell is empty: write your question on the lines below %%rlm.")
    if not interpolate:
        return cell.strip()
    try:
        text = string.Formatter().vformat(cell, (), _UserNamespace(namespace))
    except _MissingName as exc:
        raise UsageError(f"The question uses {{{exc.name}}} but no variable {exc.name!r} exists: define it, "
                         f"write {{{{ and }}}} for literal braces, or add --no-interpolate.") from None
    except (ValueError, IndexError) as exc:
        raise UsageError(f"The question's braces cannot be filled ({exc}): write {{{{ and }}}} for literal "
                         f"braces, or add --no-interpolate.") from None
    except Exception as exc:
        raise UsageError(f"Filling the question's {{...}} fields failed with {type(exc).__name__}: {exc}. "
                         f"Fix the expression, or add --no-interpolate.") from None
    if not text.strip():
        raise UsageError("The question is empty after filling its {...} fields.")
    if len(text) > MAX_QUESTION_CHARS and len(text) > 2 * len(cell):
        raise UsageError(f"The question is {len(text):,} characters once its {{...}} fields are filled: the root "
                         f"model would read the data itself. Bind large values as inputs (-i NAME=EXPR) and "
                         f"name them in the question instead.")
    return text.strip()


def check_out_name(name: str | None) -> str | None:
    """The -o variable name, checked to be one."""
    if name is None:
        return None
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"-o {name}: not a valid variable name.")
    return name


def verify_guard(specs: list[str], model_value: Callable[[str, str], Any]) -> Any:
    """--verify min_chars=N / pattern=REGEX / judge=MODEL / quotes[=N] as one guard (all rules must hold)."""
    from rlmnb._guards.quotes import QuotesFound
    from rlmnb._guards.rules import AllOf, LLMJudge, RuleBased

    rules: dict[str, Any] = {}
    judges: list[Any] = []
    for spec in specs:
        key, sep, value = unquote(spec).partition("=")
        key, value = key.strip(), value.strip()
        if key == "quotes":  # quoted passages must be in the inputs, word for word
            if sep and (not value.isdigit() or int(value) <= 0):
                raise UsageError(f"--verify quotes={value}: give the shortest quote as a positive whole number.")
            judges.append(QuotesFound(min_chars=int(value)) if sep else QuotesFound())
            continue
        if not sep or not value:
            raise UsageError(f"--verify {spec}: use min_chars=N, pattern=REGEX, judge=MODEL or quotes.")
        if key == "min_chars":
            if not value.isdigit() or int(value) <= 0:
                raise UsageError(f"--verify min_chars={value}: give a positive whole number.")
            rules["min_chars"] = int(value)
        elif key == "pattern":
            import re

            try:
                re.compile(value)
            except re.error as exc:
                raise UsageError(f"--verify pattern={value}: not a valid regular expression ({exc}).") from None
            rules["pattern"] = value
        elif key == "judge":
            judges.append(LLMJudge(model_value(value, "--verify judge")))
        else:
            raise UsageError(f"--verify {key}=...: unknown rule; use min_chars=N, pattern=REGEX, judge=MODEL or "
                             f"quotes.")
    guards = ([RuleBased(**rules)] if rules else []) + judges
    return guards[0] if len(guards) == 1 else AllOf(guards)


def unquote(text: str) -> str:
    """An option value without the quotes IPython keeps around it."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def split_binding(spec: str, flag: str, what: str, infer: Callable[[str], str | None] | None = None
                  ) -> tuple[str, str]:
    """'NAME=VALUE' -> (NAME, VALUE). Without a name: an identifier names itself (-i df), or `infer`
    derives the name from the value (-f ./policy.md -> policy)."""
    spec = unquote(spec)  # IPython splits options like a shell but keeps the quotes
    head, sep, tail = spec.partition("=")
    if sep and head.strip().isidentifier() and tail.strip():
        name, value = head.strip(), tail.strip()
    elif infer is None:
        if not spec.strip().isidentifier():
            raise UsageError(f"{flag} {spec}: give the input a name, as {flag} NAME={what} "
                             f"(NAME a valid Python identifier).")
        name = value = spec.strip()
    else:
        value = spec.strip()
        inferred = infer(value)
        if inferred is None:
            raise UsageError(f"{flag} {spec}: give the input a name, as {flag} NAME={what}.")
        name = inferred
    if keyword.iskeyword(name):
        raise UsageError(f"{flag} {spec}: {name!r} is a Python keyword; choose another input name.")
    return name, value


class _MissingName(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _UserNamespace(Mapping[str, Any]):
    """The user's namespace as format() keyword arguments; a missing name is reported by name."""

    def __init__(self, ns: Mapping[str, Any]) -> None:
        self.ns = ns

    def __getitem__(self, key: str) -> Any:
        try:
            return self.ns[key]
        except KeyError:
            raise _MissingName(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.ns)

    def __len__(self) -> int:
        return len(self.ns)


# ==================================================================================================
# the help `%%rlm?` prints


# (title, option strings): the order of the help
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Models", ("--model", "--sub-model", "--child-model")),
    ("Inputs", ("--input", "--file", "--no-interpolate")),
    ("Limits", ("--max-iterations", "--max-llm-calls", "--max-cost", "--max-time", "--timeout", "--no-cache")),
    ("Where the code runs", ("--sandbox", "--confinement", "--allow-path", "--allow-network")),
    ("Recursion and checking", ("--depth", "--strict-depth", "--verify", "--min-confidence", "--max-revisions",
                                "--refine", "--rounds", "--schema")),
    ("Results and sessions", ("--out", "--quiet", "--continue", "--dry-run", "--replay", "--resume", "--force")),
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
