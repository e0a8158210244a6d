"""The Python API: `RLM(...).run(question, **inputs) -> RunResult`.

`run` works everywhere, Jupyter included: the run gets its own event loop in a worker thread, and
the calling thread only waits, so a kernel interrupt (KeyboardInterrupt) cancels the run cleanly and
still returns the partial result with status "interrupted". `arun` is the same for async callers.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .budget import Budget
from .config import RLMConfig, field_names
from .conversation import Conversation
from .errors import ConfigError, ModelError, RLMError, SandboxError
from .events import Event, EventBus, RunFinished, RunScope, RunStarted, Trajectory
from .host import RunHost
from .jsonable import NotJSONable, to_jsonable
from .loop import Outcome, RunContext, first_prompt, run_turns, system_prompt
from .models import LM, model_label, resolve_model
from .sandbox import Sandbox, create_sandbox
from .sandbox.primitives import check_tools
from .schema import AnswerSchema
from .subcalls import SubCaller
from .usage import Usage

STATUSES = ("submitted", "fallback", "budget_exhausted", "error", "interrupted")


@dataclass
class Session:
    """What a finished run leaves open for `continue_from`: its sandbox, conversation and inputs."""

    sandbox: Sandbox
    conversation: Conversation
    fields: list[Any]
    closed: bool = False

    def close(self) -> None:
        """Close the sandbox (for a kernel sandbox: stop its process)."""
        if not self.closed:
            self.closed = True
            _run_coroutine_blocking(self.sandbox.close())


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run. `answer` is the submitted value (validated against the schema if given)."""

    answer: Any
    status: str
    usage: Usage
    trajectory: Trajectory = field(repr=False)
    run_id: str = ""
    reason: str = ""
    error: str | None = None
    verified: bool | None = None
    session: Session | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "submitted"

    def to_dict(self) -> dict[str, Any]:
        try:
            answer = to_jsonable(self.answer)
        except NotJSONable:
            answer = repr(self.answer)
        return {"answer": answer, "status": self.status, "usage": self.usage.to_dict(), "run_id": self.run_id,
                "reason": self.reason, "error": self.error, "verified": self.verified,
                "trajectory": self.trajectory.to_dict()}

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
        sandbox: "local" or "kernel"; None takes the config's (RLMConfig.sandbox).
        tools: functions made callable in the sandbox (a list of named functions, or a name -> function dict).
        schema: a pydantic model or dataclass the submitted answer must validate against.
        on_event: a callback receiving every event live (the widget uses this).
        config: a ready RLMConfig; keyword settings (max_iterations=..., timeout=...) override it.
    """

    def __init__(self, model: Any = None, sub_model: Any = None, *, sandbox: str | None = None,
                 tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]] | None = None,
                 schema: Any = None, on_event: Callable[[Event], None] | None = None,
                 config: RLMConfig | None = None, **settings: Any) -> None:
        unknown = sorted(set(settings) - set(field_names()))
        if unknown:
            raise ConfigError(f"Unknown setting(s): {', '.join(unknown)}. Known settings: "
                              f"{', '.join(n for n in field_names() if n != 'extra')}.")
        base = config or RLMConfig()
        if sandbox is not None:
            settings["sandbox"] = sandbox
        self.config = base.replace(**settings) if settings else base.validate()
        if model is None:
            raise ConfigError("No model given: pass model='openai/gpt-5-mini' (any litellm model) or an LM object.")
        self.model: LM = resolve_model(model, role="model")
        self.sub_model: LM = resolve_model(sub_model, role="sub_model") if sub_model is not None else self.model
        self.tools = check_tools(tools)
        self.schema = AnswerSchema(schema) if schema is not None else None
        self.on_event = on_event

    # ---- running ---------------------------------------------------------------------------------
    def run(self, question: str, /, *, continue_from: RunResult | None = None, keep_session: bool = False,
            **inputs: Any) -> RunResult:
        """Answer `question` over the named inputs; blocks until the run ends (see module docs)."""
        prepared = self._prepare(question, inputs, continue_from)
        return _run_coroutine_blocking(self._execute(prepared, keep_session), interruptible=True)

    async def arun(self, question: str, /, *, continue_from: RunResult | None = None, keep_session: bool = False,
                   **inputs: Any) -> RunResult:
        """Async form of run()."""
        prepared = self._prepare(question, inputs, continue_from)
        return await self._execute(prepared, keep_session)

    def dry_run(self, question: str, /, **inputs: Any) -> dict[str, Any]:
        """The first root request this run would send, without calling any model."""
        prepared = self._prepare(question, inputs, None)
        messages = prepared.conversation.messages()
        from .tokens import count_messages

        return {"summary": prepared.summary, "messages": messages,
                "tokens": count_messages(messages, model_label(self.model))}

    @staticmethod
    def replay(source: str | Path | Trajectory, /, **inputs: Any) -> RunResult:
        """Re-run a recorded trajectory with every model reply served from the record (zero cost).

        In-memory inputs must be passed again by name; file inputs are re-read from their paths.
        Raises ReplayDivergence naming the first call the record does not have.
        """
        from .replay import replay

        return replay(source, **inputs)  # type: ignore[no-any-return]

    # ---- internals -------------------------------------------------------------------------------
    def _prepare(self, question: str, inputs: dict[str, Any], continue_from: RunResult | None) -> _Prepared:
        if not isinstance(question, str) or not question.strip():
            raise ConfigError("The question is empty: pass the question as the first argument of run().")
        from .inputs import bind_inputs

        fields_, summary = bind_inputs(inputs, self.config)
        session = continue_from.session if continue_from is not None else None
        if continue_from is not None and (session is None or session.closed):
            raise ConfigError("That run kept no session to continue: run it with keep_session=True.")
        if session is not None:
            conversation = session.conversation
            note = f"New question (the REPL and its variables are as you left them):\n{question.strip()}"
            if fields_:
                note += "\n\nNew inputs:\n" + summary.text
            conversation.add_question(note)
            all_fields = [*session.fields, *fields_]
        else:
            window = _context_window(self.sub_model, self.config)
            conversation = Conversation(system=system_prompt(self.config, window, self.tools),
                                        opening=[first_prompt(question, summary.text, self.config, self.schema)],
                                        model=model_label(self.model))
            all_fields = list(fields_)
        return _Prepared(question.strip(), fields_, all_fields, summary, conversation, session)

    async def _execute(self, prep: _Prepared, keep_session: bool) -> RunResult:
        run_id = uuid.uuid4().hex[:12]
        scope = RunScope(run_id=run_id, root_run_id=run_id)
        bus = EventBus()
        if self.on_event is not None:
            bus.subscribe(self.on_event)
        budget = Budget(self.config)
        loop = asyncio.get_running_loop()
        turn_ref = {"turn": 0}
        sub = SubCaller(lm=self.sub_model, config=self.config, budget=budget, bus=bus, scope=scope,
                        turn=lambda: turn_ref["turn"])
        host = RunHost(loop=loop, sub=sub, tools=self.tools)
        sandbox = prep.session.sandbox if prep.session is not None else create_sandbox(
            self.config.sandbox, **_sandbox_options(self.config))
        bus.emit(RunStarted, scope, question=prep.question, model=model_label(self.model),
                 sub_model=model_label(self.sub_model), sandbox=self.config.sandbox,
                 inputs=[f.info.to_dict() for f in prep.fields], summary=prep.summary.text,
                 config=self.config.public_dict())
        ctx = RunContext(question=prep.question, config=self.config, root_lm=self.model, sub=sub, sandbox=sandbox,
                         budget=budget, bus=bus, scope=scope, conversation=prep.conversation, schema=self.schema)
        sub.turn = lambda: ctx.turn
        status, answer, reason, error = "error", None, "", None
        keep = False
        try:
            await sandbox.start(host)
            await sandbox.bind(prep.fields if prep.session is not None else prep.all_fields)
            outcome: Outcome = await run_turns(ctx)
            status, answer, reason = outcome.status, outcome.answer, outcome.reason
            keep = keep_session
        except asyncio.CancelledError:
            status, reason = "interrupted", "the run was interrupted"
        except (ModelError, SandboxError) as exc:
            status, reason, error = "error", str(exc), f"{type(exc).__name__}: {exc}"
        except RLMError as exc:
            status, reason, error = "error", str(exc), f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a bug in rlmnb or a model adapter: keep the trajectory, report it
            status, reason, error = "error", f"unexpected {type(exc).__name__}: {exc}", f"{type(exc).__name__}: {exc}"
        finally:
            if not keep:
                await asyncio.shield(_close_quietly(sandbox))
        usage = budget.usage()
        recorded = _recordable(answer)
        bus.emit(RunFinished, scope, status=status, answer=recorded, usage=usage.to_dict(), reason=reason, error=error)
        session = Session(sandbox, prep.conversation, prep.all_fields) if keep else None
        return RunResult(answer=answer, status=status, usage=usage, trajectory=bus.trajectory, run_id=run_id,
                         reason=reason, error=error, session=session)

    def __repr__(self) -> str:
        return (f"RLM(model={model_label(self.model)!r}, sub_model={model_label(self.sub_model)!r}, "
                f"sandbox={self.config.sandbox!r})")


@dataclass
class _Prepared:
    question: str
    fields: list[Any]
    all_fields: list[Any]
    summary: Any
    conversation: Conversation
    session: Session | None


def _context_window(lm: LM, config: RLMConfig) -> int | None:
    if config.max_sub_prompt_tokens:
        return config.max_sub_prompt_tokens
    window = getattr(lm, "context_window", None)
    return window if isinstance(window, int) and window > 0 else None


def _sandbox_options(config: RLMConfig) -> dict[str, Any]:
    options: dict[str, Any] = {"max_output_chars": config.max_output_chars}
    if config.sandbox == "kernel":
        options.update(memory_limit=config.memory_limit, secret_env=config.secret_env)
    return options


async def _close_quietly(sandbox: Sandbox) -> None:
    try:
        await sandbox.close()
    except Exception:  # closing must never hide the run's own outcome
        pass


def _recordable(answer: Any) -> Any:
    try:
        return to_jsonable(answer)
    except NotJSONable:
        return repr(answer)


def _run_coroutine_blocking(coro: Any, *, interruptible: bool = False) -> Any:
    """Run a coroutine to completion on a private event loop in a worker thread.

    A KeyboardInterrupt in the waiting thread cancels the coroutine; with `interruptible`, its
    result (the interrupted RunResult) is still returned once it has cleaned up.
    """
    box: dict[str, Any] = {}
    ready = threading.Event()
    finished = threading.Event()  # not thread.join(): an interrupted join() can mark a live thread stopped

    def worker() -> None:
        loop = asyncio.new_event_loop()
        try:
            box["loop"] = loop
            box["task"] = loop.create_task(coro)
            ready.set()
            box["result"] = loop.run_until_complete(box["task"])
        except BaseException as exc:
            box["error"] = exc
        finally:
            ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
                finished.set()

    thread = threading.Thread(target=worker, name="rlmnb-run", daemon=True)
    thread.start()
    ready.wait()
    interrupted = False
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            interrupted = True
            loop, task = box.get("loop"), box.get("task")
            if loop is not None and task is not None and not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
    if "error" in box:
        error = box["error"]
        if isinstance(error, asyncio.CancelledError):
            raise KeyboardInterrupt from None
        raise error
    if interrupted and not interruptible:
        raise KeyboardInterrupt
    return box.get("result")


def result_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(RunResult))


_ = time  # imported for typing-free timing helpers in subclasses
