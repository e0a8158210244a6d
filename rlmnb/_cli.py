"""The `rlmnb` command: demo, run, view, replay, resume, runs, eval.

Exit codes: 0 the run answered (submitted or fallback); 1 it ended without an answer (error,
budget exhausted); 2 bad arguments, missing files or missing API keys; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlmnb._ground.flags import CONFINEMENT_SETTINGS, add_flags, flags_for, setting_docs, values_of

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CLIError", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_CONFINEMENT_FLAGS = flags_for(CONFINEMENT_SETTINGS)  # --confinement, --allow-path, --allow-network: as in %%rlm
_SHELL_HELP = {"; replaces RLMMagics.allow_paths for this cell": "", "; replaces RLMMagics.allow_network for this cell": ""}


_RECORD_HELP = ("a saved trajectory (.json), a journal (.jsonl), or a number or run id from `rlmnb runs` "
                "(last: the newest)")


# eval's confinement options, said in one line each (run and demo keep the settings' own fuller help)
_EVAL_CONFINEMENT_HELP = {"setting_confinement": "how the kernel sandbox is confined (default auto)",
                          "setting_allow_paths": "a path the kernel sandbox may read (PATH:rw: write too); repeatable",
                          "setting_allow_network": "a HOST:PORT the kernel sandbox may connect to; repeatable"}


class CLIError(Exception):
    """A user mistake: printed as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlmnb", description="Recursive Language Models over inputs of any size.")
    docs = setting_docs()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the offline demo (generated data, scripted models)")
    demo.add_argument("--size", type=int, default=20_000_000, help="characters of generated text (default 20M)")
    demo.add_argument("--html", default="rlmnb-demo.html", help="where to write the HTML view")
    demo.add_argument("--sandbox", choices=("local", "kernel"), default="local",
                      help="where the model's code runs: a thread here, or a confined kernel (default local)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the generated text and its hidden fact (default 0)")
    add_flags(demo, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)

    run = sub.add_parser("run", help="answer a question over files with a real model")
    run.add_argument("question", help="the question to answer (quote it)")
    run.add_argument("-m", "--model", required=True, help="root model, as provider/name (e.g. openai/gpt-5-mini)")
    run.add_argument("-s", "--sub-model", help="sub-model (default: the root model)")
    run.add_argument("--api-base", help="an OpenAI-compatible server for both models (vLLM, Ollama, the fake server); "
                                        "one on this machine needs no key")
    run.add_argument("--api-key", help="the key for both models (default: the provider's environment variable)")
    run.add_argument("-f", "--file", action="append", default=[], metavar="NAME=PATH",
                     help="bind a file or directory as inputs[NAME] (repeatable)")
    run.add_argument("--max-iterations", type=int, help="root turns at most (default 20)")
    run.add_argument("--max-llm-calls", type=int, help="sub-calls at most (default 50)")
    run.add_argument("--timeout", type=float, help="seconds one code snippet may run (default 60)")
    run.add_argument("--max-cost", type=float, help="dollars the run may spend (its models need a price)")
    run.add_argument("--max-time", type=float, help="seconds the whole run may take")
    run.add_argument("--sandbox", choices=("local", "kernel"), help="where the model's code runs (default kernel)")
    add_flags(run, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)
    run.add_argument("--no-cache", action="store_true", help="do not use the response cache")
    run.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    run.add_argument("--save", metavar="PATH", help="write the trajectory JSON here")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="print each turn's code and its output on stderr as the run goes")

    view = sub.add_parser("view", help="turn a saved trajectory or a journal into an HTML page")
    view.add_argument("path", help=_RECORD_HELP)
    view.add_argument("-o", "--output", help="HTML file to write (default: PATH with .html)")

    resume = sub.add_parser("resume", help="continue a run from its journal (answered calls are not paid again)")
    resume.add_argument("path", help="the run's journal: a .jsonl path, or a number or run id from `rlmnb runs`")
    resume.add_argument("-m", "--model", help="root model (default: the recorded one)")
    resume.add_argument("-s", "--sub-model", help="sub-model (default: the recorded one)")
    resume.add_argument("--api-base", help="an OpenAI-compatible server for both models")
    resume.add_argument("--api-key", help="the key for both models (default: the provider's environment variable)")
    resume.add_argument("-f", "--file", action="append", default=[], metavar="NAME=PATH",
                        help="bind an input again (files are re-read from their recorded paths by default)")
    resume.add_argument("--max-iterations", type=int, help="root turns in all (more, to go on after they ran out)")
    resume.add_argument("--max-llm-calls", type=int, help="sub-calls in all, answered ones included")
    resume.add_argument("--force", action="store_true", help="resume even if an input changed since the run")
    resume.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    resume.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    resume.add_argument("-v", "--verbose", action="store_true",
                        help="print each turn's code and its output on stderr as the run goes")

    runs = sub.add_parser("runs", help="list the journals of runs, numbered (question, status, cost, when)")
    runs.add_argument("folder", nargs="?", help="default: $RLMNB_JOURNAL_DIR or .rlmnb/runs")

    replay = sub.add_parser("replay", help="re-run a saved trajectory or a journal offline, replies served from "
                                           "the record")
    replay.add_argument("path", help=_RECORD_HELP)
    replay.add_argument("--json", action="store_true", help="print the result as JSON on stdout")

    from rlmnb._eval.command import add_arguments as add_eval_arguments

    evaluate = sub.add_parser("eval", help="score methods (rlm, direct, ...) on the long-context task suite")
    add_eval_arguments(evaluate)
    add_flags(evaluate, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)
    for action in evaluate._actions:
        action.help = _EVAL_CONFINEMENT_HELP.get(action.dest, action.help)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        handler = {"demo": _demo, "run": _run, "view": _view, "replay": _replay, "eval": _eval,
                   "resume": _resume, "runs": _runs}[args.command]
        return handler(args)
    except CLIError as exc:
        print(f"rlmnb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rlmnb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        from rlmnb._ground.errors import ConfigError, InputError, MissingAPIKey, ReplayDivergence

        if isinstance(exc, ConfigError | InputError | MissingAPIKey | ReplayDivergence | FileNotFoundError):
            text = str(exc).replace("pass api_key=...", "pass --api-key KEY") if isinstance(exc, MissingAPIKey) else exc
            print(f"rlmnb: {text}", file=sys.stderr)
            return EXIT_USAGE
        raise


def _demo(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM
    from rlmnb._ground.config import RLMConfig
    from rlmnb._sandbox.confinement.policy import check_settings
    from rlmnb.testing.scenarios import needle_scenario
    from rlmnb.views import RunTree, render_text
    from rlmnb.views._page import page_title, viewer_page

    if args.size < 1000:
        raise CLIError("--size must be at least 1000 characters.")
    confinement = values_of(args, _CONFINEMENT_FLAGS)
    checked = RLMConfig(**confinement).validate()  # a mistyped flag is said before the text is generated
    check_settings(checked.confinement, checked.allow_paths, checked.allow_network)
    print(f"Generating {args.size:,} characters of text with one hidden fact (seed {args.seed})...")
    scenario = needle_scenario(args.size, seed=args.seed)
    rlm = RLM(scenario.root, scenario.sub, sandbox=args.sandbox,
              **{**scenario.settings, **confinement})
    from rlmnb._engine.journal import first_run_note, journal_folder

    note = first_run_note(journal_folder(rlm.config.journal), rlm.config.journal_keep)
    if note:
        print(note)
    started = time.perf_counter()
    result = rlm.run(scenario.question, **scenario.inputs)
    elapsed = time.perf_counter() - started
    print(render_text(result.trajectory))
    Path(args.html).write_text(viewer_page([(result.trajectory, "rlmnb demo")], page_title(result.trajectory, "rlmnb demo")),
                               encoding="utf-8")
    verdict = "correct" if result.answer == scenario.expected else f"WRONG (expected {scenario.expected})"
    from rlmnb.views._format import fmt_secs

    took = RunTree(result.trajectory.events).run_view()["elapsed"]  # the view's own figure, as its header says
    print(f"\nThe answer is {verdict}; the run took {fmt_secs(took)} ({fmt_secs(elapsed)} with the sandbox's "
          f"set-up). HTML view written to {args.html}")
    return EXIT_OK if result.answer == scenario.expected else EXIT_FAILED


def _bind_files(specs: list[str]) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise CLIError(f"-f expects NAME=PATH, got {spec!r}.")
        target = Path(path.strip()).expanduser()
        if not target.exists():
            raise CLIError(f"-f {name}: no file or directory at {target}; check the path.")
        inputs[name.strip()] = target
    return inputs


def _progress(verbose: bool) -> Any:
    """The run's event subscriber for stderr: turns, batches, failures and the end; with `verbose`, each
    turn's code and what it printed, as each snippet finishes."""

    def say(text: str, indent: str) -> None:
        print(textwrap.indent(text, indent), file=sys.stderr, flush=True)

    def on_event(event: Any) -> None:
        kind = event.kind
        indent = "  " * event.depth
        if kind == "turn_started":
            say(f"turn {event.turn}/{event.max_turns}", indent)
        elif kind == "batch_finished":
            say(f"  batch of {event.size} sub-calls, {event.errors} errors, {event.latency_s:.2f} s", indent)
        elif kind == "code_executed" and verbose:
            output = "\n".join(part for part in (event.stdout.rstrip(), event.stderr.rstrip(), event.error or "")
                               if part) or ("(timed out)" if event.timed_out else "(no output)")
            say(f"  code:\n{textwrap.indent(event.code.rstrip(), '    ')}\n  output:\n"
                f"{textwrap.indent(output, '    ')}", indent)
        elif kind == "code_executed" and (event.error or event.timed_out):
            say(f"  code failed: {event.error_type or 'timeout'}", indent)
        elif kind == "run_finished":
            say(f"finished: {event.status}", indent)

    return on_event


def _models(model: str, sub_model: str | None, api_base: str | None, api_key: str | None) -> tuple[Any, Any]:
    """The root and sub-model for the command line's names: plain names when neither --api-base nor --api-key
    is given (the RLM resolves them), else LiteLLMs with both. A server on this machine needs no key: when
    neither --api-key nor the provider's variable gives one, a placeholder is sent (local servers ignore it)."""
    if not api_base and not api_key:
        return model, sub_model
    from rlmnb._models.litellm import LiteLLM
    from rlmnb._models.request_policy import is_loopback

    def lm(name: str) -> Any:
        options: dict[str, Any] = {"api_base": api_base} if api_base else {}
        made = LiteLLM(name, **options, api_key=api_key) if api_key else LiteLLM(name, **options)
        if not api_key and is_loopback(api_base) and not os.environ.get(made.key_env_var(), "").strip():
            made = LiteLLM(name, **options, api_key=LOCAL_PLACEHOLDER_KEY)
        return made

    return lm(model), (lm(sub_model) if sub_model else None)


LOCAL_PLACEHOLDER_KEY = "no-key"  # sent to a server on this machine when no key is given (it checks none)


def _run(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM

    inputs = _bind_files(args.file)
    settings = {k: v for k, v in {
        "max_iterations": args.max_iterations, "max_llm_calls": args.max_llm_calls, "timeout": args.timeout,
        "max_cost": args.max_cost, "max_time": args.max_time}.items() if v is not None}
    if args.no_cache:
        settings["cache"] = False
    if args.sandbox:
        settings["sandbox"] = args.sandbox
    settings.update(values_of(args, _CONFINEMENT_FLAGS))  # checked by RLM(...) below, before any model call
    model, sub_model = _models(args.model, args.sub_model, args.api_base, args.api_key)
    rlm = RLM(model, sub_model, on_event=None if args.quiet else _progress(args.verbose), **settings)
    rlm.check_keys()  # a missing key is said now, before litellm is imported (seconds) and the inputs are bound
    result = rlm.run(args.question, **inputs)
    if args.save:
        result.save(args.save)
    if result.status == "error" and (result.error or "").startswith("MissingAPIKey"):
        raise CLIError(result.reason)
    _print_result(result, args.json)
    return _exit_for(result.status)


def _print_result(result: Any, as_json: bool) -> None:
    if as_json:
        data = result.to_dict()
        data.pop("trajectory", None)
        print(json.dumps(data, ensure_ascii=False, default=str))
        return
    answer = result.answer if isinstance(result.answer, str) else json.dumps(result.answer, default=str, indent=1)
    print(answer)
    print(f"[{result.status}: {result.usage.root_calls} root + {result.usage.sub_calls} sub-calls, "
          f"{result.usage.tokens:,} tokens, {_cost_text(result)}, {result.usage.wall_s:.1f} s]",
          file=sys.stderr)


def _cost_text(result: Any) -> str:
    """The run's cost, naming the models whose calls had no price (root calls: the root's, sub-calls: the sub's)."""
    from rlmnb.views._format import fmt_cost

    usage = result.usage
    unpriced: dict[str, None] = {}
    starts = {e.run_id: e for e in result.trajectory.events if e.kind == "run_started"}
    for event in result.trajectory.events:
        if event.kind in ("model_reply", "sub_call_finished") and event.usage and event.usage.get("cost_usd") is None:
            start = starts.get(event.run_id)
            if start is not None:
                unpriced[start.model if event.kind == "model_reply" else start.sub_model] = None
    return fmt_cost(usage.cost_usd, usage.unpriced_calls, tuple(unpriced))


def _exit_for(status: str) -> int:
    if status in ("submitted", "fallback"):
        return EXIT_OK
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_FAILED


def _view(args: argparse.Namespace) -> int:
    from rlmnb._engine.replay import read_record  # a path, a number or run id from `rlmnb runs`, "last"
    from rlmnb.views._page import page_title, viewer_page

    record = read_record(args.path)  # a mistake is a ConfigError: one line, exit 2 (main)
    source, trajectory = record.path, record.trajectory
    assert source is not None  # read from a file
    target = Path(args.output) if args.output else source.with_suffix(".html")
    target.write_text(viewer_page([(trajectory, source.stem)], page_title(trajectory, source.stem)), encoding="utf-8")
    print(f"wrote {target}")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM
    from rlmnb._engine.replay import read_record
    from rlmnb._ground.errors import ReplayDivergence
    from rlmnb.events import RunStarted

    record = read_record(args.path)
    source, trajectory, journal = record.path, record.trajectory, record.journal
    assert source is not None
    starts = [e for e in trajectory.of(RunStarted) if e.depth == 0]
    in_memory = [str(i.get("name")) for i in (starts[0].inputs if starts else []) if not i.get("path")]
    if in_memory:  # files are re-read from their paths; values the run was given in Python cannot be
        how = (f"RLM(model).resume({str(source)!r}, {in_memory[0]}=...) goes on from where it stopped"
               if journal is not None and journal.final() is None else
               f"RLM.replay({str(source)!r}, {in_memory[0]}=...)")
        raise CLIError(f"{source.name} was run over in-memory inputs ({', '.join(in_memory)}), which the command "
                       f"line cannot pass again: in Python, {how}.")
    try:
        result = RLM.replay(journal or trajectory)
    except ReplayDivergence as exc:
        if journal is not None and journal.final() is None:
            raise CLIError(f"{exc} The journal {source.name} ends before its run did: continue it with "
                           f"`rlmnb resume {args.path}`.") from None
        raise
    _print_result(result, args.json)
    return _exit_for(result.status)


def _resume(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM
    from rlmnb._engine.journal import find_journal, read_journal

    source = find_journal(args.path)
    try:
        journal = read_journal(source)
    except ValueError as exc:
        raise CLIError(f"{exc} `rlmnb resume` continues a journal (.jsonl; `rlmnb runs` lists them); a saved "
                       f"trajectory (.json) runs again with `rlmnb replay`.") from None
    model = args.model or journal.header.get("model")
    sub_model = args.sub_model or journal.header.get("sub_model")
    if not model:
        raise CLIError("the journal names no root model: pass -m MODEL.")
    if not args.api_base:  # a name without a provider is a model object's (a ScriptedLM, an LM), not litellm's
        if sub_model and "/" not in str(sub_model) and args.model and not args.sub_model:
            sub_model = None  # the recorded sub-model was an object: the given root model serves both
        bare = next((str(n) for n, given in ((model, args.model), (sub_model, args.sub_model))
                     if n and not given and "/" not in str(n)), None)
        if bare is not None:
            raise CLIError(f"the run used a model object named {bare!r} (a ScriptedLM or your own LM), which a "
                           f"journal cannot rebuild: pass -m/-s provider/name to go on with a real model, or resume "
                           f"it in Python with RLM(model, sub_model).resume({str(source)!r}).")
    model, sub_model = _models(model, sub_model, args.api_base, args.api_key)
    settings = {k: v for k, v in {"max_iterations": args.max_iterations,
                                  "max_llm_calls": args.max_llm_calls}.items() if v is not None}
    rlm = RLM(model, sub_model, on_event=None if args.quiet else _progress(args.verbose), **settings)
    rlm.check_keys()
    result = rlm.resume(journal, force=args.force, **_bind_files(args.file))
    _print_result(result, args.json)
    return _exit_for(result.status)


def _runs(args: argparse.Namespace) -> int:
    from rlmnb._engine.journal import journal_folder, list_journals

    folder = Path(args.folder) if args.folder else journal_folder(True)
    assert folder is not None
    found = list_journals(folder)  # numbered as view, replay and resume take them (journal.numbered_journals)
    if not found:
        print(f"no journals in {folder}")
        return EXIT_OK
    print(f"Journals in {folder}, newest first (view, replay or resume one by its number or path):")
    print("\n".join(f"{number:>3}  {summary.row()}" for number, summary in enumerate(found, 1)))
    return EXIT_OK


def _eval(args: argparse.Namespace) -> int:
    from rlmnb._eval.command import run

    return run(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
