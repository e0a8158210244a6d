"""Running an awaitable to its end from synchronous code, on a private event loop in a worker thread.

A notebook cell is synchronous and may already sit inside a running event loop (ipykernel's), so a
run gets its own loop in its own thread; Ctrl-C / the stop button in the waiting thread cancels it.
`run_coroutine_blocking` is the one sync runner of rlmnb (`RLM.run`, an evaluation's model call, a
sandbox closed from sync code); an `on_close` hook runs on the private loop before it ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

__all__ = ["run_coroutine_blocking"]


def run_coroutine_blocking(awaitable: Awaitable[T], *, interruptible: bool = False,
                           on_close: Callable[[], Awaitable[None]] | None = None) -> T:
    """Run an awaitable to completion on a private event loop in a worker thread.

    Args:
        awaitable: what to run; it must not be bound to another event loop.
        interruptible: after a KeyboardInterrupt, still return the awaitable's result once it has
            cleaned up (an interrupted RunResult) instead of raising KeyboardInterrupt.
        on_close: awaited on the private loop after the awaitable ends, however it ends (for example
            `rlmnb._models.resolve.release_model_clients`, which closes clients opened on that loop).

    Returns:
        The awaitable's result.

    Raises:
        The awaitable's exception; KeyboardInterrupt when the waiting thread was interrupted (the
        awaitable is cancelled) unless `interruptible`.
    """
    coro = _closing(awaitable, on_close) if on_close is not None else awaitable
    box: dict[str, Any] = {}
    ready = threading.Event()
    finished = threading.Event()  # not thread.join(): an interrupted join() can mark a live thread stopped

    def worker() -> None:
        loop = asyncio.new_event_loop()
        try:
            box["loop"] = loop
            box["task"] = loop.create_task(_as_coroutine(coro))
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
    try:
        thread.join(1.0)  # it has finished and is only exiting: no run thread outlives the call
    except KeyboardInterrupt:
        interrupted = True
    if "error" in box:
        error = box["error"]
        if isinstance(error, asyncio.CancelledError):
            raise KeyboardInterrupt from None
        raise error
    if interrupted and not interruptible:
        raise KeyboardInterrupt
    return cast(T, box.get("result"))


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _closing(awaitable: Awaitable[T], on_close: Callable[[], Awaitable[None]]) -> T:
    try:
        return await awaitable
    finally:
        await on_close()

