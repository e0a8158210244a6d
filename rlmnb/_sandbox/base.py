"""The Sandbox seam: where the root model's code runs, and what it can reach on the host.

A sandbox owns one Python namespace per run holding `inputs` and the primitives (`llm_query`,
`llm_query_batched`, `rlm_query`, `rlm_query_batched`, `submit`, `FINAL`, `FINAL_VAR`, `SHOW_VARS`,
and the user's tools). Model calls always go back to the host's `SandboxHost`, so the budget, the
trajectory and the widget behave the same whichever sandbox runs the code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from rlmnb._ground.images import Image
    from rlmnb.inputs import Field

RESERVED_NAMES = frozenset({
    "inputs", "llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "submit", "FINAL",
    "FINAL_VAR", "SHOW_VARS", "llm_map", "llm_classify", "llm_filter", "sql", "find_mentions", "read_text",
})


@dataclass(frozen=True)
class ExecResult:
    """What one snippet did. `submitted` means submit()/FINAL()/FINAL_VAR() ended it with `answer`."""

    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # the trimmed traceback, or None
    error_type: str | None = None
    submitted: bool = False
    answer: Any = None
    submit_error: str | None = None  # why the submitted value was unusable (e.g. not JSON-able)
    submit_during_exception: str | None = None  # the exception type being handled when submit ran
    duration_s: float = 0.0
    timed_out: bool = False
    restarted: bool = False
    notice: str | None = None  # e.g. "the kernel died and was restarted; variables were lost"
    tables: list[dict[str, Any]] = field(default_factory=list)  # DataFrames written (runner.table_record)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


class SandboxHost(Protocol):
    """Host services the sandbox primitives call. Coroutines run on the run's event loop."""

    loop: asyncio.AbstractEventLoop

    @property
    def tools(self) -> Mapping[str, Callable[..., Any]]: ...

    # images (vision sub-calls) are passed by keyword, only when the call has some
    async def llm_query(self, prompt: str, model: str | None = None, *, images: Sequence[Image] | None = None) -> str:
        ...

    async def llm_query_batched(self, prompts: Sequence[str], model: str | None = None, *,
                                images: Sequence[Sequence[Image]] | None = None) -> list[str]: ...

    async def rlm_query(self, prompt: str, inputs: Mapping[str, Any] | None = None) -> Any: ...

    async def rlm_query_batched(self, prompts: Sequence[str],
                                inputs_list: Sequence[Mapping[str, Any]] | None = None) -> list[Any]: ...

    # llm_map / llm_classify / llm_filter (see rlmnb/maps.py): a group of packed batches with its figures
    async def map_begin(self, info: Mapping[str, Any]) -> dict[str, Any]: ...

    async def map_batch(self, map_id: str, prompts: Sequence[str], model: str | None = None, *,
                        images: Sequence[Sequence[Image]] | None = None) -> list[str]: ...

    async def map_end(self, map_id: str, figures: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs snippets in one namespace. Every method is a coroutine on the run's event loop."""

    kind: str

    async def start(self, host: SandboxHost) -> None: ...

    async def bind(self, fields: Sequence[Field]) -> None: ...

    async def execute(self, code: str, timeout: float, *, turn: int = 0) -> ExecResult: ...

    async def restart(self) -> None: ...

    async def close(self) -> None: ...

    async def variables(self) -> list[str]: ...


__all__ = ["ExecResult", "RESERVED_NAMES", "Sandbox", "SandboxHost"]
