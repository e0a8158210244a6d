"""The Python API: `RLM(...).run(question, **inputs) -> RunResult`.

`run` works everywhere, Jupyter included: the run gets its own event loop in a worker thread, and
the calling thread only waits, so a kernel interrupt (KeyboardInterrupt) cancels the run cleanly and
still returns the partial result with status "interrupted". `arun` is the same for async callers.
An interrupt before the run begins (while the question is checked and the inputs are bound, before any model
call or sandbox) raises KeyboardInterrupt as any Python call does: nothing was spent, so there is nothing to keep.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from rlmnb._engine.budget import Budget
from rlmnb._engine.context import Outcome, Session
from rlmnb._engine.resources import RunSpec, TreeResources
from rlmnb._engine.runs import execute_run
from rlmnb._ground.blocking import run_coroutine_blocking
from rlmnb._ground.config import RLMConfig, field_names
from rlmnb._ground.errors import ConfigError, ReplayDivergence
from rlmnb._ground.jsonable import recordable
from rlmnb._ground.usage import Usage
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM, model_label
from rlmnb._models.resolve import release_model_clients, resolve_model
from rlmnb._sandbox.confinement.policy import Confinement
from rlmnb._sandbox.primitives import check_tools
from rlmnb.events import Event, EventBus, PolicyActed, RunStarted, RunStatus, Trajectory

if TYPE_CHECKING:
    from rlmnb._engine.journal import Journal, JournalWriter
    from rlmnb._engine.workspace import Workspace
    from rlmnb.inputs import Field, InputsSummary

__all__ = ["RLM", "STATUSES", "RunResult", "Session"]  # Session: defined in _engine.turn

STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run. `answer` is the submitted value (validated against the schema if given)."""

    answer: Any
    status: RunStatus
    usage: Usage
    trajectory: Trajectory = field(repr=False)
    run_id: str = ""
    reason: str = ""
    error: str | None = None
    verified: bool | None = None
    session: Session | None = field(default=None, repr=False, compare=False)
    journal: Path | None = field(default=None, repr=False, compare=False)  # the run's journal file, if written
    # event subscribers (on_event, the widget) that raised, each with its traceback; they got no more events
    subscriber_errors: tuple[str, ...] = field(default=(), repr=False, compare=False)
    fields: tuple[Field, ...] = field(default=(), repr=False, compare=False)  # the bound inputs (workspace())

    @property
    def ok(self) -> bool:
        return self.status == "submitted"

    @property
    def confinement(self) -> Confinement | None:
        """The sandbox's confinement as the run recorded it (what was and was not enforced), or None for a
        trajectory from before it was recorded. `result.confinement.describe()` says it in one line."""
        started = next((e for e in self.trajectory.events if isinstance(e, RunStarted)), None)
        if started is None or started.confinement is None:
            return None
        return Confinement.from_dict(started.confinement)

    @property
    def policies_acted(self) -> list[dict[str, Any]]:
        """Which turn-loop policies acted in the root run (RLMConfig.policies), in the order they did: one
        {"turn", "policy", "action"} per PolicyActed event (child runs' are in the trajectory); [] when none did,
        or for a trajectory from before they were recorded."""
        return [{"turn": e.turn, "policy": e.policy, "action": e.action} for e in self.trajectory.events
                if isinstance(e, PolicyActed) and e.run_id == e.root_run_id]

    def to_dict(self) -> dict[str, Any]:
        answer = recordable(self.answer)
        return {"answer": answer, "status": self.status, "usage": self.usage.to_dict(), "run_id": self.run_id,
                "reason": self.reason, "error": self.error, "verified": self.verified,
                "policies_acted": self.policies_acted, "trajectory": self.trajectory.to_dict()}

    def to_frame(self, calls: Literal["sub", "root", "all"] = "sub") -> Any:
        """The run's sub-calls as a pandas DataFrame, one row each (what "open as DataFrame" inserts);
        `calls="root"` lists the root model's replies instead, `"all"` both (Trajectory.to_frame)."""
        return self.trajectory.to_frame(calls)

    def workspace(self, *, live: bool = False, sub_model: Any = None, **values: Any) -> Workspace:
        """The run's inputs and primitives (`inputs`, `sql`, `llm_query`, ...) in the notebook, so code of
        its turns runs there; sub-calls are answered from the run's record unless `live`
        (see rlmnb._engine.workspace). `values` bind in-memory inputs again when the run was loaded from a file."""
        from rlmnb._engine.workspace import workspace_of

        return workspace_of(self.trajectory, self.fields, live=live, sub_model=sub_model, **values)

    def to_json(self, indent: int | None = None) -> str:
        import json

        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)

    def save(self, path: str | Path) -> Path:
        """Write the result with its trajectory as JSON (loadable with Trajectory.load)."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    def __repr__(self) -> str:
        answer = repr(self.answer)
        if len(answer) > 200:
            answer = answer[:197] + "..."
        return f"RunResult(status={self.status!r}, answer={answer}, usage={self.usage!r})"


class RLM:
    """A Recursive Language Model over named inputs.

    Args:
        model: the root model, a litellm model string or an LM object (e.g. ScriptedLM).
        sub_model: the model behind llm_query; defaults to `model`.
        sandbox: "kernel" or "local"; None takes the config's (RLMConfig.sandbox, "kernel" by default).
        tools: functions made callable in the sandbox (a list of named functions, or a name -> function dict).
        schema: a pydantic model or dataclass the submitted answer must validate against.
        child_model: the root model of child runs (rlm_query); defaults to `sub_model`.
        verify: a guard `(answer, context) -> confidence | (confidence, reason)`, e.g. RuleBased or LLMJudge.
        revision_prompt: replaces the default revision message ($confidence, $reason... placeholders).
        on_event: a callback receiving every event live (the widget uses this).
        config: a ready RLMConfig; keyword settings (max_iterations=..., timeout=...) override it.

    Model code reaches only what the user handed it: `llm_query(model=...)` and the other sub-calls name only
    the models given here or in `models=[...]`, and a Dask input's cluster is reached only with
    `allow_model_code_on_dask_cluster=True` (model code then runs on that cluster, outside the sandbox).
    """

    def __init__(self, model: Any = None, sub_model: Any = None, *, sandbox: str | None = None,
                 tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]] | None = None,
                 schema: Any = None, child_model: Any = None, verify: Any = None,
                 revision_prompt: str | None = None, on_event: Callable[[Event], None] | None = None,
                 config: RLMConfig | None = None, **settings: Any) -> None:
        unknown = sorted(set(settings) - set(field_names()))
        if unknown:
            raise ConfigError(f"Unknown setting(s): {', '.join(unknown)}. Known settings: "
                              f"{', '.join(field_names())}.")
        base = config or RLMConfig()
        if sandbox is not None:
            settings["sandbox"] = sandbox
        self.config = base.replace(**settings) if settings else base.validate()
        defaults = RLMConfig()  # what resume() keeps of ours: the settings given here or set away from the default
        self._given = set(settings) | {n for n in field_names() if getattr(base, n) != getattr(defaults, n)}
        if self.config.sandbox == "kernel":  # bad allow_paths, or 'required' where it cannot be: now, not mid-run
            from rlmnb._sandbox.confinement.policy import resolve

            resolve(self.config.confinement, self.config.allow_paths, self.config.allow_network)
        if model is None:
            raise ConfigError("No model given: pass model='openai/gpt-5-mini' (any litellm model) or an LM object.")
        lm_options = {"max_retries": self.config.max_retries, "timeout": self.config.request_timeout}
        self.model: LM = resolve_model(model, role="model", **lm_options)
        self.sub_model: LM = (resolve_model(sub_model, role="sub_model", **lm_options) if sub_model is not None
                              else self.model)
        self.child_model: LM | None = (resolve_model(child_model, role="child_model", **lm_options) if child_model
                                       else None)
        if self.config.max_cost is not None:  # a cost cap needs every model's price, before any call
            from rlmnb._engine.estimate import require_price

            for lm in (self.model, self.sub_model, self.child_model):
                if lm is not None:
                    require_price(lm)
        self.tools = check_tools(tools)
        self.schema = AnswerSchema(schema) if schema is not None else None
        self.verifier = None
        if verify is not None:
            from rlmnb._engine.verify import Verifier

            self.verifier = Verifier(verify, min_confidence=self.config.min_confidence,
                                     max_revisions=self.config.max_revisions, revision_prompt=revision_prompt,
                                     timeout=self.config.verify_timeout)
        self.on_event = on_event
        self.pinned_models = False  # replay: every model name is served by the record
        self._resumed_from: Path | None = None  # resume: the journal this run continues
        self._resume_record: Any = None  # resume: its resume.ResumeRecord

    # ---- running ---------------------------------------------------------------------------------
    def run(self, question: str, /, *, continue_from: RunResult | None = None, keep_session: bool = False,
            **inputs: Any) -> RunResult:
        """Answer `question` over the named inputs; blocks until the run ends (see module docs)."""
        prepared = self._prepare(question, inputs, continue_from)
        self.check_keys()
        result: RunResult = run_coroutine_blocking(self._execute(prepared, keep_session, own_loop=True),
                                                    interruptible=True, on_interrupt=_late_interrupt)
        return result

    async def arun(self, question: str, /, *, continue_from: RunResult | None = None, keep_session: bool = False,
                   **inputs: Any) -> RunResult:
        """Async form of run()."""
        prepared = self._prepare(question, inputs, continue_from)
        self.check_keys()
        return await self._execute(prepared, keep_session)

    def dry_run(self, question: str, /, **inputs: Any) -> dict[str, Any]:
        """The first root request this run would send, without calling any model."""
        prepared = self._prepare(question, inputs, None)
        from rlmnb._engine.runs import new_conversation
        from rlmnb._ground.tokens import count_messages

        messages = new_conversation(self._tree(Budget(self.config), EventBus()), prepared.spec(),
                                    self.model).messages()
        return {"summary": prepared.summary, "messages": messages,
                "tokens": count_messages(messages, model_label(self.model))}

    def check_keys(self) -> None:
        """Raise MissingAPIKey, naming the provider's variable, if a model needs a key it does not have."""
        for lm in {id(m): m for m in (self.model, self.sub_model, self.child_model) if m is not None}.values():
            check = getattr(lm, "check_key", None)
            if callable(check):
                check()

    @staticmethod
    def replay(source: str | int | Path | Trajectory | Journal, /, *, schema: Any = None, verify: Any = None,
               **inputs: Any) -> RunResult:
        """Re-run a recorded run with every model reply served from the record (zero cost); no journal is
        written, since a replay is not a new run.

        Args:
            source: a Trajectory or Journal; the path of a saved trajectory or RunResult (.json) or of a journal
                (.jsonl); or a journal's number or run id as `rlmnb runs` and `%rlm runs` list them ("last": the
                newest), read as `rlmnb replay` reads it (`rlmnb._engine.replay.read_record`).
            schema, verify: the run's answer schema and guard, when it had them (see `plan_replay`).
            inputs: the run's in-memory inputs, by name; file inputs are re-read from their recorded paths.

        Raises:
            ConfigError: no record by that reference, a file that is no record, or an input not passed again.
            ReplayDivergence: naming the first call the record does not have.
        """
        from rlmnb._engine.replay import plan_replay

        plan = plan_replay(source, schema=schema, verify=verify, **inputs)
        rlm = RLM(plan.lm, plan.lm, child_model=plan.lm, schema=plan.schema, verify=plan.verify,
                  revision_prompt=plan.revision_prompt, config=plan.config)
        rlm.pinned_models = True
        result = rlm.run(plan.question, **plan.inputs)
        if result.status == "error" and result.error and result.error.startswith("ReplayDivergence"):
            raise ReplayDivergence(result.reason)
        return result

    def resume(self, source: str | Path | Journal, /, *, force: bool = False, keep_session: bool = False,
               **inputs: Any) -> RunResult:
        """Continue a run from its journal with this RLM's models (see rlmnb._engine.resume).

        What the journal answered is served from it at zero cost; the recorded code re-runs against the
        same inputs, rebuilding the sandbox; the run goes live where the journal ends. In-memory inputs
        must be passed again by name; files are re-read from their recorded paths. The recorded settings
        hold, except those given to this RLM (e.g. `RLM(..., max_iterations=30).resume(path)`).

        Raises:
            ConfigError: an input changed since the run (unless `force=True`), or one was not passed.
            FileNotFoundError / ValueError: no journal at `source`, or not a journal.
        """
        from rlmnb._engine.resume import check_inputs, plan_resume

        plan = plan_resume(source, self.config, self._given, force=force, **inputs)
        resumed = self._resuming(plan)
        prepared = resumed._prepare(plan.question, plan.inputs, None)
        check_inputs(plan, prepared.fields)
        resumed.check_keys()
        result: RunResult = run_coroutine_blocking(resumed._execute(prepared, keep_session, own_loop=True),
                                                    interruptible=True, on_interrupt=_late_interrupt)
        return result

    def _resuming(self, plan: Any) -> RLM:
        """A copy of this RLM whose models are served by the plan's record first (resume.ResumedLM)."""
        import copy

        from rlmnb._engine.resume import ResumedLM

        twin = copy.copy(self)
        twin.config = plan.config
        twin.model = ResumedLM(self.model, plan.record, role="root")
        twin.sub_model = ResumedLM(self.sub_model, plan.record, role="sub")
        twin.child_model = ResumedLM(self.child_model, plan.record, role="sub") if self.child_model else None
        twin._resumed_from = plan.journal.path
        twin._resume_record = plan.record
        return twin

    # ---- internals -------------------------------------------------------------------------------
    def _prepare(self, question: str, inputs: dict[str, Any], continue_from: RunResult | None) -> _Prepared:
        if not isinstance(question, str) or not question.strip():
            raise ConfigError("The question is empty: pass the question as the first argument of run().")
        from rlmnb.inputs import bind_inputs

        fields_, summary = bind_inputs(inputs, self.config)
        session = continue_from.session if continue_from is not None else None
        if continue_from is not None and (session is None or session.closed):
            raise ConfigError("That run kept no session to continue: run it with keep_session=True.")
        if session is not None and self.config.rounds > 1:
            raise ConfigError("rounds > 1 cannot continue an earlier run; start a new run instead.")
        return _Prepared(question.strip(), list(fields_), summary, session)

    def _tree(self, budget: Budget, bus: EventBus) -> TreeResources:
        return TreeResources(config=self.config, root_lm=self.model, sub_lm=self.sub_model, child_lm=self.child_model,
                    tools=self.tools, schema=self.schema, budget=budget, bus=bus, verify=self.verifier,
                    pinned_models=self.pinned_models)

    async def _execute(self, prep: _Prepared, keep_session: bool, own_loop: bool = False) -> RunResult:
        bus = EventBus()
        if self.on_event is not None:
            bus.subscribe(self.on_event)
        from rlmnb._telemetry import attach as attach_telemetry

        detach = attach_telemetry(bus)
        from rlmnb._engine.estimate import known_price

        tree = self._tree(Budget(self.config, price_of=known_price), bus)
        writer: JournalWriter | None = None
        record: Outcome | None = None
        try:
            await _prepare_models(self.model, self.sub_model, self.child_model)
            earlier: list[Any] = []
            for round_no in range(1, self.config.rounds + 1):
                spec = prep.spec(keep_session=keep_session and round_no == self.config.rounds)
                if round_no > 1:
                    spec = self._next_round(prep, spec, earlier, record, round_no)
                else:
                    tree.root_run_id = spec.run_id
                    writer = self._open_journal(bus, prep, spec.run_id)
                    mark_resume = self._mark_resume(bus, spec.run_id)
                record = await execute_run(tree, spec)
                if round_no == 1:
                    mark_resume(False)  # a resumed run that never went live is marked where it ended
                if record.status not in ("submitted", "fallback"):
                    break
                earlier.append(record.answer)
        except asyncio.CancelledError:
            if not own_loop:  # an arun() caller's cancellation is theirs to see
                raise
            # run(): a Ctrl-C that reached the run between its steps (or as it ended) is an interrupted run
            record = _interrupted(record, tree.root_run_id)
        finally:
            detach()
            late = False  # a Ctrl-C that landed in the clean-up below, after the run's last step
            if writer is not None:
                late = await _uncancelled(asyncio.to_thread(writer.close), own_loop)
            if own_loop:  # the loop dies with the run: close what litellm opened on it
                late = await _uncancelled(release_model_clients(), own_loop) or late
        if late:
            record = _interrupted(record, tree.root_run_id)
        assert record is not None
        return RunResult(answer=record.answer, status=record.status, usage=tree.budget.usage(),
                         trajectory=bus.trajectory, run_id=tree.root_run_id, reason=record.reason,
                         error=record.error, verified=record.verified, session=record.session,
                         journal=writer.path if writer is not None else None,
                         subscriber_errors=tuple(bus.subscriber_errors), fields=tuple(prep.fields))

    def _open_journal(self, bus: EventBus, prep: _Prepared, run_id: str) -> JournalWriter | None:
        """Start this run's journal (rlmnb._engine.journal) as the bus's first subscriber; None when journaling is off."""
        from rlmnb._engine.journal import (
            JournalWriter,
            fingerprint,
            first_run_note,
            journal_folder,
            new_journal_path,
            prune,
            secret_values,
        )

        folder = journal_folder(self.config.journal)
        if folder is None:
            return None
        import os
        import time

        prune(folder, max(0, self.config.journal_keep - 1))
        keys = [str(getattr(lm, "api_key", None) or "") for lm in (self.model, self.sub_model, self.child_model)]
        header = {"run_id": run_id, "question": prep.question, "created": time.time(), "cwd": os.getcwd(),
                  "model": model_label(self.model), "sub_model": model_label(self.sub_model),
                  "inputs": {f.name: fingerprint(f.source, f.read_paths) for f in prep.fields},
                  "resumed_from": str(self._resumed_from) if self._resumed_from is not None else None}
        writer = JournalWriter(new_journal_path(folder, run_id), header, secrets=secret_values(keys))
        bus.subscribe(writer)
        note = first_run_note(folder, self.config.journal_keep)  # None once said (the magic says it in its view)
        if note is not None:  # where runs are kept, once: to the "rlmnb" logger, never on a notebook's stderr
            import logging

            logging.getLogger("rlmnb").info(note)
        return writer

    def _mark_resume(self, bus: EventBus, run_id: str) -> Callable[[bool], None]:
        """A resumed run marks, with one RunResumed event, the moment its first request goes live; the
        function returned marks it with `live=False` if no request has gone live yet (it does nothing for
        a run that is not resumed, or is marked already)."""
        record = self._resume_record
        if record is None:
            return lambda live: None
        from rlmnb.events import RunResumed, RunScope

        scope = RunScope(run_id=run_id, root_run_id=run_id)
        source = str(self._resumed_from)
        marked = threading.Lock()

        def mark(live: bool = True) -> None:
            if marked.acquire(blocking=False):
                bus.emit(RunResumed, scope, source=source, root_answers=record.root_answers,
                         sub_answers=record.sub_answers, served_root=record.served_root,
                         served_sub=record.served_sub, live=live)

        record.on_live = mark
        return mark

    def _next_round(self, prep: _Prepared, spec: RunSpec, earlier: list[Any], last: Outcome | None,
                    round_no: int) -> RunSpec:
        """Pass k of `rounds`: the same question, with the earlier passes' answers bound as `earlier`."""
        from rlmnb.inputs import bind_inputs

        originals = {f.name: f.source for f in prep.fields}
        fields_, summary = bind_inputs({**originals, "earlier": list(earlier)}, self.config)
        spec.fields, spec.summary = fields_, summary
        spec.parent_run_id = last.run_id if last is not None else None
        spec.label = f"round {round_no}/{self.config.rounds}"
        return spec

    def __repr__(self) -> str:
        return (f"RLM(model={model_label(self.model)!r}, sub_model={model_label(self.sub_model)!r}, "
                f"sandbox={self.config.sandbox!r})")


def _interrupted(record: Outcome | None, run_id: str) -> Outcome:
    """How a run stopped by Ctrl-C ended: interrupted, keeping an answer it already had."""
    if record is not None and record.status == "interrupted":
        return record
    if record is None:
        return Outcome("interrupted", None, "the run was interrupted", run_id=run_id)
    return Outcome("interrupted", record.answer,
                   f"interrupted as the run ended ({record.status}: {record.reason}); its answer is kept",
                   run_id=run_id, verified=record.verified, session=record.session)


async def _uncancelled(step: Any, own_loop: bool) -> bool:
    """Await a clean-up step to its end even if the run is cancelled meanwhile; True if it was.

    Only run()'s private loop swallows the cancellation (the result then says "interrupted");
    an arun() caller's cancellation is raised once the step is done.
    """
    future = asyncio.ensure_future(step)
    try:
        await asyncio.shield(future)
        return False
    except asyncio.CancelledError:
        await asyncio.wait({future})
        if not own_loop:
            raise
        return True


def _late_interrupt(result: Any) -> Any:
    """run_coroutine_blocking's hook for a Ctrl-C that came after the run's last step: still interrupted."""
    if isinstance(result, RunResult) and result.status != "interrupted":
        import dataclasses

        record = _interrupted(Outcome(result.status, result.answer, result.reason, run_id=result.run_id,
                                      verified=result.verified, session=result.session), result.run_id)
        return dataclasses.replace(result, status=record.status, reason=record.reason)
    return result


async def _prepare_models(*models: Any) -> None:
    """Let models do slow first-use work (LiteLLM imports litellm) off the run's event loop."""
    for lm in {id(m): m for m in models if m is not None}.values():
        prepare = getattr(lm, "aprepare", None)
        if prepare is not None:
            await prepare()


@dataclass
class _Prepared:
    question: str
    fields: list[Field]
    summary: InputsSummary
    session: Session | None

    def spec(self, keep_session: bool = False) -> RunSpec:
        """The root run's spec; a continued run reuses the session's sandbox and conversation."""
        if self.session is None:
            return RunSpec(question=self.question, fields=self.fields, summary=self.summary,
                           keep_session=keep_session)
        conversation = self.session.conversation
        note = f"New question (the REPL and its variables are as you left them):\n{self.question}"
        if self.fields:
            note += "\n\nNew inputs:\n" + self.summary.text
        conversation.add_question(note)
        return RunSpec(question=self.question, fields=[*self.session.fields, *self.fields], summary=self.summary,
                       conversation=conversation, sandbox=self.session.sandbox, bind_fields=self.fields,
                       keep_session=keep_session)
