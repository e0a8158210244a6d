"""Running an awaitable to its end from synchronous code, on a private event loop in a worker thread.

A notebook cell is synchronous and may already sit inside a running event loop (ipykernel's), so a
run gets its own loop in its own thread; Ctrl-C / the stop button in the waiting thread cancels it.
`run_coroutine_blocking` is the one sync runner of rlmnb (`RLM.run`, an evaluation's model call, a
sandbox closed from sync code); an `on_close` hook runs on the private loop before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

__all__ = ["run_coroutine_blocking"]


def run_coroutine_blocking(awaitable: Awaitable[T], *, interruptible: bool = False,
                           on_close: Callable[[], Awaitable[None]] | None = None,
                           on_interrupt: Callable[[T], T] | None = None) -> T:
    """Run an awaitable to completion on a private event loop in a worker thread.

    A KeyboardInterrupt in the waiting thread, whenever it comes (before the awaitable started, while
    it runs, or as it ends), cancels the awaitable if it still runs and is never lost.

    Args:
        awaitable: what to run; it must not be bound to another event loop.
        interruptible: after a KeyboardInterrupt, still return the awaitable's result once it has
            cleaned up (an interrupted RunResult) instead of raising KeyboardInterrupt.
        on_close: awaited on the private loop after the awaitable ends, however it ends (for example
            `rlmnb._models.resolve.release_model_clients`, which closes clients opened on that loop).
        on_interrupt: with `interruptible`, the result of an interrupted call is passed through it (so a
            result that was complete before the cancel landed can still be marked as interrupted).

    Returns:
        The awaitable's result.

    Raises:
        The awaitable's exception; KeyboardInterrupt when the waiting thread was interrupted (the
        awaitable is cancelled) unless `interruptible`.
    """
    coro = _closing(awaitable, on_close) if on_close is not None else awaitable
    box: dict[str, Any] = {}
    finished = threading.Event()  # not thread.join(): an interrupted join() can mark a live thread stopped

    def worker() -> None:
        loop = asyncio.new_event_loop()
        try:
            box["loop"] = loop
            task = loop.create_task(_as_coroutine(coro))
            box["task"] = task
            if box.get("cancel"):  # interrupted before the task existed: cancel it once it has started
                loop.call_soon(task.cancel)
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:
            box["error"] = exc
        finally:
            try:
                # tasks the awaitable left running (e.g. a spare kernel still launching) are cancelled and
                # allowed to clean up, never abandoned with the loop
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
                finished.set()

    thread = threading.Thread(target=worker, name="rlmnb-run", daemon=True)
    thread.start()
    interrupted = False
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            interrupted = True
            box["cancel"] = True  # set before reading the task: the worker or we cancel it
            loop, task = box.get("loop"), box.get("task")
            if loop is not None and task is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to cancel
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
    result = cast(T, box.get("result"))
    return on_interrupt(result) if interrupted and on_interrupt is not None else result


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _closing(awaitable: Awaitable[T], on_close: Callable[[], Awaitable[None]]) -> T:
    try:
        return await awaitable
    finally:
        await on_close()
