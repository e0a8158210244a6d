"""The journal: every event of a run on disk as it happens, one JSON object a line.

`JournalWriter` is an EventBus subscriber. Its call only queues the event; a writer thread turns
queued events into lines, writes them and flushes after every drain of the queue (so a reader sees
each event within moments of its emission), and fsyncs at turn boundaries (TurnStarted, ModelReply,
CodeExecuted, Submitted, RunFinished) and at least every `FSYNC_EVERY_S` while events keep coming.
The first line is a header (`{"kind": "journal", ...}`: version, question, when, input fingerprints,
the journal it resumed). Secret values (API keys of the environment and of the run's models) are
replaced by `***` before a line is written.

`read_journal` reads what survived a crash: lines after the last whole one (a line cut mid-way, a
zero-filled tail left by a lost page cache) are ignored, and so is everything after the first line
that does not parse. `list_journals` summarises a folder (question, status, cost, when); `prune`
keeps the newest N journals.

Numbering: `numbered_journals` is the one list every front end numbers (`%rlm runs`, `%%rlm --resume N`,
`rlmnb runs`, `rlmnb view|replay|resume N`): the folder's journals with a whole header line, newest first, so
N means the same file everywhere; `find_journal` turns a reference (a path, N, "last", a run id or a file
name) into that file.

Where: `RLMConfig.journal` True means `$RLMNB_JOURNAL_DIR`, else `.rlmnb/runs` under the working
directory; a string is a folder; False writes nothing. The default stays beside the work (a project's
`%rlm runs` and `--resume N` list that project's runs, not every run of the machine), so it is said once
per process (`first_run_note`, one line naming the folder and how to move or turn it off) and the
default `.rlmnb` folder holds a `.gitignore` of `*`: journals hold prompts with data excerpts, and must
not reach a repository by accident.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmnb._ground.errors import ConfigError
from rlmnb.events import EVENT_TYPES, Event, RunFinished, Trajectory, event_from_dict

__all__ = ["ENV_DIR", "JOURNAL_VERSION", "Journal", "JournalNotFound", "JournalSummary", "JournalWriter",
           "changed_inputs", "find_journal", "fingerprint", "first_run_note", "journal_folder", "journal_header",
           "journal_paths", "list_journals", "new_journal_path", "numbered_journals", "prune", "read_journal", "scrub",
           "secret_values", "summarise"]

JOURNAL_VERSION = 1
SUFFIX = ".jsonl"
FSYNC_EVERY_S = 1.0
ENV_DIR = "RLMNB_JOURNAL_DIR"
_BOUNDARIES = frozenset({"turn_started", "model_reply", "code_executed", "submitted", "run_finished", "fallback"})
_STOP = object()


def journal_folder(setting: str | bool, cwd: str | Path | None = None) -> Path | None:
    """The folder journals go to for a `RLMConfig.journal` value; None when journaling is off."""
    if setting is False:
        return None
    if isinstance(setting, str):
        return Path(os.path.expanduser(setting))
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    return Path(cwd or os.getcwd()) / ".rlmnb" / "runs"


DEFAULT_PARTS = (".rlmnb", "runs")  # the default folder under the working directory
_noted: set[Path] = set()  # folders this process has said it journals to
_noted_lock = threading.Lock()


def first_run_note(folder: Path | None, keep: int) -> str | None:
    """The one line a front end shows the first time this process journals to `folder`: where the runs go,
    what they hold and how to move or turn them off; None when journaling is off or it was said already.
    Thread-safe: of concurrent runs, one says it."""
    if folder is None:
        return None
    key = folder.expanduser().absolute()
    with _noted_lock:
        if key in _noted:
            return None
        _noted.add(key)
    return (f"rlmnb journals each run (its prompts and replies, for resume) to {key}, the newest {keep} kept "
            f"(journal_keep); ${ENV_DIR} moves them, journal=False turns them off.")


def _ignore_default(folder: Path) -> None:
    """Give the default `.rlmnb` folder a `.gitignore` of `*`, as pytest does for its cache (see module docs)."""
    if folder.parts[-2:] != DEFAULT_PARTS:
        return
    ignore = folder.parent / ".gitignore"
    if not ignore.exists():
        with contextlib.suppress(OSError):
            ignore.write_text("# rlmnb's run journals: prompts and replies, with excerpts of your data\n*\n",
                              encoding="utf-8")


def secret_values(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Values that must never reach a journal: secret-looking environment variables and `extra` (8+ chars)."""
    from rlmnb._sandbox.kernel.environment import looks_secret

    found = {v for k, v in os.environ.items() if looks_secret(k) and len(v) >= 8}
    found.update(v for v in extra if isinstance(v, str) and len(v) >= 8)
    return tuple(sorted(found, key=len, reverse=True))


def scrub(line: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in line:
            line = line.replace(secret, "***")
    return line


class JournalWriter:
    """Appends a run's events to `path` from a writer thread (see module docs); call `close()` at the end.

    The writer never raises into the run: a failed write is kept in `error` and writing stops.
    `events_written` and `bytes_written` are what reached the file.
    """

    def __init__(self, path: str | Path, header: dict[str, Any], *, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _ignore_default(self.path.parent)
        self.secrets = secrets
        self.error: str | None = None
        self.events_written = 0
        self.bytes_written = 0
        self.fsyncs = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by the writer thread
        self._write([scrub(json.dumps({"kind": "journal", "version": JOURNAL_VERSION, **header},
                                      ensure_ascii=False, default=str), secrets) + "\n"], sync=True)
        self._thread = threading.Thread(target=self._loop, name="rlmnb-journal", daemon=True)
        self._thread.start()

    def __call__(self, event: Event) -> None:
        self._queue.put(event)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, fsync and close; idempotent."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def _loop(self) -> None:
        dirty = False
        last_sync = time.monotonic()
        stop = False
        try:
            while not stop:
                wait = max(0.0, FSYNC_EVERY_S - (time.monotonic() - last_sync)) if dirty else None
                try:
                    first = self._queue.get(timeout=wait)
                except queue.Empty:  # quiet for a second with unsynced lines
                    self._sync()
                    dirty, last_sync = False, time.monotonic()
                    continue
                batch = [first]
                with contextlib.suppress(queue.Empty):
                    while len(batch) < 4096:
                        batch.append(self._queue.get_nowait())
                if any(e is _STOP for e in batch):
                    stop = True
                    batch = [e for e in batch if e is not _STOP]
                lines = [scrub(json.dumps(e.to_dict(), ensure_ascii=False, default=str), self.secrets) + "\n"
                         for e in batch]
                boundary = stop or any(e.kind in _BOUNDARIES for e in batch)
                if lines:
                    self._write(lines, sync=False)
                    self.events_written += len(lines)
                    dirty = True
                if boundary or time.monotonic() - last_sync >= FSYNC_EVERY_S:
                    if dirty:
                        self._sync()
                    dirty, last_sync = False, time.monotonic()
        except Exception as exc:  # a full disk must not stop the run
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                self._file.close()

    def _write(self, lines: list[str], *, sync: bool) -> None:
        text = "".join(lines)
        self._file.write(text)
        self._file.flush()
        self.bytes_written += len(text.encode("utf-8"))
        if sync:
            self._sync()

    def _sync(self) -> None:
        os.fsync(self._file.fileno())
        self.fsyncs += 1


@dataclass(frozen=True)
class Journal:
    """What a journal file holds: its header, its whole events (by seq) and whether a tail was cut."""

    path: Path
    header: dict[str, Any]
    trajectory: Trajectory = field(repr=False)
    torn: bool = False

    @property
    def question(self) -> str:
        return str(self.header.get("question", ""))

    def final(self) -> RunFinished | None:
        return self.trajectory.final()


def read_journal(path: str | Path) -> Journal:
    """Read a journal, keeping every whole event before the first damaged line (see module docs).

    Raises FileNotFoundError for a missing file and ValueError for a file that is not a journal.
    """
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"No journal at {source}; list them with `%rlm runs` or pass the path of a .jsonl.")
    data = source.read_bytes().rstrip(b"\x00")
    lines = data.split(b"\n")
    torn = bool(lines and lines[-1])  # a last line with no newline was cut mid-write
    lines = lines[:-1]
    header: dict[str, Any] = {}
    events: list[Event] = []
    for number, raw in enumerate(lines):
        try:
            record = json.loads(raw)
        except ValueError:
            torn = True
            break
        if not isinstance(record, dict):
            torn = True
            break
        if number == 0:
            if record.get("kind") != "journal":
                raise ValueError(f"{source} is not an rlmnb journal (its first line is no journal header).")
            header = record
            continue
        if record.get("kind") in EVENT_TYPES:
            try:
                events.append(event_from_dict(record))
            except (TypeError, ValueError, KeyError):  # a damaged event: what came before it still reads
                torn = True
                break
    if not header:
        raise ValueError(f"{source} is not an rlmnb journal (it is empty or its header was cut).")
    events.sort(key=lambda e: e.seq)
    return Journal(source, header, Trajectory(events), torn)


@dataclass(frozen=True)
class JournalSummary:
    """One line of `%rlm runs`."""

    path: Path
    question: str
    status: str  # the root's RunFinished status, or "stopped" (no end recorded)
    cost_usd: float | None
    created: float
    events: int
    resumed_from: str | None = None

    def row(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))
        cost = "?" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        question = self.question if len(self.question) <= 60 else self.question[:57] + "..."
        return f"{when}  {self.status:<16} {cost:>10}  {self.events:>7} ev  {self.path.name}  {question}"


def summarise(journal: Journal) -> JournalSummary:
    final = journal.final()
    if final is not None:
        cost = final.usage.get("cost_usd")
    else:  # not finished: add up what the recorded calls cost
        cost = 0.0
        for event in journal.trajectory:
            usage = getattr(event, "usage", None)
            if isinstance(usage, dict) and event.kind in ("model_reply", "sub_call_finished"):
                value = usage.get("cost_usd")
                cost = None if value is None or cost is None else cost + float(value)
    return JournalSummary(path=journal.path, question=journal.question,
                          status=final.status if final is not None else "stopped",
                          cost_usd=None if cost is None else float(cost),
                          created=float(journal.header.get("created", 0.0)), events=len(journal.trajectory),
                          resumed_from=journal.header.get("resumed_from"))


def journal_paths(folder: str | Path) -> list[Path]:
    """The journals in `folder`, newest first."""
    base = Path(folder)
    if not base.is_dir():
        return []
    dated = []
    for path in base.iterdir():
        if path.suffix != SUFFIX:
            continue
        try:  # another run's prune may delete a journal between the listing and this look (concurrent runs)
            stat = path.stat()
        except OSError:
            continue
        if path.is_file():
            dated.append((stat.st_mtime, path.name, path))
    return [path for _, _, path in sorted(dated, key=lambda t: (t[0], t[1]), reverse=True)]


def journal_header(path: str | Path) -> dict[str, Any] | None:
    """The header of the journal at `path` (its first, whole line), or None when `path` is no readable journal.

    Invariant: `read_journal(path)` succeeds exactly when this returns a header (the file staying as it is).
    """
    try:
        with Path(path).open("rb") as handle:
            line = handle.readline()
    except OSError:
        return None
    if not line.endswith(b"\n"):  # empty, or the header itself was cut
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("kind") == "journal" else None


def numbered_journals(folder: str | Path) -> list[Path]:
    """The journals of `folder` as every front end numbers them (see module docs): those with a header, newest
    first; journal N is item N - 1. Reads one line of each file."""
    return [path for path in journal_paths(folder) if journal_header(path) is not None]


def list_journals(folder: str | Path) -> list[JournalSummary]:
    """Summaries of `numbered_journals(folder)`, in its order (a file deleted meanwhile drops out)."""
    out = []
    for path in numbered_journals(folder):
        with contextlib.suppress(OSError, ValueError):
            out.append(summarise(read_journal(path)))
    return out


class JournalNotFound(ConfigError):
    """A journal reference (a number, "last", a run id or a name) names no journal of the folder."""


def find_journal(ref: str | int | Path, folder: str | Path | None = None, *, listed_by: str = "`rlmnb runs`") -> Path:
    """The file a record reference names, for every front end alike (see module docs).

    Args:
        ref: a file's path (returned as given when the file exists, journal or not: the caller reads it);
            else "last" or N (an int or its digits), numbered as `numbered_journals(folder)` numbers them; else a journal of
            `folder` by file name, stem or run id.
        folder: where numbers and ids are looked up; default `journal_folder(True)`.
        listed_by: the command that lists the journals in the caller's front end, named in the error.

    Raises:
        JournalNotFound (a ConfigError): nothing by that reference; the message says what to give instead.
    """
    text = str(ref).strip()
    path = Path(os.path.expanduser(text))
    if text and path.is_file():
        return path
    base = Path(folder) if folder is not None else journal_folder(True)
    assert base is not None  # journal_folder(True) always names a folder
    if text == "last" or text.isdigit():
        found = numbered_journals(base)
        index = 0 if text == "last" else int(text) - 1
        if 0 <= index < len(found):
            return found[index]
        count = "no journals" if not found else f"{len(found)} journal{'' if len(found) == 1 else 's'}"
        raise JournalNotFound(f"{text}: {base} holds {count}; {listed_by} lists them with their numbers.")
    for candidate in journal_paths(base):
        if text and (text in (candidate.name, candidate.stem) or candidate.stem.endswith(f"-{text}")):
            return candidate
    if os.sep in text or text.endswith((".json", ".jsonl")):  # meant as a path
        raise JournalNotFound(f"No file at {path}: check the path, or give a number or run id that {listed_by} "
                              f"lists.")
    raise JournalNotFound(f"No journal {text!r} in {base}: give the path of a saved trajectory (.json) or journal "
                          f"(.jsonl), or a number or run id that {listed_by} lists.")


def prune(folder: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` journals of `folder`; returns the deleted paths."""
    doomed = journal_paths(folder)[keep:]
    for path in doomed:
        with contextlib.suppress(OSError):
            path.unlink()
    return doomed


def new_journal_path(folder: Path, run_id: str) -> Path:
    return folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{run_id}{SUFFIX}"


# ---- input fingerprints (what resume compares) ------------------------------------------------------------
_MAX_FILES = 10_000  # files of a folder input stat'ed for its fingerprint
_EDGE = 1_000  # rows (items) from each end hashed for a large table (list)


def fingerprint(source: Any, read_paths: Iterable[str] = ()) -> dict[str, Any]:
    """A cheap record of an input that changes when the input does (the check `resume` makes).

    Files and folders: size and mtime of every file (up to 10,000 of a folder). Text and bytes: a hash
    of the whole value. Tables and long lists: shape, columns and a hash of the first and last 1,000
    rows (an edit in the middle of a huge in-memory frame goes unseen). Other values: a hash of repr.
    """
    import hashlib

    stats = [_stat(p) for p in sorted(set(read_paths))]
    digest = hashlib.blake2b(digest_size=12)
    digest.update(type(source).__qualname__.encode())
    if isinstance(source, str):
        digest.update(source.encode("utf-8", "surrogatepass"))
    elif isinstance(source, bytes | bytearray | memoryview):
        digest.update(bytes(source))
    elif isinstance(source, Path) or stats:
        pass  # the files speak for it
    elif hasattr(source, "shape") and hasattr(source, "head") and hasattr(source, "tail"):
        digest.update(repr((getattr(source, "shape", None), list(map(str, getattr(source, "columns", []))))).encode())
        with contextlib.suppress(Exception):
            digest.update(_frame_json(source.head(_EDGE)).encode())
            digest.update(_frame_json(source.tail(_EDGE)).encode())
    elif isinstance(source, list | tuple):
        edge = list(source) if len(source) <= 2 * _EDGE else [*source[:_EDGE], len(source), *source[-_EDGE:]]
        digest.update(json.dumps(edge, default=repr, sort_keys=True).encode("utf-8", "surrogatepass"))
    else:
        with contextlib.suppress(Exception):
            digest.update(json.dumps(source, default=repr, sort_keys=True).encode("utf-8", "surrogatepass"))
    out: dict[str, Any] = {"digest": digest.hexdigest()}
    if stats:
        out["files"] = [s for group in stats for s in group]
    return out


def _stat(path: str) -> list[list[Any]]:
    target = Path(path)
    if target.is_dir():
        found = []
        for number, child in enumerate(sorted(target.rglob("*"))):
            if number >= _MAX_FILES:
                break
            if child.is_file():
                st = child.stat()
                found.append([str(child), st.st_size, st.st_mtime_ns])
        return found
    try:
        st = target.stat()
    except OSError:
        return [[str(target), None, None]]
    return [[str(target), st.st_size, st.st_mtime_ns]]


def changed_inputs(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One phrase per input that differs between two fingerprint maps (name -> fingerprint)."""
    out = []
    for name, before in recorded.items():
        after = now.get(name)
        if after is None:
            out.append(f"{name} is missing")
        elif before.get("files") != after.get("files"):
            out.append(f"{name}'s files changed (size or modification time)")
        elif before.get("digest") != after.get("digest"):
            out.append(f"{name} changed")
    out += [f"{name} is new" for name in now if name not in recorded]
    return out


def _frame_json(frame: Any) -> str:
    """A frame's rows as JSON for a digest: pandas' dates as ISO text, stated (its default changes in pandas 4, so a
    digest stays the same across versions); other frames' own `to_json()`."""
    try:
        return str(frame.to_json(date_format="iso"))
    except TypeError:
        return str(frame.to_json())
