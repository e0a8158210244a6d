"""The host side of one run's sandbox primitives: sub-calls, child runs and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from rlmnb._engine.maps import MapHost
from rlmnb._engine.subcalls import SubCaller


class ChildRunner(Protocol):
    """Serves rlm_query: child runs below the depth cap, a plain sub-call at it (see recursion.py)."""

    async def run_child(self, prompt: str, inputs: Mapping[str, Any]) -> Any: ...

    async def run_children(self, prompts: Sequence[str],
                           inputs_list: Sequence[Mapping[str, Any]] | None) -> list[Any]: ...


class RunHost:
    """Implements SandboxHost for one run."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, sub: SubCaller,
                 children: ChildRunner, tools: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.loop = loop
        self.sub = sub
        self.tools = dict(tools or {})
        self.children = children
        self.maps = MapHost(sub)

    async def llm_query(self, prompt: str, model: str | None = None) -> str:
        return await self.sub.query(prompt, model)

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None) -> list[str]:
        return await self.sub.query_batched(list(prompts), model)

    async def rlm_query(self, prompt: str, inputs: Mapping[str, Any] | None = None) -> Any:
        return await self.children.run_child(prompt, inputs or {})

    async def rlm_query_batched(self, prompts: Sequence[str],
                                inputs_list: Sequence[Mapping[str, Any]] | None = None) -> list[Any]:
        return await self.children.run_children(prompts, inputs_list)

    async def map_begin(self, info: Mapping[str, Any]) -> dict[str, Any]:
        return self.maps.begin(info)

    async def map_batch(self, map_id: str, prompts: Sequence[str], model: str | None = None) -> list[str]:
        return await self.maps.batch(map_id, list(prompts), model)

    async def map_end(self, map_id: str, figures: Mapping[str, Any]) -> None:
        self.maps.end(map_id, figures)
