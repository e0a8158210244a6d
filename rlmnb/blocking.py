"""Running a coroutine to its end from synchronous code, on a private event loop in a worker thread.

A notebook cell is synchronous and may already sit inside a running event loop (ipykernel's), so a
run gets its own loop in its own thread; Ctrl-C / the stop button in the waiting thread cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["run_coroutine_blocking"]


def run_coroutine_blocking(coro: Any, *, interruptible: bool = False,
                           on_interrupt: Callable[[Any], Any] | None = None) -> Any:
    """Run a coroutine to completion on a private event loop in a worker thread.

    A KeyboardInterrupt in the waiting thread, whenever it comes (before the coroutine started, while
    it runs, or as it ends), cancels the coroutine if it still runs and is never lost: without
    `interruptible` it is raised once the coroutine has cleaned up; with it, the coroutine's result
    (the interrupted RunResult) is returned, passed through `on_interrupt` when given (so a result that
    was complete before the cancel landed can still be marked as interrupted).
    """
    box: dict[str, Any] = {}
    finished = threading.Event()  # not thread.join(): an interrupted join() can mark a live thread stopped

    def worker() -> None:
        loop = asyncio.new_event_loop()
        try:
            box["loop"] = loop
            task = loop.create_task(coro)
            box["task"] = task
            if box.get("cancel"):  # interrupted before the task existed
                task.cancel()
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:
            box["error"] = exc
        finally:
            try:
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
    result = box.get("result")
    return on_interrupt(result) if interrupted and on_interrupt is not None else result
