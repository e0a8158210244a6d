"""`%%rlm` and `%rlm`: ask a question of your data from a notebook cell.

This module only turns what the user typed into an `RLM` call and shows the outcome: arguments are
declared with `magic_arguments` (so `%%rlm?` documents them), defaults are traitlets settable with
`%config RLMMagics.<name> = ...`, and every user mistake is an IPython `UsageError` raised before
any model call. The run itself, the budget and the sandbox live in `api.py`.

Loading it must stay fast (`%load_ext rlmnb` imports no model, data-frame or widget library):
everything heavier is imported when a cell runs.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import glob
import inspect
import keyword
import os
import string
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Any as TAny
from traitlets import Bool, Enum, Float, Int, List, TraitType, Unicode, Union
from traitlets.config import Configurable

from .config import SANDBOXES, RLMConfig
from .errors import MissingAPIKey, RLMError
from .inputs.files import GlobFiles

if TYPE_CHECKING:
    from .api import RLM, RunResult
    from .widget import RunWidget

__all__ = ["RLMMagics", "RunFailed", "RunInterrupted", "SETTING_FLAGS", "register", "unregister"]

ENV_MODEL = "RLMNB_MODEL"
ENV_SUB_MODEL = "RLMNB_SUB_MODEL"
RESERVED_INPUT_NAMES = frozenset({"continue_from", "keep_session"})
GLOB_CHARS = frozenset("*?[")
MAX_QUESTION_CHARS = 20_000  # an interpolated question longer than this carries data, not a question


# ==================================================================================================
# options that map to RLM keywords: adding a flag is one line here


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
)


# ==================================================================================================
# traits: one per RLMConfig setting, with the setting's documentation as help


def setting_docs() -> dict[str, str]:
    """RLMConfig's field docs (the string literal under each field), read from config.py's source."""
    from . import config as config_module

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


_SIMPLE_TRAITS: dict[str, type[TraitType[Any, Any]]] = {"int": Int, "float": Float, "str": Unicode, "bool": Bool}


def _trait_for(annotation: str, default: Any, help_text: str) -> TraitType[Any, Any]:
    """A config trait matching a setting's annotation ("int | None", "tuple[str, ...]", ...)."""
    parts = [p.strip() for p in annotation.split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    trait: TraitType[Any, Any]
    if kinds == ["tuple[str, ...]"]:
        trait = List(Unicode(), default_value=list(default), help=help_text)
    elif kinds and all(k in _SIMPLE_TRAITS for k in kinds):
        if len(kinds) == 1:
            trait = _SIMPLE_TRAITS[kinds[0]](default, allow_none=optional, help=help_text)
        else:
            trait = Union([_SIMPLE_TRAITS[k]() for k in kinds], default_value=default, allow_none=optional,
                          help=help_text)
    else:  # a shape we do not know: accept any value and let RLMConfig.validate judge it
        trait = TAny(default, help=help_text)
    return trait.tag(config=True)


def _setting_traits() -> dict[str, TraitType[Any, Any]]:
    docs = setting_docs()
    traits: dict[str, TraitType[Any, Any]] = {}
    for f in dataclasses.fields(RLMConfig):
        if f.name in ("sandbox", "extra") or f.default is dataclasses.MISSING:
            continue
        traits[f.name] = _trait_for(str(f.type), f.default, docs.get(f.name, ""))
    return traits


# The run settings as a base class of RLMMagics, so `%config RLMMagics` lists each with its help.
RLMSettings: type[Configurable] = types.new_class(
    "RLMSettings", (Configurable,),
    exec_body=lambda ns: ns.update(__doc__="Every RLMConfig setting as a configurable trait (defaults: RLMConfig's).",
                                   __module__=__name__, **_setting_traits()))
SETTING_TRAITS: tuple[str, ...] = tuple(RLMSettings.class_own_traits(config=True))


# ==================================================================================================
# errors shown as one line


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted (kernel stop button). Shown as one line; later queued cells are skipped."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        return [self.message]


class RunFailed(Exception):
    """The run stopped on a terminal error. Shown as one line; the partial result is in `_rlm`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        return [self.message]


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
    (("-o", "--out"), {"metavar": "NAME", "help": "Also store the RunResult in this variable (_rlm always "
                       "holds the last one)."}),
    (("--continue",), {"action": "store_true", "dest": "continue_run", "help": "Carry on the previous "
                       "run's sandbox state and conversation with this new question."}),
    (("--dry-run",), {"action": "store_true", "dest": "dry_run", "help": "Show the inputs summary, the "
                      "exact first root prompt, its token count and an estimated cost range; call no model."}),
    (("--quiet",), {"action": "store_true", "help": "Show no widget; the cell's value is still the answer."}),
    (("--child-model",), {"metavar": "MODEL", "dest": "child_model", "help": "Root model of child runs "
                          "(rlm_query), given like --model. Default: the sub-model."}),
    (("--verify",), {"metavar": "RULE", "action": "append", "dest": "verify", "default": [],
                     "help": "Check each answer and revise while it scores below --min-confidence "
                     "(repeatable): min_chars=N, pattern=REGEX, judge=MODEL."}),
    (("--replay",), {"metavar": "PATH", "help": "Re-run a saved trajectory (.json) with every model reply "
                     "served from the record: same code, zero cost. Bind the run's in-memory inputs with -i."}),
    (("--no-interpolate",), {"action": "store_false", "dest": "interpolate", "default": None,
                             "help": "Take the question literally: do not fill {name} from your namespace."}),
)


def _declare_arguments(func: Any) -> Any:
    """Apply the argument declarations (ours, then SETTING_FLAGS) in the order they are listed."""
    docs = setting_docs()
    specs = list(_ARGUMENTS)
    for flag in SETTING_FLAGS:
        options: dict[str, Any] = {"dest": flag.dest, "default": None,
                                   "help": flag.help or docs.get(flag.setting, flag.setting)}
        if flag.type is None:
            options.update(action="store_const", const=flag.const)
        else:
            options.update(type=flag.type, metavar=flag.metavar or flag.setting.upper())
        specs.append(((flag.flag,), options))
    func.__doc__ = inspect.cleandoc(func.__doc__ or "")
    for names, options in reversed(specs):
        func = argument(*names, **options)(func)  # type: ignore[no-untyped-call]
    return magic_arguments()(func)  # type: ignore[no-untyped-call]


# ==================================================================================================
# the magics


@magics_class
class RLMMagics(Magics, RLMSettings):  # type: ignore[misc,valid-type]
    """The %%rlm cell magic and %rlm line magic. Settings: `%config RLMMagics`."""

    model = Unicode("", help="Root model when -m is not given: a litellm model name or the name of a "
                    "variable holding a model object. Empty: $RLMNB_MODEL.").tag(config=True)
    sub_model = Unicode("", help="Sub-model when -s is not given (same forms as model). Empty: "
                        "$RLMNB_SUB_MODEL, then the root model.").tag(config=True)
    sandbox = Enum(SANDBOXES, default_value="kernel", help="Where the model's code runs: 'local' (a "
                   "namespace in this kernel) or 'kernel' (a separate process).").tag(config=True)
    quiet = Bool(False, help="Show no widget by default (as --quiet).").tag(config=True)
    interpolate = Bool(True, help="Fill {name} in the question from your namespace (--no-interpolate "
                       "turns it off for one cell).").tag(config=True)
    keep_session = Bool(True, help="Keep the last run's sandbox open so %%rlm --continue can follow up; "
                        "it is closed when the next run starts.").tag(config=True)
    widget_interval = Float(0.25, help="Seconds between live widget updates (at most ~4 per second by "
                            "default).").tag(config=True)
    embed_trajectory = Bool(True, help="Save the trajectory JSON in the cell output (what the JupyterLab "
                            "extension renders); turn off to keep notebooks of very large runs small.").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.ip: Any = shell  # the InteractiveShell (typed Any: IPython is not fully annotated)
        self.last: RunResult | None = None
        self._session_holder: RunResult | None = None

    # ---- the magic --------------------------------------------------------------------------------
    @_declare_arguments
    @line_cell_magic
    def rlm(self, line: str, cell: str | None = None) -> Any:
        """Ask a question of your data with a Recursive Language Model.

        Cell:  %%rlm [options]
               Your question; {name} is filled from your namespace ({{ and }} for literal braces).
        The cell's value is the answer; _rlm holds the RunResult (trajectory, usage, status).

        Line:  %rlm config        the effective settings and where each comes from
               %rlm last          show the last run again
               %rlm export PATH   save the last run: .json (the RunResult) or .html (a standalone page)
               %rlm view PATH     show a saved trajectory (.json)
        Defaults: %config RLMMagics.model = "openai/gpt-5" (and every other setting below).
        """
        if cell is None:
            return self._line(line)
        return self._cell(line, cell)

    # ---- %%rlm ------------------------------------------------------------------------------------
    def _cell(self, line: str, cell: str) -> Any:
        args = self._parse(line)
        interpolate = self.interpolate if args.interpolate is None else args.interpolate
        question = self._question(cell, interpolate)
        if args.continue_run and args.dry_run:
            raise UsageError("--dry-run cannot be combined with --continue; dry-run the question as a new run.")
        previous = self._continuable() if args.continue_run else None
        out_name = self._out_name(args.out)
        inputs = self._inputs(args.inputs, args.files)
        schema = self._evaluate(args.schema, "--schema") if args.schema else None
        if args.replay:
            schema = self._evaluate(args.schema, "--schema") if args.schema else None
            return self._replay(args.replay, inputs, out_name, args.quiet or self.quiet, schema)
        model, sub_model = self._models(args.model, args.sub_model)
        settings = {f.setting: getattr(args, f.dest) for f in SETTING_FLAGS if getattr(args, f.dest) is not None}
        extras: dict[str, Any] = {}
        if args.child_model:
            extras["child_model"] = self._model_value(args.child_model.strip(), "--child-model")
        if args.verify:
            extras["verify"] = self._guard(args.verify)
        quiet = args.quiet or self.quiet
        view = None if quiet or args.dry_run else self._new_view()
        rlm = self._build(model, sub_model, args.sandbox or self.sandbox, schema, {**settings, **extras}, view)
        if args.dry_run:
            return self._dry_run(rlm, question, inputs)
        self._check_keys(rlm)
        if previous is None:
            self._close_session()
        result = self._execute(rlm, question, inputs, previous, view)
        self._record(result, out_name)
        if view is None and quiet is False:  # widgets unavailable: show the static tree
            from IPython.display import display

            from .render import TrajectoryView

            display(TrajectoryView(result.trajectory))  # type: ignore[no-untyped-call]
        return self._outcome(result)

    def _execute(self, rlm: RLM, question: str, inputs: dict[str, Any], previous: RunResult | None,
                 view: RunWidget | None) -> RunResult:
        if view is not None:
            view.display()
            view.start()
        try:
            result = rlm.run(question, continue_from=previous, keep_session=self.keep_session, **inputs)
        except RLMError as exc:  # raised while preparing, before any model call
            if view is not None:
                view.discard()
            raise UsageError(_sentence(exc)) from None
        except BaseException:
            if view is not None:
                view.discard()
            raise
        if view is not None:
            view.finish()
        return result

    def _outcome(self, result: RunResult) -> Any:
        if result.status == "interrupted":
            turns = len(result.trajectory.of(_turn_started_type(), run_id=result.run_id))
            raise RunInterrupted(f"Run interrupted after {turns} turn(s); the partial trajectory is kept and the "
                                 f"RunResult is in _rlm.")
        if result.status == "error":
            error = result.error or result.reason
            if error.startswith(MissingAPIKey.__name__):
                raise UsageError(error.split(": ", 1)[-1])
            raise RunFailed(f"The run failed: {error.rstrip('.')}. The partial result is in _rlm.")
        return result.answer

    def _record(self, result: RunResult, out_name: str | None) -> None:
        self.last = result
        self.ip.user_ns["_rlm"] = result
        if out_name and result.status not in ("interrupted", "error"):
            self.ip.user_ns[out_name] = result
        kept = result.session is not None and not result.session.closed
        previous = self._session_holder
        if previous is not None and previous.session is not result.session:
            self._close_session()  # never orphan a kept sandbox (for a kernel: its process)
        self._session_holder = result if kept else None

    # ---- parsing and checks (all before any model call) -----------------------------------------
    def _parse(self, line: str) -> Any:
        try:
            args = parse_argstring(self.rlm, line)  # type: ignore[no-untyped-call]
        except UsageError as exc:
            raise UsageError(f"{exc} (see %%rlm? for the options)") from None
        for name in ("model", "sub_model", "schema", "out"):  # IPython keeps quotes around option values
            value = getattr(args, name)
            if isinstance(value, str):
                setattr(args, name, _unquote(value))
        return args

    def _question(self, cell: str, interpolate: bool) -> str:
        if not cell.strip():
            raise UsageError("The cell is empty: write your question on the lines below %%rlm.")
        if not interpolate:
            return cell.strip()
        try:
            text = string.Formatter().vformat(cell, (), _UserNamespace(self.ip.user_ns))
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

    def _continuable(self) -> RunResult:
        last = self.last
        if last is None:
            raise UsageError("Nothing to continue: no %%rlm run has finished in this kernel yet.")
        if last.session is None or last.session.closed:
            raise UsageError(f"The last run (status {last.status!r}) kept no sandbox to continue: runs keep it only "
                             f"when they end normally and RLMMagics.keep_session is on. Start a new run instead.")
        return last

    def _out_name(self, name: str | None) -> str | None:
        if name is None:
            return None
        if not name.isidentifier() or keyword.iskeyword(name):
            raise UsageError(f"-o {name}: not a valid variable name.")
        return name

    def _inputs(self, bindings: list[str], files: list[str]) -> dict[str, Any]:
        inputs: dict[str, Any] = {}

        def add(name: str, value: Any, flag: str) -> None:
            if name in RESERVED_INPUT_NAMES:
                raise UsageError(f"{flag} {name}: that name is reserved; choose another input name.")
            if name in inputs:
                raise UsageError(f"{flag} {name}: the input {name!r} is bound twice; give each input its own name.")
            inputs[name] = value

        for spec in bindings:
            name, expr = _split_binding(spec, "-i", "EXPR")
            add(name, self._evaluate(expr, f"-i {name}"), "-i")
        for spec in files:
            name, raw = _split_binding(spec, "-f", "PATH", infer=_name_from_path)
            add(name, _file_input(name, raw), "-f")
        return inputs

    def _evaluate(self, expr: str, where: str) -> Any:
        try:
            code = compile(expr, "<rlm option>", "eval")
        except SyntaxError as exc:
            raise UsageError(f"{where}: {expr!r} is not a valid Python expression ({exc.msg}).") from None
        try:
            return eval(code, self.ip.user_global_ns, self.ip.user_ns)  # the user's own expression
        except NameError as exc:
            raise UsageError(f"{where}: unknown variable {exc.name!r}; define it first or check the spelling.") \
                from None
        except Exception as exc:
            raise UsageError(f"{where}: evaluating {expr!r} raised {type(exc).__name__}: {exc}") from None

    def _models(self, model_option: str | None, sub_option: str | None) -> tuple[Any, Any]:
        model, _ = self._model_choice(model_option, self.model, ENV_MODEL, "-m")
        if model is None:
            raise UsageError("No model configured: pass -m MODEL (a litellm model such as openai/gpt-5-mini, or a "
                             "variable holding a model object), or set %config RLMMagics.model = '...', or the "
                             f"{ENV_MODEL} environment variable.")
        sub_model, _ = self._model_choice(sub_option, self.sub_model, ENV_SUB_MODEL, "-s")
        return model, sub_model

    def _model_choice(self, option: str | None, trait: str, env: str, flag: str) -> tuple[Any, str]:
        for value, source in ((option, "option"), (trait, "%config"), (os.environ.get(env), env)):
            if value and value.strip():
                return self._model_value(value.strip(), flag), source
        return None, ""

    def _model_value(self, value: str, flag: str) -> Any:
        if value.isidentifier() and value in self.ip.user_ns:
            obj = self.ip.user_ns[value]
            if isinstance(obj, str):
                return obj
            if hasattr(obj, "acomplete") or hasattr(obj, "complete"):
                return obj
            raise UsageError(f"{flag} {value}: the variable {value!r} holds a {type(obj).__name__}, not a model; "
                             f"pass a litellm model name such as openai/gpt-5-mini or a model object.")
        return value

    def _config(self) -> RLMConfig:
        values = {name: getattr(self, name) for name in SETTING_TRAITS}
        if "secret_env" in values:
            values["secret_env"] = tuple(values["secret_env"])
        try:
            return RLMConfig(**values).validate()
        except RLMError as exc:
            raise UsageError(f"A %config RLMMagics setting is invalid: {_sentence(exc)}") from None

    def _new_view(self) -> RunWidget | None:
        try:
            from .widget import RunWidget

            return RunWidget(interval=self.widget_interval, embed_trajectory=self.embed_trajectory)
        except ImportError:  # ipywidgets missing: the static tree is shown at the end instead
            return None

    def _build(self, model: Any, sub_model: Any, sandbox: str, schema: Any, settings: dict[str, Any],
               view: RunWidget | None) -> RLM:
        from .api import RLM

        try:
            return RLM(model, sub_model, sandbox=sandbox, schema=schema, config=self._config(),
                       on_event=view.on_event if view is not None else None, **settings)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None
        except ImportError as exc:
            raise UsageError(f"Cannot load the model adapter ({exc}); install it with: pip install litellm") \
                from None

    def _guard(self, specs: list[str]) -> Any:
        """--verify min_chars=N / pattern=REGEX / judge=MODEL as one guard (all rules must hold)."""
        from .verify import AllOf, LLMJudge, RuleBased

        rules: dict[str, Any] = {}
        judges: list[Any] = []
        for spec in specs:
            key, sep, value = _unquote(spec).partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not value:
                raise UsageError(f"--verify {spec}: use min_chars=N, pattern=REGEX or judge=MODEL.")
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
                judges.append(LLMJudge(self._model_value(value, "--verify judge")))
            else:
                raise UsageError(f"--verify {key}=...: unknown rule; use min_chars=N, pattern=REGEX or judge=MODEL.")
        guards = ([RuleBased(**rules)] if rules else []) + judges
        return guards[0] if len(guards) == 1 else AllOf(guards)

    def _replay(self, path: str, inputs: dict[str, Any], out_name: str | None, quiet: bool, schema: Any) -> Any:
        from .api import RLM

        source = Path(_unquote(path)).expanduser()
        if not source.is_file():
            raise UsageError(f"--replay {path}: no trajectory file there; check the path.")
        self._close_session()  # a replay is a new run: the kept session cannot be continued after it
        try:
            result = RLM.replay(source, schema=schema, **inputs)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None
        except (ValueError, KeyError) as exc:
            raise UsageError(f"--replay {path}: not an rlmnb trajectory ({exc}).") from None
        self._record(result, out_name)
        if not quiet:
            from IPython.display import display

            from .render import TrajectoryView

            display(TrajectoryView(result.trajectory))  # type: ignore[no-untyped-call]
        return self._outcome(result)

    def _check_keys(self, rlm: RLM) -> None:
        """A missing API key is a usage error before the run, where the adapter can tell."""
        models = (rlm.model, rlm.sub_model, getattr(rlm, "child_model", None))
        for lm in dict.fromkeys(m for m in models if m is not None):
            check = getattr(lm, "check_key", None)
            if check is not None:
                try:
                    check()
                except RLMError as exc:
                    raise UsageError(_sentence(exc)) from None
                except ImportError as exc:
                    raise UsageError(f"Cannot load litellm ({exc}); install it with: pip install litellm") from None

    def _dry_run(self, rlm: RLM, question: str, inputs: dict[str, Any]) -> Any:
        from .estimate import DryRunReport, estimate_run
        from .models import model_label

        try:
            plan = rlm.dry_run(question, **inputs)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None
        summary = plan["summary"]
        data_tokens = sum(int(getattr(f, "est_tokens", 0) or 0) for f in getattr(summary, "fields", ()))
        estimate = estimate_run(first_prompt_tokens=plan["tokens"], data_tokens=data_tokens, config=rlm.config,
                                model=rlm.model, sub_model=rlm.sub_model)
        return DryRunReport(summary=getattr(summary, "text", str(summary)), messages=plan["messages"],
                            tokens=plan["tokens"], estimate=estimate, data_tokens=data_tokens,
                            models=(model_label(rlm.model), model_label(rlm.sub_model)))

    # ---- sessions ---------------------------------------------------------------------------------
    def _close_session(self) -> None:
        holder, self._session_holder = self._session_holder, None
        if holder is not None and holder.session is not None:
            with contextlib.suppress(Exception):  # a sandbox failing to close must not block the next run
                holder.session.close()

    # ---- %rlm subcommands ------------------------------------------------------------------------
    def _line(self, line: str) -> Any:
        words = line.split(None, 1)
        command = words[0] if words else ""
        rest = words[1].strip() if len(words) > 1 else ""
        if command == "config":
            print(self.config_report())
            return None
        if command == "last":
            self._show(self._last_or_error().trajectory)
            return None
        if command == "export":
            return self._export(rest)
        if command == "view":
            return self._view(rest)
        what = f"unknown subcommand {command!r}" if command else "no subcommand"
        raise UsageError(f"%rlm: {what}. Use %rlm config | last | export PATH | view PATH, or a %%rlm cell to "
                         f"ask a question.")

    def _last_or_error(self) -> RunResult:
        if self.last is None:
            raise UsageError("No %%rlm run yet in this kernel.")
        return self.last

    def _show(self, trajectory: Any) -> None:
        from IPython.display import display

        try:
            from .widget import RunWidget

            RunWidget.from_trajectory(trajectory).display()
        except ImportError:
            from .render import TrajectoryView

            display(TrajectoryView(trajectory))  # type: ignore[no-untyped-call]

    def _export(self, raw: str) -> None:
        if not raw:
            raise UsageError("%rlm export needs a path ending in .json or .html.")
        result = self._last_or_error()
        path = Path(os.path.expanduser(_unquote(raw)))
        suffix = path.suffix.lower()
        if suffix not in (".json", ".html", ".htm"):
            raise UsageError(f"%rlm export {raw}: use a path ending in .json (the RunResult) or .html (a page).")
        if not path.parent.is_dir():
            raise UsageError(f"%rlm export {raw}: the folder {path.parent} does not exist.")
        if suffix == ".json":
            result.save(path)
        else:
            from .render import render_html

            path.write_text(render_html(result.trajectory, full_page=True), encoding="utf-8")
        print(f"Saved the last run to {path}")

    def _view(self, raw: str) -> None:
        if not raw:
            raise UsageError("%rlm view needs the path of a saved trajectory (.json).")
        from .events import Trajectory

        path = Path(os.path.expanduser(_unquote(raw)))
        try:
            trajectory = Trajectory.load(path)
        except FileNotFoundError:
            raise UsageError(f"%rlm view: no file at {path}; check the path.") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"%rlm view {raw}: not a saved rlmnb trajectory ({exc}).") from None
        self._show(trajectory)

    def config_report(self) -> str:
        """The effective settings and where each comes from (option defaults, %config, environment)."""
        lines = ["%%rlm settings (change with %config RLMMagics.<name> = value; options override per cell)"]
        for trait, env in (("model", ENV_MODEL), ("sub_model", ENV_SUB_MODEL)):
            value = getattr(self, trait)
            if value:
                lines.append(f"  {trait} = {value!r}  (%config)")
            elif os.environ.get(env):
                lines.append(f"  {trait} = {os.environ[env]!r}  (${env})")
            else:
                fallback = "not set: pass -m" if trait == "model" else "the root model"
                lines.append(f"  {trait}: {fallback}")
        for name in ("sandbox", "quiet", "interpolate", "keep_session", "widget_interval", "embed_trajectory"):
            lines.append(f"  {name} = {getattr(self, name)!r}{_origin(self, name)}")
        lines.append("Run settings (RLMConfig):")
        for name in SETTING_TRAITS:
            lines.append(f"  {name} = {getattr(self, name)!r}{_origin(self, name)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"RLMMagics(model={self.model!r}, sandbox={self.sandbox!r})"


# ==================================================================================================
# helpers


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


def _turn_started_type() -> Any:
    from .events import TurnStarted

    return TurnStarted


def _sentence(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _origin(obj: Configurable, name: str) -> str:
    trait = obj.traits()[name]
    return "" if getattr(obj, name) == trait.default() else "  (set)"


def _split_binding(spec: str, flag: str, what: str, infer: Callable[[str], str | None] | None = None
                   ) -> tuple[str, str]:
    """'NAME=VALUE' -> (NAME, VALUE). Without a name: an identifier names itself (-i df), or `infer`
    derives the name from the value (-f ./policy.md -> policy)."""
    spec = _unquote(spec)  # IPython splits options like a shell but keeps the quotes
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


def _name_from_path(raw: str) -> str | None:
    if any(c in GLOB_CHARS for c in raw):
        return None
    stem = Path(raw.rstrip("/\\")).stem
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    if name and name[0].isdigit():
        name = "_" + name
    return name if name.isidentifier() and not keyword.iskeyword(name) else None


def _file_input(name: str, raw: str) -> Any:
    """A Path for a file or directory; a GlobFiles mapping for a glob. UsageError when nothing is there."""
    text = os.path.expanduser(_unquote(raw))
    if any(c in GLOB_CHARS for c in text):
        matches = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not matches:
            raise UsageError(f"-f {name}={raw}: no file matches that pattern (relative paths start at "
                             f"{os.getcwd()}).")
        return GlobFiles(text, matches)
    path = Path(text)
    if not path.exists():
        raise UsageError(f"-f {name}={raw}: no file or directory at {path.absolute()}; check the path.")
    if not (path.is_file() or path.is_dir()):
        raise UsageError(f"-f {name}={raw}: {path} is neither a regular file nor a directory.")
    return path


# ==================================================================================================
# registration


def register(ipython: Any) -> RLMMagics:
    """Register %%rlm / %rlm on a shell and make `%config RLMMagics` see the settings."""
    magics = RLMMagics(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    if magics not in ipython.configurables:
        ipython.configurables.append(magics)
    return magics


def unregister(ipython: Any) -> None:
    """Remove the magics, close a kept sandbox and forget the settings object."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("rlm", None)
    instance = manager.registry.pop("RLMMagics", None)
    if instance is not None:
        instance._close_session()
        if instance in ipython.configurables:
            ipython.configurables.remove(instance)
