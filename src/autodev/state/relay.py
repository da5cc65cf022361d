"""A task's flow on another machine, with the run's ledger still the one source of truth.

A remote worker (``autodev.orchestrator.execute.ray_executor``) runs one task's flow against a
``RelayedPlanManager``: a replica of the run's plan state, seeded from the head when the worker starts.
Reads are answered from the replica. Every change goes to the head as a ``LedgerCall``: the name of the
``PlanManager`` method and its arguments. The head runs that method on the real ``PlanManager``
(``serve_call``), under the ledger lock, so it is checked against the authoritative state, appended,
fsync'd and hash-chained exactly as a local worker's change would be. The reply carries the method's result
and every ledger entry since the replica's last one (other tasks' included), which the replica applies in
order: after each change the replica is the head's state as of that change.

Records the flow does not read back within a step (evidence, patches, delegation decisions, the node,
audit events) do not wait for the head: the replica keeps them, in order, and sends them ahead of its next
change that does (a status change, usage), which the head runs after them under the same lock. A step
then costs the head one round trip per waiting change instead of one per record, and what the ledger holds
is the same, in the same order. A worker that dies between a record and its step's change loses both: the
ledger never recorded the step, so its retry repeats it and records it again.

Nothing a worker does reaches the ledger another way: the replica's own ``_append`` refuses, so a method
this module does not relay fails loudly instead of changing a state nobody else sees.

The transport (a Ray actor today) is the caller's: ``RelayedPlanManager`` takes a function from call to
reply, and ``serve_call`` is a plain function of the head's manager and the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autodev.errors import AutodevError, StateError
from autodev.state.evidence import write_evidence, write_patch
from autodev.state.ledger import LedgerEntry
from autodev.state.plan_manager import EvidenceRef, PlanManager, PlanState
from autodev.state.policy_records import WorkerGrant

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
# Records the flow does not read back before its next change that waits for the head (module doc). A read
# of what they change (evidence, grants, the node) sends them first.
_DEFERRED = frozenset({"record_evidence", "record_patch", "record_decision", "record_node", "record_event"})
# The methods whose first argument is the task they change; the head refuses them for any other task.
_TASK_FIRST = RELAYED_METHODS - {"record_evidence", "record_event", "record_decision", "request_approval"}


class LedgerRelayError(StateError):
    """The head refused or failed a relayed change; the message is the head's."""


@dataclass(frozen=True, slots=True)
class LedgerCall:
    """One change a remote worker asks the head to make: ``method(*args, **kwargs)`` on the run's
    ``PlanManager``, for the worker's task ``task_id``. ``since_seq``: the replica's last ledger entry.
    ``attachment``: transport data the head handles before the call (the task's working state).
    ``before``: the replica's deferred records, which the head runs first, in order, under the same lock."""

    task_id: str
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    since_seq: int
    attachment: bytes | None = None
    before: tuple[LedgerCall, ...] = ()


@dataclass(frozen=True, slots=True)
class LedgerReply:
    """The head's answer: the method's result (a path as repository-relative text), the entries since
    the call's ``since_seq``, and, when a method was refused or raised, ``(method, error class name,
    message)``: the call's own or one of the records it carried (those before it stand, the rest were not
    run)."""

    result: Any
    entries: tuple[LedgerEntry, ...]
    error: tuple[str, str, str] | None = None


def _refusal(call: LedgerCall, carrier: LedgerCall | None = None) -> str | None:
    if carrier is not None and (
        call.task_id != carrier.task_id or call.method not in _DEFERRED or call.before
    ):
        return f"{call.method} cannot travel ahead of {carrier.method}"
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
    """Run the records ``call`` carries, then ``call``, on the head's ``manager`` under its ledger lock;
    the reply the worker's replica applies. A refused or failing method stops the call there: the reply
    shows what the ledger gained up to it."""
    with manager.transaction():
        result: Any = None
        for step in (*call.before, call):
            refused = _refusal(step, call if step is not call else None)
            if refused is not None:
                entries = tuple(manager.entries_since(call.since_seq))
                return LedgerReply(None, entries, (step.method, "LedgerRelayError", refused))
            try:
                result = getattr(manager, step.method)(*step.args, **step.kwargs)
            except AutodevError as exc:
                entries = tuple(manager.entries_since(call.since_seq))
                return LedgerReply(None, entries, (step.method, type(exc).__name__, exc.message))
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
        self._deferred: list[LedgerCall] = []

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
        """How many calls this replica sent to the head (each with the records deferred before it)."""
        return self._replica.relayed

    def close(self) -> None:
        """Nothing to write: the replica's state is the head's."""

    @contextmanager
    def _locked(self, *, sync: bool = True) -> Iterator[None]:
        # The head's lock is taken by the head, around each relayed call; the replica only keeps its own
        # threads apart.
        with self._thread_lock:
            yield

    def _append(self, op: str, payload: dict[str, Any], *, durable: bool = True) -> None:
        raise LedgerRelayError(
            f"a remote worker tried to append {op!r} to its replica; only relayed calls change the run's "
            "state"
        )

    def relay(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Make the change ``method(*args, **kwargs)`` on the head, apply what the head's ledger gained,
        and return the head's result; a deferred record (module doc) waits for the next such change."""
        with self._thread_lock:
            if method in _DEFERRED:
                record = LedgerCall(self.task_id, method, args, dict(kwargs), self._replica.seq)
                refused = _refusal(record)
                if refused is not None:
                    raise LedgerRelayError(f"the run's ledger refuses {method}: {refused}")
                self._deferred.append(record)
                return self._mirror(method, args, kwargs, None)
            attachment = self._attach() if method in _STATUS_CHANGES and self._attach is not None else None
            call = LedgerCall(self.task_id, method, args, dict(kwargs), self._replica.seq, attachment)
            return self._send(call)

    def flush(self) -> None:
        """Send the deferred records now (a read of what they change, the end of the flow)."""
        with self._thread_lock:
            if self._deferred:
                last = self._deferred.pop()
                self._send(replace(last, since_seq=self._replica.seq))

    def _send(self, call: LedgerCall) -> Any:
        call = replace(call, before=tuple(self._deferred))
        # Sent once: a transport failure loses them with the step, as a worker that died would.
        self._deferred.clear()
        reply = self._relay(call)
        self._replica.relayed += 1
        for entry in reply.entries:
            if entry.seq > self._replica.seq:
                self._apply(entry)
                self._replica.seq = entry.seq
        if reply.error is not None:
            method, kind, message = reply.error
            raise LedgerRelayError(f"the run's ledger refused {method} ({kind}): {message}")
        return self._mirror(call.method, call.args, call.kwargs, reply.result)

    # The reads of what deferred records change send them first, so the flow reads its own records back.

    def evidence_for(self, task_id: str) -> list[EvidenceRef]:
        self.flush()
        return super().evidence_for(task_id)

    @property
    def workers(self) -> dict[str, WorkerGrant]:
        self.flush()
        return super().workers

    def node_of(self, task_id: str) -> str | None:
        self.flush()
        return super().node_of(task_id)

    def state_copy(self) -> PlanState:
        self.flush()
        return super().state_copy()

    def _mirror(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any) -> Any:
        """Evidence the head writes is written here too, at the same relative path: the flow reads its
        own earlier evidence back from the working copy's state directory. Without fsync: the head's
        copy is the durable one, and a new worker is seeded with it."""
        if method == "record_evidence":
            return write_evidence(self.paths, args[0], durable=False).path
        if method == "record_patch":
            developer = bool(kwargs.get("developer"))
            return write_patch(self.paths, args[0], args[1], developer=developer, durable=False).path
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
