"""Running one model call to completion from synchronous code, in Jupyter too.

The call gets a private event loop in a worker thread (the same machinery as `RLM.run`), so a
notebook's running loop is never touched, and litellm's clients opened on that loop are closed after.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(awaitable: Awaitable[T]) -> T:
    """The awaitable's result; its exception is raised here, KeyboardInterrupt cancels it."""
    from rlmnb._api import release_model_clients
    from rlmnb._ground.blocking import run_coroutine_blocking

    async def main() -> Any:
        try:
            return await awaitable
        finally:
            await release_model_clients()

    result: T = run_coroutine_blocking(main())
    return result
