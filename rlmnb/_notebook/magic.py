"""`%%rlm` and `%rlm`: ask a question of your data from a notebook cell.

Entry point: `RLMMagics.rlm`. This module runs a cell: it resolves the parsed options into models and
inputs, builds the `RLM`, executes it with the live view, keeps the session for `--continue` and shows the
outcome. What the user typed is parsed and checked in `options.py` (options declared with
`magic_arguments`, so `%%rlm?` documents them), the `%config RLMMagics.<name>` traits and their reports live
in `settings.py` and the `%rlm` subcommands in `commands.py`. Every user mistake is an IPython `UsageError`
raised before any model call. The run itself, the budget and the sandbox live in `rlmnb._api`.

Loading it must stay fast (`%load_ext rlmnb` imports no model, data-frame or widget library):
everything heavier is imported when a cell runs.
"""

from __future__ import annotations

import contextlib
import glob
import html
import keyword
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from rlmnb._ground.errors import MissingAPIKey, RLMError
from rlmnb._notebook.options import (
    SETTING_FLAGS,
    check_out_name,
    declare_arguments,
    fill_question,
    parse_line,
    setting_values,
    split_binding,
    unquote,
    verify_guard,
)
from rlmnb._notebook.settings import ENV_MODEL, ENV_SUB_MODEL, RLMSettings
from rlmnb.inputs._families.files import GlobFiles

if TYPE_CHECKING:
    from rlmnb._api import RLM, RunResult
    from rlmnb._notebook.widget import RunWidget

__all__ = ["RLMMagics", "RunFailed", "RunInterrupted", "SETTING_FLAGS", "register", "unregister"]

RESERVED_INPUT_NAMES = frozenset({"continue_from", "keep_session"})
GLOB_CHARS = frozenset("*?[")
MAX_HISTORY = 100  # runs kept for %rlm export --all (each holds its trajectory)
KEY_WAIT_S = 0.3  # how long a cell waits for the key check before showing the view (see _key_check)


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
# the magics


@magics_class
class RLMMagics(Magics, RLMSettings):  # type: ignore[misc,valid-type]
    """The %%rlm cell magic and %rlm line magic. Settings: `%config RLMMagics`."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.ip: Any = shell  # the InteractiveShell (typed Any: IPython is not fully annotated)
        self.last: RunResult | None = None
        self._placeholder: Any = None  # the display a run's widget takes over (see _new_view)
        self.history: list[RunResult] = []  # this kernel's runs, oldest first, for %rlm export PATH --all
        self._session_holder: RunResult | None = None
        self.last_models: tuple[Any, Any] = (None, None)  # the last run's root and sub model (%rlm models)
        self._held_in = "_rlm"  # where the last run's RunResult is: _rlm, and its -o NAME (errors say so)

    # ---- the magic --------------------------------------------------------------------------------
    @declare_arguments
    @line_cell_magic
    def rlm(self, line: str, cell: str | None = None) -> Any:
        """Ask a question of your data with a Recursive Language Model.

        The question goes on the lines below %%rlm; {name} is filled from your namespace ({{ and }} for
        literal braces). The cell's value is the answer; _rlm holds the RunResult (trajectory, usage, status).
        """
        if cell is None:
            return self._line(line)
        return self._cell(line, cell)

    # ---- %%rlm ------------------------------------------------------------------------------------
    def _cell(self, line: str, cell: str) -> Any:
        args = parse_line(self.rlm, line)
        interpolate = self.interpolate if args.interpolate is None else args.interpolate
        question = fill_question(cell, interpolate, self.ip.user_ns)
        if args.continue_run and args.dry_run:
            raise UsageError("--dry-run cannot be combined with --continue; dry-run the question as a new run.")
        previous = self._continuable() if args.continue_run else None
        out_name = check_out_name(args.out)
        inputs = self._inputs(args.inputs, args.files)
        schema = self._evaluate(args.schema, "--schema") if args.schema else None
        if args.replay:
            return self._replay(args.replay, inputs, out_name, args.quiet or self.quiet, schema)
        # every option that can fail is checked here, before anything is displayed (a widget that appears and
        # then gives way to a usage error reads as a run that started): models, settings, the run to resume
        model, sub_model = self._models(args.model, args.sub_model, required=not args.dry_run)
        if args.dry_run:  # no model is called: none is needed, and litellm is not loaded (dry_run.py)
            model, sub_model = self._unsent(model, sub_model)
        settings = setting_values(args)
        extras: dict[str, Any] = {}
        if args.child_model:
            extras["child_model"] = self._model_value(args.child_model.strip(), "--child-model")
        if args.verify:
            extras["verify"] = verify_guard(args.verify, self._model_value)
        resume: tuple[Path, bool] | None = None
        if args.resume:
            from rlmnb._notebook.commands import journal_for

            resume = (journal_for(args.resume), args.force)
        rlm = self._build(model, sub_model, args.sandbox or self.sandbox, schema, {**settings, **extras})
        quiet = args.quiet or self.quiet
        names = _model_names(model, sub_model)
        if args.dry_run:
            return self._dry_run_shown(rlm, question, inputs, None if quiet else names)
        keys = self._key_check(rlm)  # a key said missing at once fails here, before the view
        view = None if quiet else self._new_view(names)
        if view is not None:  # shown while the rest of the key check loads litellm (seconds, the first time)
            rlm.on_event = view.on_event
            view.display(self._placeholder)
            view.start()
        try:
            keys()
        except BaseException:
            if view is not None:
                view.discard()
            raise
        self.last_models = (rlm.model, rlm.sub_model)
        if view is not None and rlm.config.journal is not False:  # its saved output says how to go on
            import functools

            from rlmnb._engine.journal import first_run_note, journal_folder
            from rlmnb._notebook.commands import resume_note
            from rlmnb._notebook.frontend import keeps_live_view

            folder = journal_folder(rlm.config.journal)
            if keeps_live_view():  # else each refresh of the saved output would re-create the view (frontend.py)
                view.resume = functools.partial(resume_note, folder=folder, line=line)
            note = first_run_note(folder, rlm.config.journal_keep)  # once a process: where the runs are kept
            if note is not None:
                view.notice(note)  # in the live view only: a stderr line would change saved outputs (nbval)
        if previous is None or resume is not None:
            self._close_session()
        if resume is not None and view is not None:
            view.resuming(resume[0])
        result = self._execute(rlm, question, inputs, previous, view, resume)
        self._record(result, out_name)
        if view is None and quiet is False:  # widgets unavailable: show the static tree
            from IPython.display import display

            from rlmnb.views import TrajectoryView

            display(TrajectoryView(result.trajectory))  # type: ignore[no-untyped-call]
        return self._outcome(result)

    def _execute(self, rlm: RLM, question: str, inputs: dict[str, Any], previous: RunResult | None,
                 view: RunWidget | None, resume: tuple[Path, bool] | None = None) -> RunResult:
        try:
            if resume is not None:
                result = rlm.resume(resume[0], force=resume[1], keep_session=self.keep_session, **inputs)
            else:
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
                                 f"RunResult is in {self._held_in}.")
        if result.status == "error":
            error = result.error or result.reason
            if error.startswith(MissingAPIKey.__name__):
                raise UsageError(error.split(": ", 1)[-1])
            raise RunFailed(f"The run failed: {error.rstrip('.')}. The partial result is in {self._held_in}.")
        return result.answer

    def _record(self, result: RunResult, out_name: str | None) -> None:
        self.last = result
        self.history = [*self.history[-(MAX_HISTORY - 1):], result]
        self.ip.user_ns["_rlm"] = result
        self._held_in = f"_rlm and {out_name}" if out_name else "_rlm"
        if out_name:  # whatever the status: an interrupted or failed run is kept under its name too
            self.ip.user_ns[out_name] = result
        kept = result.session is not None and not result.session.closed
        previous = self._session_holder
        if previous is not None and previous.session is not result.session:
            self._close_session()  # never orphan a kept sandbox (for a kernel: its process)
        self._session_holder = result if kept else None

    # ---- resolving the options (all before any model call) --------------------------------------
    def _continuable(self) -> RunResult:
        last = self.last
        if last is None:
            raise UsageError("Nothing to continue: no %%rlm run has finished in this kernel yet.")
        if last.session is None or last.session.closed:
            raise UsageError(f"The last run (status {last.status!r}) kept no sandbox to continue: runs keep it only "
                             f"when they end normally and RLMMagics.keep_session is on. Start a new run instead.")
        return last

    def _inputs(self, bindings: list[str], files: list[str]) -> dict[str, Any]:
        inputs: dict[str, Any] = {}

        def add(name: str, value: Any, flag: str) -> None:
            if name in RESERVED_INPUT_NAMES:
                raise UsageError(f"{flag} {name}: that name is reserved; choose another input name.")
            if name in inputs:
                raise UsageError(f"{flag} {name}: the input {name!r} is bound twice; give each input its own name.")
            inputs[name] = value

        for spec in bindings:
            name, expr = split_binding(spec, "-i", "EXPR")
            add(name, self._evaluate(expr, f"-i {name}"), "-i")
        for spec in files:
            name, raw = split_binding(spec, "-f", "PATH", infer=_name_from_path)
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

    def _models(self, model_option: str | None, sub_option: str | None, *, required: bool = True) -> tuple[Any, Any]:
        model, _ = self._model_choice(model_option, self.model, ENV_MODEL, "-m")
        if model is None and required:
            raise UsageError("No model configured: pass -m MODEL (a litellm model such as openai/gpt-5-mini, or a "
                             "variable holding a model object), or set %config RLMMagics.model = '...', or the "
                             f"{ENV_MODEL} environment variable.")
        sub_model, _ = self._model_choice(sub_option, self.sub_model, ENV_SUB_MODEL, "-s")
        return model, sub_model

    @staticmethod
    def _unsent(model: Any, sub_model: Any) -> tuple[Any, Any]:
        """A dry run's stand-ins for the models (rlmnb._notebook.dry_run): names checked, nothing imported."""
        from rlmnb._notebook.dry_run import unsent

        try:
            return unsent(model), (unsent(sub_model) if sub_model is not None else None)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None

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
        if value.isidentifier():  # no provider prefix: a mistyped variable reads like a model name
            import difflib

            models = [name for name, obj in self.ip.user_ns.items() if not name.startswith("_")
                      and not isinstance(obj, type) and (hasattr(obj, "acomplete") or hasattr(obj, "complete"))]
            close = difflib.get_close_matches(value, models, n=1, cutoff=0.75)
            if close:
                raise UsageError(f"{flag} {value}: no variable {value!r}; did you mean {close[0]!r}? (A litellm "
                                 f"model name has its provider first, as in openai/gpt-5-mini.)")
        return value

    def _new_view(self, models: tuple[str, str] = ("", "")) -> RunWidget | None:
        import importlib.util
        import time

        self._placeholder = None
        if importlib.util.find_spec("ipywidgets") is None:  # the static tree is shown at the end instead
            return None
        from rlmnb._notebook.widget import RunWidget

        # something on screen at once: the first import of ipywidgets and the widget models take a while
        opened = time.time()
        self._placeholder = RunWidget.placeholder(models)
        view = RunWidget(interval=self.widget_interval, embed_trajectory=self.embed_trajectory)
        view.tree.opened = opened
        view.tree.expected_models = models
        return view

    def _build(self, model: Any, sub_model: Any, sandbox: str, schema: Any, settings: dict[str, Any]) -> RLM:
        """The cell's RLM, every setting and model name checked (no model is called, litellm is not loaded);
        its `on_event` is the view's, set once the view is shown."""
        from rlmnb._api import RLM

        try:
            return RLM(model, sub_model, sandbox=sandbox, schema=schema, config=self.run_config(), **settings)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None
        except ImportError as exc:
            raise UsageError(f"Cannot load the model adapter ({exc}); install it with: pip install litellm") \
                from None

    def _replay(self, path: str, inputs: dict[str, Any], out_name: str | None, quiet: bool, schema: Any) -> Any:
        from rlmnb._api import RLM
        from rlmnb._engine.replay import read_record

        try:  # a path, or a journal's number, run id or "last" as %rlm runs lists them
            record = read_record(unquote(path), listed_by="%rlm runs")
        except RLMError as exc:
            raise UsageError(f"--replay: {_sentence(exc)}") from None
        self._close_session()  # the kept session cannot be continued after a replay
        try:
            result = RLM.replay(record.journal or record.trajectory, schema=schema, **inputs)
        except RLMError as exc:
            raise UsageError(_sentence(exc)) from None
        self._record(result, out_name)
        if not quiet:
            from IPython.display import display

            from rlmnb.views import TrajectoryView

            display(TrajectoryView(result.trajectory))  # type: ignore[no-untyped-call]
        return self._outcome(result)

    def _key_check(self, rlm: RLM) -> Callable[[], None]:
        """Check the models' keys (`_check_keys`) in a thread, waiting up to KEY_WAIT_S for it here: a key found
        missing at once (a known provider's variable unset) fails before anything is shown, while a check that
        imports litellm (seconds) goes on behind the view. Returns the wait for the rest (raises its UsageError)."""
        from concurrent.futures import Future

        done: Future[None] = Future()

        def check() -> None:
            try:
                self._check_keys(rlm)
            except BaseException as exc:  # handed to the cell's thread, which raises it
                done.set_exception(exc)
            else:
                done.set_result(None)

        threading.Thread(target=check, name="rlmnb-key-check", daemon=True).start()
        with contextlib.suppress(TimeoutError):
            done.result(KEY_WAIT_S)
        return done.result

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

    def _dry_run_shown(self, rlm: RLM, question: str, inputs: dict[str, Any],
                       names: tuple[str, str] | None) -> Any:
        """The dry run's report, with a line on screen while it is built (the first one loads the tokenizer for
        seconds); `names` None: quiet, nothing shown. The line is cleared when the report (or the error) is the
        cell's outcome."""
        shown = _dry_run_placeholder(names) if names is not None else None
        try:
            return self._dry_run(rlm, question, inputs)
        finally:
            if shown is not None:  # the same keys as shown, cleared
                shown.update({"text/plain": "", "text/html": ""}, raw=True)

    def _dry_run(self, rlm: RLM, question: str, inputs: dict[str, Any]) -> Any:
        from rlmnb._engine.estimate import DryRunReport, estimate_run
        from rlmnb._models.base import model_label

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
        from rlmnb._notebook.commands import (
            line_command,  # loaded on the first %rlm line: keeps %load_ext light
        )

        return line_command(self, line)

    def __repr__(self) -> str:
        return f"RLMMagics(model={self.model!r}, sandbox={self.sandbox!r})"


# ==================================================================================================
# helpers


def _turn_started_type() -> Any:
    from rlmnb.events import TurnStarted

    return TurnStarted


def _sentence(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


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
    text = os.path.expanduser(unquote(raw))
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


def _model_names(model: Any, sub_model: Any) -> tuple[str, str]:
    """The root and sub model's names as the run will record them (a string, else the object's name)."""
    def name(m: Any) -> str:
        return m.strip() if isinstance(m, str) else str(getattr(m, "name", type(m).__name__))

    return name(model), name(sub_model if sub_model is not None else model)


def _dry_run_placeholder(models: tuple[str, str]) -> Any:
    """A line shown at once while a dry run builds its report (the first one loads the tokenizer for
    seconds); the display handle, cleared when the report is the cell's value."""
    from IPython.display import display

    text = (f"Dry run: building the first root request for {models[0]} and its estimate (no model is "
            f"called)…")
    return display({"text/plain": text, "text/html": f'<div class="rlmnb-dry-run-pending" style="opacity:0.7">'
                    f'{html.escape(text)}</div>'}, raw=True, display_id=True)  # type: ignore[no-untyped-call]
