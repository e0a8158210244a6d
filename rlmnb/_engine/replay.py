"""Replaying a recorded run: same code, same sandbox, every model reply served from the record.

Each recorded request is keyed by a hash of what was sent: the whole conversation for root calls,
the prompt for sub-calls. A replayed run that sends anything the record does not hold stops with
`ReplayDivergence`, naming the first differing call. Inputs are not stored in trajectories: inputs
that were files are re-read from their recorded paths; in-memory inputs must be passed again.

What can be replayed is read by `read_record`, the one conversion `RLM.replay`, `%%rlm --replay` and the
`rlmnb view|replay` commands share: a saved trajectory or RunResult (.json), a journal (.jsonl), or a journal
by its number, "last" or its run id, numbered as `%rlm runs` and `rlmnb runs` list them (journal.py).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmnb._engine.cache import prompt_sha, request_sha
from rlmnb._engine.journal import Journal, find_journal, read_journal
from rlmnb._ground.config import RLMConfig, field_names
from rlmnb._ground.errors import ConfigError, ReplayDivergence
from rlmnb._ground.text import clip
from rlmnb._ground.usage import CallUsage
from rlmnb._guards.rules import guard_from_description
from rlmnb._models.base import Completion, Message
from rlmnb.events import ModelReply, RunStarted, SubCallFinished, SubCallStarted, Trajectory

__all__ = ["Record", "ReplayLM", "ReplayPlan", "plan_replay", "read_record", "recorded_config"]


def _replayed_error(slot: str) -> Exception:
    """An exception whose '[error] Type: message' slot text equals the recorded one."""
    body = slot.removeprefix("[error] ")
    name, _, message = body.partition(": ")
    cls: type[Exception] = type(name if name.isidentifier() else "ReplayedError", (Exception,), {})
    return cls(message)


class ReplayLM:
    """Serves recorded replies by request hash; any request not in the record is a divergence."""

    name = "replay"

    def __init__(self, trajectory: Trajectory) -> None:
        self._root: dict[str, deque[ModelReply]] = defaultdict(deque)
        self._sub: dict[str, deque[tuple[str | None, str | None]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.served = 0
        for reply in trajectory.of(ModelReply):
            self._root[reply.request_sha].append(reply)
        finished = {e.call_id: e for e in trajectory.of(SubCallFinished)}
        for started in trajectory.of(SubCallStarted):
            done = finished.get(started.call_id)
            if done is not None:
                self._sub[started.prompt_sha].append((done.reply, done.error))

    async def acomplete(self, messages: list[Message], **_params: Any) -> Completion:
        if len(messages) == 1 and messages[0].get("role") == "user":
            return self._sub_reply(str(messages[0].get("content", "")))
        key = request_sha(messages)
        with self._lock:
            queue = self._root.get(key)
            if not queue:
                raise ReplayDivergence(
                    f"replay diverged at root call {self.served + 1}: the conversation sent "
                    f"({len(messages)} messages, last: {_clip(str(messages[-1].get('content', '')))!r}) is not in "
                    f"the record. The code or the inputs differ from the recorded run.")
            self.served += 1
            reply = queue.popleft()
        # the finish reason too: a reply recorded as cut must be read as cut again
        return Completion(text=reply.text, usage=CallUsage(cost_usd=0.0), model="replay",
                          finish_reason=getattr(reply, "finish_reason", None), reasoning=getattr(reply, "reasoning", ""))

    def _sub_reply(self, prompt: str) -> Completion:
        with self._lock:
            queue = self._sub.get(prompt_sha(prompt))
            if not queue:
                raise ReplayDivergence(
                    f"replay diverged at a sub-call: the prompt {_clip(prompt)!r} ({len(prompt):,} chars) is not in "
                    f"the record. The code or the inputs differ from the recorded run.")
            self.served += 1
            reply, error = queue.popleft()
        if error is not None:
            raise _replayed_error(error)
        return Completion(text=reply or "", usage=CallUsage(cost_usd=0.0), model="replay")


def _clip(text: str, n: int = 80) -> str:
    return clip(text, n, marker="...")


def recorded_config(start: RunStarted) -> RLMConfig:
    known = set(field_names())
    values = {k: v for k, v in start.config.items() if k in known}
    if "secret_env" in values:
        values["secret_env"] = tuple(values["secret_env"])
    values["cache"] = False
    return RLMConfig(**values).validate()


def recorded_inputs(root: RunStarted, inputs: dict[str, Any], what: str) -> dict[str, Any]:
    """The run's inputs: those passed again by name, the others re-read from their recorded paths.

    Raises ConfigError naming the in-memory inputs that were not passed again.
    """
    bound = dict(inputs)
    missing = []
    for info in root.inputs:
        name = str(info.get("name"))
        if name in bound:
            continue
        path = info.get("path")
        if path and Path(path).exists():
            bound[name] = Path(path)
        else:
            missing.append(f"{name} ({info.get('kind')})")
    if missing:
        raise ConfigError(f"{what} needs the run's in-memory inputs again: pass {', '.join(missing)} as keyword "
                          f"arguments (files are re-read from their recorded paths).")
    return bound


@dataclass(frozen=True)
class Record:
    """A recorded run as read from where it was kept: its file (None for a trajectory handed in), its events,
    and its journal when it was one (the journal says whether the run ended: `journal.final()`)."""

    path: Path | None
    trajectory: Trajectory = field(repr=False)
    journal: Journal | None = field(default=None, repr=False)


def read_record(source: str | int | Path | Trajectory | Journal, /, *, listed_by: str = "`rlmnb runs`") -> Record:
    """Read a recorded run from a Trajectory, a Journal, a file's path, or a journal's number (int or text),
    "last" or run id (`journal.find_journal`, numbered as the journal lists are).

    Raises:
        JournalNotFound (a ConfigError): no file and no journal by that reference.
        ConfigError: the file is neither a saved trajectory (.json) nor a journal (.jsonl); says which lists them.
    """
    if isinstance(source, Trajectory):
        return Record(None, source)
    if isinstance(source, Journal):
        return Record(source.path, source.trajectory, source)
    path = find_journal(source, listed_by=listed_by)
    try:
        if _starts_as_journal(path):
            journal = read_journal(path)
            return Record(path, journal.trajectory, journal)
        return Record(path, Trajectory.load(path))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = " ".join(str(exc).split())[:160]
        raise ConfigError(f"{path} is neither a saved rlmnb trajectory (.json) nor a journal (.jsonl) ({reason}); "
                          f"{listed_by} lists the journals.") from None


def _starts_as_journal(path: Path) -> bool:
    """Whether `path` starts as a journal does (a header line), rather than as one JSON document."""
    try:
        with path.open("rb") as handle:
            first = json.loads(handle.readline(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and first.get("kind") == "journal"


@dataclass(frozen=True)
class ReplayPlan:
    """What re-running a recorded trajectory needs; `RLM.replay` (api.py) builds the run from it.

    Holds live objects (the record's model, the user's schema and guard), so it is never serialised.
    """

    lm: ReplayLM
    question: str
    inputs: dict[str, Any]
    config: RLMConfig
    schema: Any = None
    verify: Any = None
    revision_prompt: str | None = None


def plan_replay(source: str | int | Path | Trajectory | Journal | Record, /, *, schema: Any = None, verify: Any = None,
                **inputs: Any) -> ReplayPlan:
    """Check a recorded run can be re-run and gather what the re-run needs (no model call).

    `source` is anything `read_record` reads. A run that validated answers against a schema needs `schema=`
    again (a class is code, not data); a built-in verify guard is rebuilt from the record, any other guard must
    be passed as `verify=`. In-memory inputs must be passed again; file inputs are re-read from their recorded
    paths. The plan's config writes no journal: a replay is not a new run.
    """
    trajectory = (source if isinstance(source, Record) else read_record(source)).trajectory
    starts = trajectory.of(RunStarted)
    if not starts:
        raise ConfigError("That trajectory has no run_started event; it is not a complete rlmnb record.")
    root = starts[0]
    bound = recorded_inputs(root, inputs, "Replay")
    if root.schema and schema is None:
        raise ConfigError(f"That run validated its answer against the schema {root.schema.get('name')}; pass it "
                          f"again: replay(path, schema={root.schema.get('name')}, ...).")
    revision_prompt = None
    if root.verify:
        revision_prompt = root.verify.get("revision_prompt")
        if verify is None:
            verify = guard_from_description(root.verify)
        if verify is None:
            raise ConfigError(f"That run checked answers with {root.verify.get('name', 'a custom guard')}; pass the "
                              f"same guard again: replay(path, verify=...).")
    return ReplayPlan(lm=ReplayLM(trajectory), question=root.question, inputs=bound,
                      config=recorded_config(root).replace(journal=False), schema=schema, verify=verify,
                      revision_prompt=revision_prompt)
