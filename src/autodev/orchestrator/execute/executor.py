"""The executor seam: where one task's flow runs.

The dispatcher decides *which* tasks run and hands each, with its workspace at the task's base commit, to a
``TaskExecutor``: "run this task's flow (developer → gates → reviewer → test engineer → tournament →
commit) there, and hand back the task as it ended". The flow records its change and every piece of
evidence in the ledger as it goes, so the task the executor returns is the ledger's. ``LocalExecutor``, the
local one runs the flow in this process, in the workspace the dispatcher opened (the main checkout, or the
task's own worktree); ``autodev.orchestrator.execute.ray_executor`` runs its steps on a Ray cluster's nodes
and lands the change here. ``serving`` spans the dispatcher's whole run: what an executor needs while tasks
are in flight (a connection, a relay for the workers' ledger changes) lives that long.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import anyio

from autodev.orchestrator.execute.task_flow import TaskContext, execute_task
from autodev.state.schemas import Task
from autodev.workspace.bundles import restore_working_state, working_ref
from autodev.workspace.integration import TaskWorkspace

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["LocalExecutor", "TaskExecutor"]


class TaskExecutor(Protocol):
    """Runs one started task's flow until the task is terminal (complete, blocked or skipped), or its
    verified change waits for adoption (``autodev.orchestrator.execute.adoption``)."""

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        """Run ``task_id`` from its recorded step in ``context.workspace``; the task as it ended."""
        ...

    def serving(self, session: RunContext) -> AbstractAsyncContextManager[None]:
        """Held while the dispatcher runs tasks through this executor."""
        ...


class LocalExecutor:
    """The flow in this process, in the workspace the dispatcher opened."""

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        if context.resumed and context.workspace.isolated:
            await _continue_from_a_node(session, task_id, context.workspace)
        await execute_task(session, task_id, context)
        return session.plan_manager.get_task(task_id)

    @asynccontextmanager
    async def serving(self, session: RunContext) -> AsyncIterator[None]:
        """Nothing to hold: the flow runs in this process."""
        yield


async def _continue_from_a_node(session: RunContext, task_id: str, workspace: TaskWorkspace) -> None:
    """A task a Ray node was working on, resumed here (the run continues with ``executor = local``): its
    files are the working state the head kept for the step the ledger recorded
    (``autodev.workspace.bundles``), not the untouched worktree the head had opened for its landing."""
    task = session.plan_manager.get_task(task_id)
    commit = await session.git.resolve(working_ref(task_id))
    if commit is None or task.base_commit is None:
        return
    if await session.git.resolve(f"{commit}^") != task.base_commit or not await workspace.git.is_clean():
        return  # a state of an older base, or a worktree that holds work of its own
    await anyio.to_thread.run_sync(restore_working_state, workspace.root, task.base_commit, commit, task_id)
    workspace.git.unwatch()
