"""Work that runs beside a block of code for as long as the block runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager

import anyio

__all__ = ["beside"]


@asynccontextmanager
async def beside(*jobs: Callable[[], Coroutine[object, object, object]]) -> AsyncIterator[None]:
    """Run ``jobs`` in the background while the block runs; whatever of them is left when it ends, however
    it ends, is cancelled (nothing after the block needs it). An exception the block raises leaves as
    itself: leaving the task group with it would wrap it in an exception group. A job handles its own
    errors: one it raises ends the block as the task group's."""
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        for job in jobs:
            group.start_soon(job)
        try:
            yield
        except Exception as exc:
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
