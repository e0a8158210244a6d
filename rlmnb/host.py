"""The host side of one run's sandbox primitives: sub-calls, child runs and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .subcalls import SubCaller


class ChildRunner(Protocol):
    """Starts child runs for rlm_query (see recursion.py); None at the depth cap."""

    async def run_child(self, prompt: str, inputs: Mapping[str, Any]) -> Any: ...

    async def run_children(self, prompts: Sequence[str],
                           inputs_list: Sequence[Mapping[str, Any]] | None) -> list[Any]: ...


def inline_inputs(prompt: str, inputs: Mapping[str, Any] | None) -> str:
    """A plain sub-call prompt carrying the inputs as text (rlm_query at the depth cap)."""
    if not inputs:
        return prompt
    parts = [prompt]
    for name, value in inputs.items():
        parts.append(f"\n\n[{name}]\n{value if isinstance(value, str) else repr(value)}")
    return "".join(parts)


class RunHost:
    """Implements SandboxHost for one run."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, sub: SubCaller,
                 tools: Mapping[str, Callable[..., Any]] | None = None, children: ChildRunner | None = None) -> None:
        self.loop = loop
        self.sub = sub
        self.tools = dict(tools or {})
        self.children = children

    async def llm_query(self, prompt: str, model: str | None = None) -> str:
        return await self.sub.query(prompt, model)

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None) -> list[str]:
        return await self.sub.query_batched(list(prompts), model)

    async def rlm_query(self, prompt: str, inputs: Mapping[str, Any] | None = None) -> Any:
        if self.children is not None:
            return await self.children.run_child(prompt, inputs or {})
        return await self.sub.query(inline_inputs(prompt, inputs))

    async def rlm_query_batched(self, prompts: Sequence[str],
                                inputs_list: Sequence[Mapping[str, Any]] | None = None) -> list[Any]:
        if self.children is not None:
            return await self.children.run_children(prompts, inputs_list)
        lists = inputs_list or [{} for _ in prompts]
        return await self.sub.query_batched([inline_inputs(p, i) for p, i in zip(prompts, lists, strict=True)])
