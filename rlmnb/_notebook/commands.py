"""The `%rlm` line subcommands: config, models, last, runs, export PATH [NAME | --all], view PATH.

They read what the cell magic recorded (the last RunResult, the settings) and show or save it;
none starts a run. `RLMMagics._line` hands its line here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from rlmnb._notebook.options import unquote

if TYPE_CHECKING:
    from rlmnb._api import RunResult
    from rlmnb.views._snapshot import Snapshot

# options a continuing cell drops from the line it was run with: the run to resume is named anew, and a resume
# is neither a continuation, a dry run nor a replay (the value says whether the option takes an argument)
_NOT_RESUMED = {"--resume": "optional", "--continue": "", "--dry-run": "", "--replay": "required", "--force": ""}

__all__ = ["LineHost", "export", "journal_for", "last_run", "line_command", "resume_line", "resume_note", "runs", "show",
           "view"]


class LineHost(Protocol):
    """What the subcommands need of the magics object: its last run and its settings report."""

    last: RunResult | None
    history: list[RunResult]
    ip: Any

    def config_report(self) -> str: ...


def line_command(magics: LineHost, line: str) -> Any:
    """Run one `%rlm` subcommand: config, models, last, export PATH [NAME | --all], view PATH."""
    words = line.split(None, 1)
    command = words[0] if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if command == "config":
        print(magics.config_report())
        return None
    if command == "models":
        from rlmnb._notebook.settings import models_report

        print(models_report(magics))
        return None
    if command == "last":
        show(last_run(magics).trajectory)
        return None
    if command == "export":
        return export(magics, rest)
    if command == "view":
        return view(rest)
    if command == "runs":
        return runs()
    what = f"unknown subcommand {command!r}" if command else "no subcommand"
    raise UsageError(f"%rlm: {what}. Use %rlm config | models | last | runs | export PATH [NAME | --all] | view PATH, "
                     f"or a %%rlm cell to ask a question.")


def last_run(magics: LineHost) -> RunResult:
    """The last run of this kernel's %%rlm, or a UsageError saying there is none."""
    if magics.last is None:
        raise UsageError("No %%rlm run yet in this kernel.")
    return magics.last


def show(trajectory: Any) -> None:
    """A trajectory as the live widget's tree, or the static view where ipywidgets is missing."""
    from IPython.display import display

    try:
        from rlmnb._notebook.widget import RunWidget

        RunWidget.from_trajectory(trajectory).display()
    except ImportError:
        from rlmnb.views import TrajectoryView

        display(TrajectoryView(trajectory))  # type: ignore[no-untyped-call]


def export(magics: LineHost, raw: str) -> None:
    """`%rlm export PATH [NAME | --all]`: the last run, the RunResult in variable NAME, or every run of this
    kernel (oldest first), as JSON (a RunResult; with --all, {"runs": [...]}) or one standalone page."""
    words = raw.split()
    if not words:
        raise UsageError("%rlm export needs a path ending in .json or .html (then a run's variable name, or --all).")
    if len(words) > 2:
        raise UsageError(f"%rlm export {raw}: give a path, then at most one run: a variable name or --all.")
    target = words[1] if len(words) == 2 else None
    path = Path(os.path.expanduser(unquote(words[0])))
    suffix = path.suffix.lower()
    if suffix not in (".json", ".html", ".htm"):
        raise UsageError(f"%rlm export {raw}: use a path ending in .json (the RunResult) or .html (a page).")
    if not path.parent.is_dir():
        raise UsageError(f"%rlm export {raw}: the folder {path.parent} does not exist.")
    runs = _runs_to_export(magics, target)
    if suffix == ".json":
        if target == "--all":
            import json

            path.write_text(json.dumps({"runs": [r.to_dict() for r in runs]}, ensure_ascii=False, default=str),
                            encoding="utf-8")
        else:
            runs[0].save(path)
    else:
        # the extension's viewer, inlined: the page works offline, with no kernel
        from rlmnb.views._page import page_title, viewer_page

        if len(runs) == 1:
            page = viewer_page([(runs[0].trajectory, "RLM")], page_title(runs[0].trajectory))
        else:
            page = viewer_page([(r.trajectory, f"RLM run {i} of {len(runs)}") for i, r in enumerate(runs, 1)],
                               f"{len(runs)} RLM runs")
        path.write_text(page, encoding="utf-8")
    what = {None: "the last run", "--all": f"{len(runs)} run{'' if len(runs) == 1 else 's'}"}.get(target,
                                                                                                f"the run in {target}")
    print(f"Saved {what} to {path}")


def _runs_to_export(magics: LineHost, target: str | None) -> list[RunResult]:
    if target is None:
        return [last_run(magics)]
    if target == "--all":
        if not magics.history:
            raise UsageError("No %%rlm run yet in this kernel.")
        return list(magics.history)
    if not target.isidentifier():
        raise UsageError(f"%rlm export: {target!r} is neither a variable name nor --all.")
    value = magics.ip.user_ns.get(target) if magics.ip is not None else None
    if value is None:
        raise UsageError(f"%rlm export: no variable {target!r}; name one that holds a RunResult (%%rlm -o NAME).")
    if not hasattr(value, "trajectory") or not hasattr(value, "save"):
        raise UsageError(f"%rlm export: {target!r} holds a {type(value).__name__}, not a RunResult.")
    return [value]


def view(raw: str) -> None:
    """`%rlm view PATH`: show a saved trajectory."""
    if not raw:
        raise UsageError("%rlm view needs the path of a saved trajectory (.json).")
    from rlmnb.events import Trajectory

    path = Path(os.path.expanduser(unquote(raw)))
    try:
        trajectory = Trajectory.load(path)
    except FileNotFoundError:
        raise UsageError(f"%rlm view: no file at {path}; check the path.") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"%rlm view {raw}: not a saved rlmnb trajectory ({exc}).") from None
    show(trajectory)


def runs() -> None:
    """`%rlm runs`: the journals of the journal folder, newest first, numbered for `%%rlm --resume N` (and as
    `rlmnb runs` numbers them: `journal.numbered_journals`)."""
    from rlmnb._engine.journal import journal_folder, list_journals

    folder = journal_folder(True)
    assert folder is not None
    found = list_journals(folder)
    if not found:
        print(f"No journals in {folder}.")
        return
    print(f"Journals in {folder} (newest first; resume one with %%rlm --resume N):")
    for number, summary in enumerate(found, 1):
        print(f"{number:>3}  {summary.row()}")


def journal_for(run: str) -> Path:
    """The journal `%%rlm --resume RUN` means: a path, "last" (the newest), a number from `%rlm runs`, a file
    name or a run id, numbered as `%rlm runs` lists them (`journal.find_journal`); else a UsageError."""
    from rlmnb._engine.journal import JournalNotFound, find_journal

    try:
        return find_journal(unquote(run), listed_by="%rlm runs")
    except JournalNotFound as exc:
        raise UsageError(f"--resume: {exc}") from None


def resume_note(run_id: str, *, folder: Path | None, line: str) -> Snapshot | None:
    """Where run `run_id`'s journal is in `folder` and the cell line that continues it (`resume_line`), for
    the saved output of a running run (`views._snapshot`); None when it has no journal there.

    N in `--resume N` is the journal's number in `%rlm runs` now; a journal outside the folder `%rlm runs`
    lists is named by its path instead.
    """
    import time

    from rlmnb._engine.journal import journal_folder, numbered_journals
    from rlmnb.views._snapshot import Snapshot

    if folder is None:
        return None
    found = numbered_journals(folder)
    path = next((p for p in found if p.stem.endswith(f"-{run_id}")), None)
    if path is None:
        return None
    listed = journal_folder(True)
    same = listed is not None and os.path.realpath(listed) == os.path.realpath(folder)
    where = str(found.index(path) + 1) if same else _quoted(str(path))
    return Snapshot(journal=str(path), resume=resume_line(line, where), saved=time.time())


def resume_line(line: str, where: str) -> str:
    """The `%%rlm` line that continues a run: the cell's own options (models, inputs, settings) with
    `--resume WHERE`, and without what a resume cannot combine (--continue, --dry-run, --replay, --force)."""
    import shlex

    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    kept: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in _NOT_RESUMED:
            takes = _NOT_RESUMED[name]
            following = words[i + 1] if i + 1 < len(words) else None
            skip = "=" not in word and (takes == "required" or (
                takes == "optional" and following is not None and not following.startswith("-")))
            continue
        kept.append(_quoted(word))
    return " ".join(["%%rlm", *kept, "--resume", where])


def _quoted(word: str) -> str:
    import shlex

    return shlex.quote(word)
