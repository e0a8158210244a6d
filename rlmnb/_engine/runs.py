"""Executing runs of one run tree: the root run, its child runs, revisions, refinements and rounds.

A `Tree` (tree.py) holds what every run of a tree shares: models, settings, the one Budget, the one
EventBus, the sub-call limiter and cache, and tree metadata (the verification attempt counters).
`execute_run` runs one run (any depth) from start to RunFinished: sandbox up, turns, verification,
refinement, sandbox down. `api.RLM` builds the Tree; `recursion.Children` starts child runs with it,
through the `execute_run` it is handed (so recursion.py needs nothing from this module).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from rlmnb._engine.conversation import Conversation
from rlmnb._engine.host import RunHost
from rlmnb._engine.limits import RunLimits, run_limits, sub_prompt_window
from rlmnb._engine.loop import RunContext, first_prompt, run_turns, system_prompt
from rlmnb._engine.recursion import Children
from rlmnb._engine.resources import RunRecord, RunSpec, Session, Tree
from rlmnb._engine.subcalls import SubCaller
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import ModelError, RLMError, SandboxError
from rlmnb._ground.jsonable import recordable
from rlmnb._guards.schema import AnswerSchema
from rlmnb._models.base import LM, model_label
from rlmnb._sandbox import Sandbox, create_sandbox
from rlmnb._sandbox.confinement.policy import Confinement, resolve
from rlmnb.events import RunFinished, RunScope, RunStarted


def sandbox_options(config: RLMConfig, limits: RunLimits | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"max_output_chars": limits.output_chars if limits else config.max_output_chars}
    if config.sandbox == "kernel":
        options.update(memory_limit=config.memory_limit, secret_env=config.secret_env,
                       confinement=config.confinement, allow_paths=config.allow_paths,
                       allow_network=config.allow_network)
    return options


def confinement_of(sandbox: Sandbox, config: RLMConfig) -> Confinement:
    """Which confinement the run's sandbox has (the kernel sandbox knows; any other is unconfined)."""
    found = getattr(sandbox, "confinement", None)
    if isinstance(found, Confinement):
        return found
    kind = sandbox.kind if sandbox.kind != "kernel" else "custom"
    return resolve(config.confinement, config.allow_paths, config.allow_network, sandbox=kind)


def new_conversation(tree: Tree, spec: RunSpec, lm: LM) -> Conversation:
    window = sub_prompt_window(tree.config, tree.sub_lm)
    names = [str(getattr(f, "name", "")) for f in spec.fields if getattr(f, "name", "")]
    return Conversation(system=system_prompt(tree.config, window, tree.tools, names[0] if names else "data"),
                        opening=[first_prompt(spec.question, spec.summary.text, tree.config, schema_for(tree, spec))],
                        model=model_label(lm))


def schema_for(tree: Tree, spec: RunSpec) -> AnswerSchema | None:
    """The user's answer schema binds runs that answer the user's question (root, rounds, refinements)."""
    return tree.schema if spec.answers_question else None


async def execute_run(tree: Tree, spec: RunSpec) -> RunRecord:
    """Run one run of the tree to its end; never raises for the run's own trouble (see RunRecord)."""
    scope = RunScope(run_id=spec.run_id, root_run_id=tree.root_run_id or spec.run_id,
                     parent_run_id=spec.parent_run_id, depth=spec.depth)
    lm = spec.root_lm or (tree.root_lm if spec.depth == 0 else tree.child_root_lm())
    sub = SubCaller(lm=tree.sub_lm, config=tree.config, budget=tree.budget, bus=tree.bus, scope=scope,
                    limiter=tree.limiter, cache=tree.cache)
    if tree.limiter is None:  # one limit for the whole tree: child runs share the root's, 429s included
        tree.limiter = sub.limiter
    sub.pinned = tree.pinned_models
    children = Children(tree, scope, sub, turn=lambda: ctx.turn, execute=execute_run)
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
                  confinement=confinement_of(sandbox, tree.config).to_dict())
    ctx = RunContext(question=spec.question, config=tree.config, root_lm=lm, sub=sub, sandbox=sandbox,
                     budget=tree.budget, bus=tree.bus, scope=scope, conversation=conversation,
                     schema=schema, limits=limits)
    ctx.extra["tree_metadata"] = tree.metadata
    ctx.extra["fields"] = tuple(spec.fields)  # guards that check answers against the data (QuotesFound)
    sub.turn = lambda: ctx.turn
    record = RunRecord(run_id=spec.run_id, status="error", answer=None)
    keep = False
    try:
        await sandbox.start(host)
        await sandbox.bind(spec.bind_fields if spec.bind_fields is not None else spec.fields)
        outcome = await run_turns(ctx)
        verified: bool | None = None
        if tree.verify is not None and outcome.status in ("submitted", "fallback"):
            outcome, verified = await tree.verify.check(ctx, outcome, run_turns)
        record = RunRecord(spec.run_id, outcome.status, outcome.answer, outcome.reason, verified=verified)
        keep = spec.keep_session
    except asyncio.CancelledError:
        record = RunRecord(spec.run_id, "interrupted", None, "the run was interrupted")
    except (ModelError, SandboxError, RLMError) as exc:
        record = RunRecord(spec.run_id, "error", None, str(exc), error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug in rlmnb or an adapter: keep the trajectory and report it
        record = RunRecord(spec.run_id, "error", None, f"unexpected {type(exc).__name__}: {exc}",
                           error=f"{type(exc).__name__}: {exc}")
    finally:
        if not keep:
            await asyncio.shield(_close_quietly(sandbox))
    if keep:
        record.session = Session(sandbox, conversation, list(spec.fields))
    refine_to = tree.config.refine
    if refine_to and record.status in ("submitted", "fallback") and spec.refine_level < refine_to:
        record = await refine(tree, spec, record)
    tree.bus.emit(RunFinished, scope, status=record.status, answer=recordable(record.answer),
                  usage=tree.budget.run_usage(spec.run_id).to_dict(), reason=record.reason, error=record.error,
                  verified=record.verified)
    return record


async def refine(tree: Tree, spec: RunSpec, record: RunRecord) -> RunRecord:
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
        return RunRecord(spec.run_id, result.status, result.answer,
                         f"refined by run {result.run_id}: {result.reason}", verified=result.verified,
                         session=record.session)
    return RunRecord(spec.run_id, record.status, record.answer,
                     f"{record.reason}; refinement {result.run_id} ended {result.status}, draft kept",
                     verified=record.verified, session=record.session)


async def _close_quietly(sandbox: Sandbox) -> None:
    with contextlib.suppress(Exception):  # closing must never hide the run's own outcome
        await sandbox.close()

