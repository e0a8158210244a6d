"""Executing the runs of one run tree: `execute_run(tree, spec) -> Outcome`, any depth, start to RunFinished.

Entry points: `execute_run` (sandbox up, turns, verification, refinement, sandbox down; never raises for
the run's own trouble), `refine` (the answer becomes the input `draft` of a child run) and `Children`
(rlm_query / rlm_query_batched: child runs at depth + 1 on the shared budget). `api.RLM` builds the
TreeResources.

A child exists only while its depth is below `max_depth` (default 1: rlm_query is then a plain
sub-call, as in the reference implementation). At the cap a request degrades to a plain sub-call
with its inputs written into the prompt, or, with `strict_depth`, fails before any model call with
DepthLimitReached. Children inherit the parent's settings; their root model is the parent's
sub-model unless `child_model` says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlmnb._engine.context import Outcome, RunContext, Session
from rlmnb._engine.conversation import Conversation
from rlmnb._engine.limits import RunLimits, run_limits, sub_prompt_window
from rlmnb._engine.loop import first_prompt, run_turns, system_prompt
from rlmnb._engine.policies import Policies, policies_for
from rlmnb._engine.resources import RunSpec, TreeResources
from rlmnb._engine.subcalls import RunHost, SubCaller
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import (
    BudgetExhausted,
    DepthLimitReached,
    ModelError,
    RecoverableError,
    RLMError,
    SandboxError,
    format_error_slot,
)
from rlmnb._ground.jsonable import recordable
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM, model_label
from rlmnb._sandbox import Sandbox, create_sandbox
from rlmnb._sandbox.confinement.policy import Confinement, resolve
from rlmnb.events import RunFinished, RunScope, RunStarted

if TYPE_CHECKING:
    from rlmnb.inputs import Field

__all__ = ["ChildRunFailed", "Children", "confinement_of", "execute_run", "inline_inputs", "new_conversation",
           "refine", "sandbox_options", "schema_for"]

def sandbox_options(config: RLMConfig, limits: RunLimits | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"max_output_chars": limits.output_chars if limits else config.max_output_chars}
    if config.sandbox == "kernel":
        options.update(memory_limit=config.memory_limit, secret_env=config.secret_env,
                       confinement=config.confinement, allow_paths=config.allow_paths,
                       allow_network=config.allow_network)
    return options


def confinement_of(sandbox: Sandbox, config: RLMConfig, fields: Sequence[Field] = ()) -> Confinement:
    """Which confinement the run's sandbox has (the kernel sandbox knows; any other is unconfined); a sandbox
    whose inputs name TCP endpoints keeps the host's network (Landlock's ports rule it)."""
    found = getattr(sandbox, "confinement", None)
    if isinstance(found, Confinement) and any(getattr(f, "endpoints", ()) for f in fields):
        found = found.sharing_network()
    if isinstance(found, Confinement):
        return found
    kind = sandbox.kind if sandbox.kind != "kernel" else "custom"
    return resolve(config.confinement, config.allow_paths, config.allow_network, sandbox=kind)


def new_conversation(tree: TreeResources, spec: RunSpec, lm: LM) -> Conversation:
    """The opening conversation of a new run: the system rules and the question with its InputsSummary."""
    window = sub_prompt_window(tree.config, tree.sub_lm)
    names = [str(getattr(f, "name", "")) for f in spec.fields if getattr(f, "name", "")]
    return Conversation(system=system_prompt(tree.config, window, tree.tools, names[0] if names else "data"),
                        opening=[first_prompt(spec.question, spec.summary.text, tree.config, schema_for(tree, spec))],
                        model=model_label(lm))


def schema_for(tree: TreeResources, spec: RunSpec) -> AnswerSchema | None:
    """The user's answer schema binds runs that answer the user's question (root, rounds, refinements)."""
    return tree.schema if spec.answers_question else None


async def execute_run(tree: TreeResources, spec: RunSpec) -> Outcome:
    """Run one run of the tree (any depth) to its end: RunStarted, sandbox, turns, verification, RunFinished.

    Args:
        tree: what the tree's runs share (models, settings, budget, bus, limiter, cache).
        spec: the run: question, inputs, depth, and a continued run's sandbox and conversation.

    Returns:
        How the run ended, with `run_id` set; its `session` when `spec.keep_session` and the run got that far.
        The run's own trouble (model, sandbox or unexpected errors, cancellation) is a status, never raised.
    """
    scope = RunScope(run_id=spec.run_id, root_run_id=tree.root_run_id or spec.run_id,
                     parent_run_id=spec.parent_run_id, depth=spec.depth)
    lm = spec.root_lm or (tree.root_lm if spec.depth == 0 else tree.child_root_lm())
    sub = SubCaller(lm=tree.sub_lm, config=tree.config, budget=tree.budget, bus=tree.bus, scope=scope,
                    limiter=tree.limiter, cache=tree.cache, models=(lm, tree.root_lm, tree.child_lm))
    if tree.limiter is None:  # one limit for the whole tree: child runs share the root's, 429s included
        tree.limiter = sub.limiter
    sub.pinned = tree.pinned_models
    children = Children(tree, scope, sub)
    host = RunHost(loop=asyncio.get_running_loop(), sub=sub, tools=tree.tools, children=children)
    limits = run_limits(tree.config, lm, tree.sub_lm)
    sandbox = spec.sandbox or create_sandbox(tree.config.sandbox, **sandbox_options(tree.config, limits))
    conversation = spec.conversation or new_conversation(tree, spec, lm)
    schema = schema_for(tree, spec)
    tree.bus.emit(RunStarted, scope, question=spec.question, model=model_label(lm),
                  sub_model=model_label(tree.sub_lm), sandbox=tree.config.sandbox,
                  inputs=[f.info.to_dict() for f in spec.fields], summary=spec.summary.text,
                  config=tree.config.public_dict(), parent_turn=spec.parent_turn, label=spec.label,
                  schema=schema.describe() if schema is not None else None,
                  verify=tree.verify.describe() if tree.verify is not None else None,
                  confinement=confinement_of(sandbox, tree.config, spec.fields).to_dict())
    ctx = RunContext(question=spec.question, config=tree.config, root_lm=lm, sub=sub, sandbox=sandbox,
                     budget=tree.budget, bus=tree.bus, scope=scope, conversation=conversation,
                     schema=schema, limits=limits, policies=Policies(policies_for(tree.config, limits.root_window)))
    ctx.extra["tree_metadata"] = tree.metadata
    ctx.extra["fields"] = tuple(spec.fields)  # guards that check answers against the data (QuotesFound)
    sub.turn = lambda: ctx.turn
    record = Outcome("error", None, run_id=spec.run_id)
    keep = False
    try:
        await sandbox.start(host)
        await sandbox.bind(spec.bind_fields if spec.bind_fields is not None else spec.fields)
        if spec.conversation is None and spec.depth == 0:
            reading = await ctx.policies.on_start(ctx, spec.fields)
            if reading is not None:
                conversation.opening[0] = first_prompt(spec.question, spec.summary.text, tree.config, schema,
                                                       reading)
        outcome = await run_turns(ctx)
        verified: bool | None = None
        if tree.verify is not None and outcome.status in ("submitted", "fallback"):
            outcome, verified = await tree.verify.check(ctx, outcome, run_turns)
        record = Outcome(outcome.status, outcome.answer, outcome.reason, run_id=spec.run_id, verified=verified)
        keep = spec.keep_session
    except asyncio.CancelledError:
        record = Outcome("interrupted", None, "the run was interrupted", run_id=spec.run_id)
    except (ModelError, SandboxError, RLMError) as exc:
        record = Outcome("error", None, str(exc), run_id=spec.run_id, error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug in rlmnb or an adapter: keep the trajectory and report it
        record = Outcome("error", None, f"unexpected {type(exc).__name__}: {exc}", run_id=spec.run_id,
                           error=f"{type(exc).__name__}: {exc}")
    finally:
        if not keep:
            await asyncio.shield(_close_quietly(sandbox))
    if keep:
        record = dataclasses.replace(record, session=Session(sandbox, conversation, list(spec.fields)))
    refine_to = tree.config.refine
    if refine_to and record.status in ("submitted", "fallback") and spec.refine_level < refine_to:
        record = await refine(tree, spec, record)
    tree.bus.emit(RunFinished, scope, status=record.status, answer=recordable(record.answer),
                  usage=tree.budget.run_usage(spec.run_id).to_dict(), reason=record.reason, error=record.error,
                  verified=record.verified)
    return record


async def refine(tree: TreeResources, spec: RunSpec, record: Outcome) -> Outcome:
    """The answer becomes the input `draft` of a child run of the same question; its answer bubbles up."""
    from rlmnb.inputs import bind_inputs

    originals = {f.name: f.source for f in spec.fields if f.name != "draft"}
    fields, summary = bind_inputs({**originals, "draft": recordable(record.answer)}, tree.config)
    child = RunSpec(question=spec.question, fields=fields, summary=summary, depth=spec.depth + 1,
                    parent_run_id=spec.run_id, label=f"refinement {spec.refine_level + 1}",
                    root_lm=spec.root_lm or (tree.root_lm if spec.depth == 0 else tree.child_root_lm()),
                    refine_level=spec.refine_level + 1)
    result = await execute_run(tree, child)
    if result.status in ("submitted", "fallback"):
        return Outcome(result.status, result.answer, f"refined by run {result.run_id}: {result.reason}",
                       run_id=spec.run_id, verified=result.verified, session=record.session)
    return Outcome(record.status, record.answer,
                   f"{record.reason}; refinement {result.run_id} ended {result.status}, draft kept",
                   run_id=spec.run_id, verified=record.verified, session=record.session)


async def _close_quietly(sandbox: Sandbox) -> None:
    with contextlib.suppress(Exception):  # closing must never hide the run's own outcome
        await sandbox.close()


# ---- child runs -----------------------------------------------------------------------------------
def inline_inputs(prompt: str, inputs: Mapping[str, Any] | None) -> str:
    """A plain sub-call prompt carrying the inputs as text (rlm_query at the depth cap)."""
    if not inputs:
        return prompt
    parts = [prompt]
    for name, value in inputs.items():
        parts.append(f"\n\n[{name}]\n{value if isinstance(value, str) else repr(value)}")
    return "".join(parts)


class ChildRunFailed(RecoverableError):
    """A child run ended without an answer; shown to the parent model."""


class Children:
    """Implements subcalls.ChildRunner for one run: child runs below the depth cap, a plain sub-call at it."""

    def __init__(self, tree: TreeResources, scope: RunScope, sub: SubCaller) -> None:
        self.tree = tree
        self.scope = scope
        self.sub = sub

    @property
    def at_cap(self) -> bool:
        return self.scope.depth + 1 >= self.tree.config.max_depth

    def _refuse(self) -> DepthLimitReached:
        cap = self.tree.config.max_depth
        return DepthLimitReached(
            f"rlm_query at depth {self.scope.depth} would start a child run at depth {self.scope.depth + 1}, but "
            f"max_depth is {cap}; nothing was sent. Use llm_query for this piece, or split the work with code.")

    async def run_child(self, prompt: str, inputs: Mapping[str, Any]) -> Any:
        if self.at_cap:
            if self.tree.config.strict_depth:
                raise self._refuse()
            return await self.sub.query(inline_inputs(prompt, inputs))
        record = await self._start(prompt, inputs)
        if record.status in ("submitted", "fallback"):
            return record.answer
        raise _failure(record)

    async def run_children(self, prompts: Sequence[str],
                           inputs_list: Sequence[Mapping[str, Any]] | None) -> list[Any]:
        lists = list(inputs_list) if inputs_list is not None else [{} for _ in prompts]
        if self.at_cap:
            if self.tree.config.strict_depth:
                raise self._refuse()
            return await self.sub.query_batched([inline_inputs(p, i) for p, i in zip(prompts, lists, strict=True)])
        limit = asyncio.Semaphore(self.tree.config.max_child_concurrency)

        async def one(prompt: str, inputs: Mapping[str, Any]) -> Any:
            async with limit:
                record = await self._start(prompt, inputs)
            if record.status in ("submitted", "fallback"):
                return record.answer
            return format_error_slot(_failure(record))

        return list(await asyncio.gather(*(one(p, i) for p, i in zip(prompts, lists, strict=True))))

    async def _start(self, prompt: str, inputs: Mapping[str, Any]) -> Outcome:
        from rlmnb.inputs import bind_inputs

        fields, summary = bind_inputs(dict(inputs), self.tree.config)
        spec = RunSpec(question=prompt, fields=fields, summary=summary, depth=self.scope.depth + 1,
                       parent_run_id=self.scope.run_id, parent_turn=self.sub.turn(), label="child run",
                       answers_question=False)
        return await execute_run(self.tree, spec)


def _failure(record: Outcome) -> RecoverableError:
    if record.status == "budget_exhausted":
        return BudgetExhausted(f"child run {record.run_id} ran out of budget: {record.reason}")
    if record.status == "interrupted":
        return ChildRunFailed(f"child run {record.run_id} was interrupted")
    return ChildRunFailed(f"child run {record.run_id} ended with {record.status}: {record.reason}")
