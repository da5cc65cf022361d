"""A task's flow on another machine, with the run's ledger still the one source of truth.

A remote worker (``autodev.orchestrator.execute.ray_executor``) runs one task's flow against a
``RelayedPlanManager``: a replica of the run's plan state, seeded from the head when the worker starts.
Reads are answered from the replica. Every change goes to the head as a ``LedgerCall``: the name of the
``PlanManager`` method and its arguments. The head runs that method on the real ``PlanManager``
(``serve_call``), under the ledger lock, so it is checked against the authoritative state, appended,
fsync'd and hash-chained exactly as a local worker's change would be. The reply carries the method's result
and every ledger entry since the replica's last one (other tasks' included), which the replica applies in
order: after each change the replica is the head's state as of that change.

Nothing a worker does reaches the ledger another way: the replica's own ``_append`` refuses, so a method
this module does not relay fails loudly instead of changing a state nobody else sees.

The transport (a Ray actor today) is the caller's: ``RelayedPlanManager`` takes a function from call to
reply, and ``serve_call`` is a plain function of the head's manager and the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autodev.errors import AutodevError, StateError
from autodev.state.evidence import write_evidence, write_patch
from autodev.state.ledger import LedgerEntry
from autodev.state.plan_manager import PlanManager, PlanState

__all__ = [
    "RELAYED_METHODS",
    "LedgerCall",
    "LedgerRelayError",
    "LedgerReply",
    "RelayedPlanManager",
    "serve_call",
]

# The ``PlanManager`` methods a task's flow changes state with. Plan-wide ones (a new plan, approvals
# given, phase checkpoints, slicing, skipping, adoption) stay with the head, which runs them itself.
RELAYED_METHODS = frozenset(
    {
        "update_task_status",
        "mark_task_retry",
        "mark_escalated",
        "set_task_model",
        "mark_blocked_descendants",
        "grant_automatic_retry",
        "record_evidence",
        "record_patch",
        "record_cost",
        "record_usage",
        "record_event",
        "record_decision",
        "request_approval",
        "record_node",
    }
)
# The changes that move the task to another step: each carries the task's working state, when it changed,
# so the files of every step the ledger records are the head's too.
_STATUS_CHANGES = frozenset(
    {
        "update_task_status",
        "mark_task_retry",
        "mark_escalated",
        "mark_blocked_descendants",
        "grant_automatic_retry",
    }
)
# The methods whose first argument is the task they change; the head refuses them for any other task.
_TASK_FIRST = RELAYED_METHODS - {"record_evidence", "record_event", "record_decision", "request_approval"}


class LedgerRelayError(StateError):
    """The head refused or failed a relayed change; the message is the head's."""


@dataclass(frozen=True, slots=True)
class LedgerCall:
    """One change a remote worker asks the head to make: ``method(*args, **kwargs)`` on the run's
    ``PlanManager``, for the worker's task ``task_id``. ``since_seq``: the replica's last ledger entry.
    ``attachment``: transport data the head handles before the call (the task's working state)."""

    task_id: str
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    since_seq: int
    attachment: bytes | None = None


@dataclass(frozen=True, slots=True)
class LedgerReply:
    """The head's answer: the method's result (a path as repository-relative text), the entries since
    the call's ``since_seq``, and the error's class name and message when the method raised."""

    result: Any
    entries: tuple[LedgerEntry, ...]
    error: tuple[str, str] | None = None


def _refusal(call: LedgerCall) -> str | None:
    if call.method not in RELAYED_METHODS:
        return f"{call.method} is not a change a task's flow may relay"
    if call.method in _TASK_FIRST and (not call.args or call.args[0] != call.task_id):
        return f"{call.method} for another task than {call.task_id}"
    if call.method == "record_evidence":
        evidence = call.args[0] if call.args else None
        if getattr(evidence, "task_id", None) != call.task_id:
            return f"record_evidence without evidence of task {call.task_id}"
    return None


def serve_call(manager: PlanManager, call: LedgerCall) -> LedgerReply:
    """Run ``call`` on the head's ``manager`` under its ledger lock; the reply the worker's replica
    applies. A refused or failing call changes nothing the reply does not show."""
    refused = _refusal(call)
    if refused is not None:
        return LedgerReply(None, tuple(manager.entries_since(call.since_seq)), ("LedgerRelayError", refused))
    with manager.transaction():
        try:
            result = getattr(manager, call.method)(*call.args, **call.kwargs)
        except AutodevError as exc:
            return LedgerReply(
                None, tuple(manager.entries_since(call.since_seq)), (type(exc).__name__, exc.message)
            )
        if isinstance(result, Path):
            result = manager.paths.relative(result)
        return LedgerReply(result, tuple(manager.entries_since(call.since_seq)))


Relay = Callable[[LedgerCall], LedgerReply]


@dataclass(slots=True)
class _ReplicaPosition:
    seq: int = 0
    relayed: int = 0


class RelayedPlanManager(PlanManager):
    """The plan state on a remote worker: reads from a replica, changes through the head (module doc).

    ``attach`` is asked before each relayed status change for the task's working state to send along
    (None: unchanged since the last one sent), so the head holds the files of every step it recorded.
    """

    def __init__(
        self,
        repo_root: Path,
        task_id: str,
        relay: Relay,
        *,
        attach: Callable[[], bytes | None] | None = None,
    ) -> None:
        super().__init__(repo_root, use_snapshot=False)
        self.task_id = task_id
        self._relay = relay
        self._attach = attach
        self._replica = _ReplicaPosition()

    def seed(self, state: PlanState, seq: int) -> None:
        """Start the replica from the head's state as of its ledger entry ``seq``."""
        with self._thread_lock:
            self._state = state
            self._reindex()
            self._replica.seq = seq
            self._loaded = True

    @property
    def replica_seq(self) -> int:
        """The head's last ledger entry the replica has applied."""
        return self._replica.seq

    @property
    def relayed_calls(self) -> int:
        """How many changes this replica sent to the head."""
        return self._replica.relayed

    def close(self) -> None:
        """Nothing to write: the replica's state is the head's."""

    @contextmanager
    def _locked(self, *, sync: bool = True) -> Iterator[None]:
        # The head's lock is taken by the head, around each relayed call; the replica only keeps its own
        # threads apart.
        with self._thread_lock:
            yield

    def _append(self, op: str, payload: dict[str, Any]) -> None:
        raise LedgerRelayError(
            f"a remote worker tried to append {op!r} to its replica; only relayed calls change the run's "
            "state"
        )

    def relay(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Make the change ``method(*args, **kwargs)`` on the head, apply what the head's ledger gained,
        and return the head's result."""
        with self._thread_lock:
            attachment = self._attach() if method in _STATUS_CHANGES and self._attach is not None else None
            call = LedgerCall(self.task_id, method, args, dict(kwargs), self._replica.seq, attachment)
            reply = self._relay(call)
            self._replica.relayed += 1
            for entry in reply.entries:
                if entry.seq > self._replica.seq:
                    self._apply(entry)
                    self._replica.seq = entry.seq
            if reply.error is not None:
                kind, message = reply.error
                raise LedgerRelayError(f"the run's ledger refused {method} ({kind}): {message}")
            return self._mirror(method, args, kwargs, reply.result)

    def _mirror(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any) -> Any:
        """Evidence the head wrote is written here too, at the same relative path: the flow reads its
        own earlier evidence back from the working copy's state directory."""
        if method == "record_evidence":
            return write_evidence(self.paths, args[0]).path
        if method == "record_patch":
            return write_patch(self.paths, args[0], args[1], developer=bool(kwargs.get("developer"))).path
        return result


def _relayed(name: str) -> Callable[..., Any]:
    def method(self: RelayedPlanManager, *args: Any, **kwargs: Any) -> Any:
        return self.relay(name, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"``PlanManager.{name}``, made on the head (``RelayedPlanManager.relay``)."
    return method


# Each relayed method replaces the local one on the replica: generated, so the list above is the only
# place that says which methods go to the head.
for _name in RELAYED_METHODS:
    setattr(RelayedPlanManager, _name, _relayed(_name))
