"""Resuming a run from its journal: what was answered is served from the record, the rest goes live.

`plan_resume` reads a journal (journal.py), checks the inputs have not changed since (the header's
fingerprints) and gathers what the resumed run needs. `ResumedLM` wraps each live model of the
resumed run: a request the record answered is served from it at zero cost, anything else goes to
the live model. The resumed run re-runs the recorded code in a fresh sandbox against the same
inputs, so its state is rebuilt on the way, and it goes live where the journal ends.

How requests are matched:
- sub-calls by the hash of their prompt (`subcalls.prompt_sha`); a prompt asked twice is served as
  often as it was answered. A call that was in flight when the run stopped, or that ended in an
  error, has no answer in the record and is sent again.
- the root run's turns in order: the k-th root request gets the k-th recorded turn reply, whatever
  its hash, so a resume with more turns (whose prompts say "Turn i/N" with a new N) still pays
  nothing for the recorded turns. Any other recorded reply (a fallback, a child run's turn) is
  served when its request hash matches exactly.
The first request that goes live calls `on_live` once: the resumed run marks that point with a
`RunResumed` event.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmnb._engine.cache import prompt_sha, request_sha
from rlmnb._engine.journal import Journal, changed_inputs, fingerprint, read_journal
from rlmnb._engine.replay import recorded_config, recorded_inputs
from rlmnb._ground.config import RLMConfig, field_names
from rlmnb._ground.errors import ConfigError
from rlmnb._ground.usage import CallUsage
from rlmnb._models.base import LM, Completion, Message
from rlmnb.events import ModelReply, RunStarted, SubCallFinished, SubCallStarted, Trajectory

__all__ = ["ResumePlan", "ResumeRecord", "ResumedLM", "check_inputs", "plan_resume"]


class ResumeRecord:
    """The answers of a journal, served once each; shared by the resumed run's models (thread-safe)."""

    def __init__(self, trajectory: Trajectory) -> None:
        self._lock = threading.Lock()
        root_id = trajectory.root_run_id
        replies = trajectory.of(ModelReply)
        self._turns: deque[ModelReply] = deque(r for r in replies if r.run_id == root_id and r.purpose == "turn")
        self._by_sha: dict[str, deque[ModelReply]] = defaultdict(deque)
        for reply in replies:
            self._by_sha[reply.request_sha].append(reply)
        self._used: set[int] = set()  # seq of served replies
        finished = {e.call_id: e for e in trajectory.of(SubCallFinished)}
        self._sub: dict[str, deque[str]] = defaultdict(deque)
        for started in trajectory.of(SubCallStarted):
            done = finished.get(started.call_id)
            if done is not None and done.error is None and done.reply is not None:
                self._sub[started.prompt_sha].append(done.reply)
        self.root_answers = len(replies)
        self.sub_answers = sum(len(q) for q in self._sub.values())
        self.served_root = 0
        self.served_sub = 0
        self.live_calls = 0
        self.on_live: Callable[[], None] | None = None

    def root_reply(self, messages: list[Message], *, in_order: bool) -> ModelReply | None:
        """The recorded reply for a root request (see module docs), or None to go live."""
        with self._lock:
            queue = self._by_sha.get(request_sha(messages))
            while queue and queue[0].seq in self._used:
                queue.popleft()
            reply = queue.popleft() if queue else None
            if reply is None and in_order:
                while self._turns and self._turns[0].seq in self._used:
                    self._turns.popleft()
                reply = self._turns.popleft() if self._turns else None
            if reply is not None:
                self._used.add(reply.seq)
                self.served_root += 1
            return reply

    def sub_reply(self, prompt: str) -> str | None:
        with self._lock:
            queue = self._sub.get(prompt_sha(prompt))
            if not queue:
                return None
            self.served_sub += 1
            return queue.popleft()

    def went_live(self) -> None:
        with self._lock:
            first = self.live_calls == 0
            self.live_calls += 1
            callback = self.on_live if first else None
        if callback is not None:
            callback()


class ResumedLM:
    """A live model behind a journal's answers. `role="root"` serves the root run's turns in order."""

    def __init__(self, inner: LM, record: ResumeRecord, *, role: str) -> None:
        self.inner = inner
        self.record = record
        self.role = role
        self.name = inner.name

    def __getattr__(self, attr: str) -> Any:  # context_window, supports_stop, aprepare, check_key, prices...
        return getattr(self.inner, attr)

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        if len(messages) == 1 and messages[0].get("role") == "user":
            answer = self.record.sub_reply(str(messages[0].get("content", "")))
            if answer is not None:
                return Completion(text=answer, usage=CallUsage(cost_usd=0.0, cached=True), model=self.name,
                                  meta={"resumed": True})
        else:
            reply = self.record.root_reply(messages, in_order=self.role == "root")
            if reply is not None:
                return Completion(text=reply.text, usage=CallUsage(cost_usd=0.0, cached=True), model=self.name,
                                  meta={"resumed": True}, finish_reason=reply.finish_reason,
                                  reasoning=reply.reasoning)
        self.record.went_live()
        return await self.inner.acomplete(messages, **params)

    def __repr__(self) -> str:
        return f"ResumedLM({self.inner!r})"


@dataclass(frozen=True)
class ResumePlan:
    """What resuming a journal needs; `RLM.resume` (api.py) runs it. Holds live objects: never serialised."""

    journal: Journal
    record: ResumeRecord
    question: str
    inputs: dict[str, Any]
    config: RLMConfig
    force: bool = False
    notes: list[str] = field(default_factory=list)


def plan_resume(source: str | Path | Journal, config: RLMConfig, given: set[str], *, force: bool = False,
                **inputs: Any) -> ResumePlan:
    """Read a journal and gather what resuming it needs (no model call).

    The resumed run takes the recorded settings, except those in `given` (set on the RLM), which
    come from `config`: pass `max_iterations=` to the RLM to resume a run whose turns ran out.

    Raises:
        FileNotFoundError / ValueError: no journal at `source`, or not a journal.
        ConfigError: the journal has no run_started event, or an in-memory input was not passed again.
    """
    journal = source if isinstance(source, Journal) else read_journal(source)
    starts = [s for s in journal.trajectory.of(RunStarted) if s.depth == 0]
    if not starts:
        raise ConfigError(f"The journal {journal.path} ends before its run started; there is nothing to resume, "
                          f"run the question again.")
    root = starts[0]
    bound = recorded_inputs(root, inputs, "Resume")
    recorded = recorded_config(root)
    own = {name: getattr(config, name) for name in field_names() if name in given}
    merged = recorded.replace(**{"cache": config.cache, "journal": config.journal,
                                 "journal_keep": config.journal_keep, **own})
    return ResumePlan(journal=journal, record=ResumeRecord(journal.trajectory), question=root.question,
                      inputs=bound, config=merged, force=force)


def check_inputs(plan: ResumePlan, fields: list[Any]) -> None:
    """Raise ConfigError, in one sentence, when an input differs from the run's (unless the plan is forced)."""
    recorded = plan.journal.header.get("inputs")
    if plan.force or not isinstance(recorded, dict):
        return
    now = {f.name: fingerprint(f.source, f.read_paths) for f in fields}
    changed = changed_inputs(recorded, now)
    if changed:
        raise ConfigError(f"The inputs differ from the run's ({'; '.join(changed)}), so its recorded answers may "
                          f"not fit them: pass the same inputs, or force=True (--force) to resume anyway.")
