"""The executor seam: where one task's flow runs.

The dispatcher decides *which* tasks run and hands each, with its workspace at the task's base commit, to a
``TaskExecutor``: "run this task's flow (developer → gates → reviewer → test engineer → tournament →
commit) there, and hand back the task as it ended". The flow records its change and every piece of
evidence in the ledger as it goes, so the task the executor returns is the ledger's. ``LocalExecutor``, the
one implementation today, runs the flow in this process, in the workspace the dispatcher opened (the main
checkout, or the task's own worktree). An executor that runs the flow elsewhere plugs in here, without a
change to the dispatcher or to the flow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from autodev.orchestrator.execute.task_flow import TaskContext, execute_task
from autodev.state.schemas import Task

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["LocalExecutor", "TaskExecutor"]


class TaskExecutor(Protocol):
    """Runs one started task's flow until the task is terminal (complete, blocked or skipped), or its
    verified change waits for adoption (``autodev.orchestrator.execute.adoption``)."""

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        """Run ``task_id`` from its recorded step in ``context.workspace``; the task as it ended."""
        ...


class LocalExecutor:
    """The flow in this process, in the workspace the dispatcher opened."""

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        await execute_task(session, task_id, context)
        return session.plan_manager.get_task(task_id)
