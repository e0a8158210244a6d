"""The `rlmnb` command: demo, run, view, replay, resume, runs, eval.

Exit codes: 0 the run answered (submitted or fallback); 1 it ended without an answer (error,
budget exhausted); 2 bad arguments, missing files or missing API keys; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlmnb._ground.flags import CONFINEMENT_SETTINGS, add_flags, flags_for, setting_docs, values_of

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CLIError", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_CONFINEMENT_FLAGS = flags_for(CONFINEMENT_SETTINGS)  # --confinement, --allow-path, --allow-network: as in %%rlm
_SHELL_HELP = {"; replaces RLMMagics.allow_paths for this cell": "", "; replaces RLMMagics.allow_network for this cell": ""}


class CLIError(Exception):
    """A user mistake: printed as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlmnb", description="Recursive Language Models over inputs of any size.")
    docs = setting_docs()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the offline demo (generated data, scripted models)")
    demo.add_argument("--size", type=int, default=20_000_000, help="characters of generated text (default 20M)")
    demo.add_argument("--html", default="rlmnb-demo.html", help="where to write the HTML view")
    demo.add_argument("--sandbox", choices=("local", "kernel"), default="local")
    demo.add_argument("--seed", type=int, default=0)
    add_flags(demo, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)

    run = sub.add_parser("run", help="answer a question over files with a real model")
    run.add_argument("question")
    run.add_argument("-m", "--model", required=True, help="root model (a litellm model string)")
    run.add_argument("-s", "--sub-model", help="sub-model (default: the root model)")
    run.add_argument("--api-base", help="an OpenAI-compatible server for both models (vLLM, Ollama, the fake server)")
    run.add_argument("-f", "--file", action="append", default=[], metavar="NAME=PATH",
                     help="bind a file or directory as inputs[NAME] (repeatable)")
    run.add_argument("--max-iterations", type=int)
    run.add_argument("--max-llm-calls", type=int)
    run.add_argument("--timeout", type=float)
    run.add_argument("--max-cost", type=float)
    run.add_argument("--max-time", type=float)
    run.add_argument("--sandbox", choices=("local", "kernel"))
    add_flags(run, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)
    run.add_argument("--no-cache", action="store_true", help="do not use the response cache")
    run.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    run.add_argument("--save", metavar="PATH", help="write the trajectory JSON here")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    view = sub.add_parser("view", help="turn a saved trajectory into an HTML page")
    view.add_argument("path")
    view.add_argument("-o", "--output", help="HTML file to write (default: PATH with .html)")

    resume = sub.add_parser("resume", help="continue a run from its journal (answered calls are not paid again)")
    resume.add_argument("path", help="the run's journal (.jsonl, listed by `rlmnb runs`)")
    resume.add_argument("-m", "--model", help="root model (default: the recorded one)")
    resume.add_argument("-s", "--sub-model", help="sub-model (default: the recorded one)")
    resume.add_argument("--api-base", help="an OpenAI-compatible server for both models")
    resume.add_argument("-f", "--file", action="append", default=[], metavar="NAME=PATH",
                        help="bind an input again (files are re-read from their recorded paths by default)")
    resume.add_argument("--max-iterations", type=int, help="root turns in all (more, to go on after they ran out)")
    resume.add_argument("--max-llm-calls", type=int)
    resume.add_argument("--force", action="store_true", help="resume even if an input changed since the run")
    resume.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    resume.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    runs = sub.add_parser("runs", help="list the journals of runs (question, status, cost, when)")
    runs.add_argument("folder", nargs="?", help="default: $RLMNB_JOURNAL_DIR or .rlmnb/runs")

    replay = sub.add_parser("replay", help="re-run a saved trajectory offline, replies served from the record")
    replay.add_argument("path")
    replay.add_argument("--json", action="store_true")

    from rlmnb._eval.command import add_arguments as add_eval_arguments

    evaluate = sub.add_parser("eval", help="score methods (rlm, direct, ...) on the long-context task suite")
    add_eval_arguments(evaluate)
    add_flags(evaluate, _CONFINEMENT_FLAGS, docs, _SHELL_HELP)
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
            print(f"rlmnb: {exc}", file=sys.stderr)
            return EXIT_USAGE
        raise


def _demo(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM
    from rlmnb._ground.config import RLMConfig
    from rlmnb._sandbox.confinement.policy import check_settings
    from rlmnb.testing.scenarios import needle_scenario
    from rlmnb.views import render_text
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
    started = time.perf_counter()
    result = rlm.run(scenario.question, **scenario.inputs)
    elapsed = time.perf_counter() - started
    print(render_text(result.trajectory))
    Path(args.html).write_text(viewer_page([(result.trajectory, "rlmnb demo")], page_title(result.trajectory, "rlmnb demo")),
                               encoding="utf-8")
    verdict = "correct" if result.answer == scenario.expected else f"WRONG (expected {scenario.expected})"
    from rlmnb.views._format import fmt_secs

    took = result.usage.wall_s or elapsed  # the figure the view above shows; set-up (sandbox, binding) apart
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


def _progress(event: Any) -> None:
    kind = event.kind
    indent = "  " * event.depth
    if kind == "turn_started":
        print(f"{indent}turn {event.turn}/{event.max_turns}", file=sys.stderr, flush=True)
    elif kind == "batch_finished":
        print(f"{indent}  batch of {event.size} sub-calls, {event.errors} errors, {event.latency_s:.2f} s",
              file=sys.stderr, flush=True)
    elif kind == "code_executed" and (event.error or event.timed_out):
        print(f"{indent}  code failed: {event.error_type or 'timeout'}", file=sys.stderr, flush=True)
    elif kind == "run_finished":
        print(f"{indent}finished: {event.status}", file=sys.stderr, flush=True)


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
    model: Any = args.model
    sub_model: Any = args.sub_model
    if args.api_base:
        from rlmnb._models.litellm import LiteLLM

        model = LiteLLM(args.model, api_base=args.api_base)
        sub_model = LiteLLM(args.sub_model, api_base=args.api_base) if args.sub_model else None
    rlm = RLM(model, sub_model, on_event=None if args.quiet else _progress, **settings)
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
          f"{result.usage.tokens:,} tokens, {result.usage.cost_text()}, {result.usage.wall_s:.1f} s]",
          file=sys.stderr)


def _exit_for(status: str) -> int:
    if status in ("submitted", "fallback"):
        return EXIT_OK
    return EXIT_INTERRUPTED if status == "interrupted" else EXIT_FAILED


def _view(args: argparse.Namespace) -> int:
    from rlmnb.events import Trajectory
    from rlmnb.views._page import page_title, viewer_page

    source = Path(args.path)
    if not source.is_file():
        raise CLIError(f"no trajectory file at {source}; check the path.")
    try:
        trajectory = Trajectory.load(source)
    except (ValueError, KeyError) as exc:
        raise CLIError(f"{source} is not an rlmnb trajectory: {exc}") from None
    target = Path(args.output) if args.output else source.with_suffix(".html")
    target.write_text(viewer_page([(trajectory, source.stem)], page_title(trajectory, source.stem)), encoding="utf-8")
    print(f"wrote {target}")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM

    source = Path(args.path)
    if not source.is_file():
        raise CLIError(f"no trajectory file at {source}; check the path.")
    result = RLM.replay(source)
    _print_result(result, args.json)
    return _exit_for(result.status)


def _resume(args: argparse.Namespace) -> int:
    from rlmnb._api import RLM
    from rlmnb._engine.journal import read_journal

    source = Path(args.path)
    if not source.is_file():
        raise CLIError(f"no journal at {source}; `rlmnb runs` lists them.")
    try:
        journal = read_journal(source)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    model: Any = args.model or journal.header.get("model")
    sub_model: Any = args.sub_model or journal.header.get("sub_model")
    if not model:
        raise CLIError("the journal names no root model: pass -m MODEL.")
    if args.api_base:
        from rlmnb._models.litellm import LiteLLM

        model = LiteLLM(model, api_base=args.api_base)
        sub_model = LiteLLM(sub_model, api_base=args.api_base) if sub_model else None
    settings = {k: v for k, v in {"max_iterations": args.max_iterations,
                                  "max_llm_calls": args.max_llm_calls}.items() if v is not None}
    rlm = RLM(model, sub_model, on_event=None if args.quiet else _progress, **settings)
    result = rlm.resume(journal, force=args.force, **_bind_files(args.file))
    _print_result(result, args.json)
    return _exit_for(result.status)


def _runs(args: argparse.Namespace) -> int:
    from rlmnb._engine.journal import journal_folder, list_journals

    folder = Path(args.folder) if args.folder else journal_folder(True)
    assert folder is not None
    found = list_journals(folder)
    print("\n".join(r.row() for r in found) if found else f"no journals in {folder}")
    return EXIT_OK


def _eval(args: argparse.Namespace) -> int:
    from rlmnb._eval.command import run

    return run(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
