"""The one sync runner: an awaitable run to its end on a private loop, with an on_close hook on that loop."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from rlmnb._ground.blocking import run_coroutine_blocking


def test_result_and_on_close_on_the_private_loop() -> None:
    seen: dict[str, Any] = {}

    async def work() -> int:
        seen["work_loop"] = asyncio.get_running_loop()
        return 42

    async def close() -> None:
        seen["close_loop"] = asyncio.get_running_loop()

    assert run_coroutine_blocking(work(), on_close=close) == 42
    assert seen["close_loop"] is seen["work_loop"]
    assert seen["work_loop"].is_closed()  # the private loop ends with the call


def test_on_close_runs_when_the_awaitable_fails_and_the_error_is_raised_here() -> None:
    closed: list[bool] = []

    async def fail() -> None:
        raise ValueError("boom")

    async def close() -> None:
        closed.append(True)

    with pytest.raises(ValueError, match="boom"):
        run_coroutine_blocking(fail(), on_close=close)
    assert closed == [True]


def test_any_awaitable_and_no_hook() -> None:
    class Ready:
        def __await__(self) -> Generator[Any, None, str]:
            yield from asyncio.sleep(0).__await__()
            return "ready"

    assert run_coroutine_blocking(Ready()) == "ready"


def test_called_from_inside_a_running_loop_as_a_notebook_cell_is() -> None:
    async def cell() -> str:
        outer = asyncio.get_running_loop()

        async def inner() -> bool:
            return asyncio.get_running_loop() is not outer

        return "own loop" if run_coroutine_blocking(inner()) else "shared loop"

    assert asyncio.run(cell()) == "own loop"
