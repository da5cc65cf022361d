"""The tasks of a live run that wait for the user's answer to an approval request, and the tasks they hold.

A task whose owned paths no scope covers waits for its request (``RunPolicy.awaiting_approval``); every
pending task depending on it, directly or not, is *held* (``blocked_on_human``, a ledger record): it neither
starts nor ages in the policy's queue. The run goes on with everything else and looks at the ledger each time
a task finishes (and every second while it waits): an answer given meanwhile from another terminal (``autodev
approve --scope ID`` / ``autodev decline ID``) takes effect in the same run. Accepted, the waiting tasks and
the tasks they held go back to the queue; declined, they are blocked, as a cancelled request ends its
dependents.

While the run waits, the request's ``waiting_since`` is set; it is cleared when the run stops waiting
(answered, or the run ends), so a wait abandoned by an ended run never looks like one still under way. When
nothing else is left, the run pauses (exit 3) and the request waits for as long as the user takes; with
``--wait`` it waits for the answer instead, up to ``policy.worker_approval_timeout_s`` from ``waiting_since``,
after which the waiting tasks are blocked naming the unanswered request (``approval_timeout``), and the tasks
they held with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from autodev.logging import get_logger
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.task_flow import block_task
from autodev.orchestrator.run_context import RunContext
from autodev.state.policy_records import ApprovalRecord
from autodev.state.vocabulary import TERMINAL_STATUSES

__all__ = ["ApprovalWaits"]

_log = get_logger("autodev.approval_waits")


class ApprovalWaits:
    """``{task id: its request}`` for the tasks of this run that wait for an answer, kept current."""

    def __init__(self, session: RunContext, waiting: dict[str, ApprovalRecord]) -> None:
        self.session = session
        self.pm = session.plan_manager
        self.waiting = dict(waiting)

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def __iter__(self) -> Iterator[str]:
        return iter(self.waiting)

    def records(self) -> list[ApprovalRecord]:
        """The requests still waited for, each once, oldest first."""
        unique = {record.id: record for record in self.waiting.values()}
        return sorted(unique.values(), key=lambda record: int(record.id.lstrip("A") or 0))

    def begin(self) -> None:
        """The run starts waiting: hold the dependents of each waiting task, and move ``waiting_since``
        (a stamp a killed run left is cleared first: only one run works at a time, so no wait is under
        way)."""
        stale = [record.id for record in self.pm.approvals if record.waiting_since is not None]
        self.pm.mark_waiting(stale, waiting=False)
        for record in self.records():
            tasks = [task_id for task_id, waited in self.waiting.items() if waited.id == record.id]
            held = self.pm.block_on_human(record.id, tasks)
            if held:
                self.session.emit(
                    ProgressEvent(
                        "note",
                        f"{len(held)} task(s) held until {record.id} is answered: {', '.join(held[:8])}"
                        + (f" (+{len(held) - 8} more)" if len(held) > 8 else ""),
                    )
                )
        self.pm.mark_waiting([record.id for record in self.records()], waiting=True)

    def end(self) -> None:
        """The run stops waiting (it ends, or pauses): ``waiting_since`` is cleared."""
        self.pm.mark_waiting([record.id for record in self.records()], waiting=False)

    def settle(self) -> bool:
        """Apply the answers given since the last look; whether any task may now start or was blocked."""
        if not self.waiting:
            return False
        self.pm.catch_up()
        current = {record.id: record for record in self.pm.approvals}
        changed = False
        for task_id, record in list(self.waiting.items()):
            answer = current.get(record.id, record)
            if answer.status == "pending":
                continue
            del self.waiting[task_id]
            changed = True
            if answer.status == "accepted":
                self.session.emit(ProgressEvent("note", f"{answer.id} accepted: {task_id} goes on", task_id))
                continue
            if self.pm.get_task_status(task_id) not in TERMINAL_STATUSES:
                block_task(
                    self.session,
                    task_id,
                    f"policy: approval_declined: the user declined the write scope {', '.join(answer.scope)} "
                    f"({answer.id}); declare a scope that covers the task's files, then "
                    f"`autodev retry {task_id}`",
                )
        return changed

    def seconds_left(self) -> float:
        """Until the earliest waiting request's deadline (``policy.worker_approval_timeout_s`` from its
        ``waiting_since``); 0 when one has passed."""
        timeout = self.session.config.policy.worker_approval_timeout_s
        current = {record.id: record for record in self.pm.approvals}
        now = datetime.now(UTC)
        left = timeout
        for record in self.records():
            since = current.get(record.id, record).waiting_since
            if since is not None:
                left = min(left, timeout - (now - datetime.fromisoformat(since)).total_seconds())
        return max(0.0, left)

    def time_out(self) -> None:
        """The deadline passed unanswered: block the waiting tasks naming the request, and release (then
        block) the tasks they held."""
        timeout = self.session.config.policy.worker_approval_timeout_s
        for record in self.records():
            tasks = [task_id for task_id, waited in self.waiting.items() if waited.id == record.id]
            self.pm.mark_waiting([record.id], waiting=False)
            self.pm.release_from_human(record.id, "timed_out")
            _log.warning("approval_waits.timed_out", approval_id=record.id, tasks=tasks)
            for task_id in tasks:
                del self.waiting[task_id]
                if self.pm.get_task_status(task_id) in TERMINAL_STATUSES:
                    continue
                block_task(
                    self.session,
                    task_id,
                    f"policy: approval_timeout: nobody answered {record.id} (write scope "
                    f"{', '.join(record.scope)}) within policy.worker_approval_timeout_s ({timeout:g} s); "
                    f"answer it (`autodev approve --scope {record.id}`), then `autodev retry {task_id}`",
                )
