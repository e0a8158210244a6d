"""Child runs: `rlm_query` / `rlm_query_batched` start RLM runs at depth + 1 on the shared budget.

A child exists only while its depth is below `max_depth` (default 1: rlm_query is then a plain
sub-call, as in the reference implementation). At the cap a request degrades to a plain sub-call
with its inputs written into the prompt, or, with `strict_depth`, fails before any model call with
DepthLimitReached. Children inherit the parent's settings; their root model is the parent's
sub-model unless `child_model` says otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from rlmnb._engine.resources import RunRecord, RunSpec, Tree
from rlmnb._engine.subcalls import SubCaller
from rlmnb._ground.errors import DepthLimitReached, RecoverableError, format_error_slot
from rlmnb.events import RunScope

RunExecutor = Callable[[Tree, RunSpec], Awaitable[RunRecord]]  # runs.execute_run


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
    """Implements host.ChildRunner for one run; `execute` runs a child (runs.execute_run, handed down)."""

    def __init__(self, tree: Tree, scope: RunScope, sub: SubCaller, *, turn: Callable[[], int],
                 execute: RunExecutor) -> None:
        self.tree = tree
        self.scope = scope
        self.sub = sub
        self.turn = turn
        self.execute = execute

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

    async def _start(self, prompt: str, inputs: Mapping[str, Any]) -> RunRecord:
        from rlmnb.inputs import bind_inputs

        fields, summary = bind_inputs(dict(inputs), self.tree.config)
        spec = RunSpec(question=prompt, fields=fields, summary=summary, depth=self.scope.depth + 1,
                       parent_run_id=self.scope.run_id, parent_turn=self.turn(), label="child run",
                       answers_question=False)
        return await self.execute(self.tree, spec)


def _failure(record: RunRecord) -> RecoverableError:
    if record.status == "budget_exhausted":
        from rlmnb._ground.errors import BudgetExhausted

        return BudgetExhausted(f"child run {record.run_id} ran out of budget: {record.reason}")
    if record.status == "interrupted":
        return ChildRunFailed(f"child run {record.run_id} was interrupted")
    return ChildRunFailed(f"child run {record.run_id} ended with {record.status}: {record.reason}")
