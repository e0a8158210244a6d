"""Running a coroutine to its end from synchronous code, on a private event loop in a worker thread.

A notebook cell is synchronous and may already sit inside a running event loop (ipykernel's), so a
run gets its own loop in its own thread; Ctrl-C / the stop button in the waiting thread cancels it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["run_coroutine_blocking"]


def run_coroutine_blocking(coro: Any, *, interruptible: bool = False) -> Any:
    """Run a coroutine to completion on a private event loop in a worker thread.

    A KeyboardInterrupt in the waiting thread cancels the coroutine; with `interruptible`, its
    result (the interrupted RunResult) is still returned once it has cleaned up.
    """
    box: dict[str, Any] = {}
    ready = threading.Event()
    finished = threading.Event()  # not thread.join(): an interrupted join() can mark a live thread stopped

    def worker() -> None:
        loop = asyncio.new_event_loop()
        try:
            box["loop"] = loop
            box["task"] = loop.create_task(coro)
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
    return box.get("result")

