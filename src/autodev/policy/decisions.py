"""The delegation decision: one pure function from recorded inputs to a route, a reason and a remedy.

``decide(inputs, config)`` looks only at ``PolicyInputs`` (a snapshot the caller records with the
decision) and ``PolicySettings``; it reads no clock, no file and no process, so the same snapshot always gets
the same decision and ``autodev policy replay`` can re-decide a whole run offline.

Routes:

- ``execute``: a read-only call, or a call of a worker that already holds its grant (the reviewer and test
  engineer of a task whose developer was granted);
- ``resume_worker``: a worker holding its grant whose earlier session the platform can continue (the
  developer of a later attempt, on a platform that resumes sessions);
- ``spawn``: a new write worker, within the run's budget; it holds the grant until its task finishes;
- ``queue``: a write worker that must wait (a budget or a lease is taken); it is decided again once a
  worker finishes;
- ``require_approval``: the worker would write where the user has not authorized;
- ``reject``: it can never run as asked (its scope was declined, it needs more than the whole budget).

A harness that cannot start in the sandbox mode a call needs (``autodev.adapters.sandbox``) is rejected
before anything else (``permission_ceiling``), naming the platforms that could.

A request that waited in the queue for ``queue_ttl_s`` (when set; time held for an approval not counted) is
rejected instead of queued again (``queue_expired``).

A task that used up its attempts (``retries_exhausted``) asks for the run's automatic retry: one more
attempt at the next higher tier, as a new worker (``spawn``, reason ``automatic_retry``, ``escalate_to``),
within ``automatic_retries`` per run; a strong task's failure is terminal (``escalation_terminal``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autodev.adapters.sandbox import SandboxDescriptor, SandboxMode, needed_mode
from autodev.config.schema import CapabilityTier, PolicySettings
from autodev.policy.scope import WriteScope, covers

__all__ = [
    "POLICY_VERSION",
    "ActiveWorker",
    "Decision",
    "PolicyInputs",
    "Route",
    "Tier",
    "WriteMode",
    "decide",
]

# Bumped whenever ``PolicyInputs`` changes meaning; replay refuses snapshots of a version it does not know.
POLICY_VERSION = 1

Route = Literal["execute", "resume_worker", "spawn", "queue", "reject", "require_approval"]
WriteMode = Literal["read_only", "shared", "isolated"]
Tier = CapabilityTier
_TIER_ORDER: tuple[Tier, ...] = ("fast", "standard", "strong")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ActiveWorker(_Frozen):
    """A write worker that holds a grant: its task, tier, mode and owned paths."""

    task_id: str
    tier: Tier
    write_mode: WriteMode
    owned_paths: tuple[str, ...] = ()


class PolicyInputs(_Frozen):
    """Every input of one decision, as recorded with it (``version`` says how to read it)."""

    version: int = POLICY_VERSION
    role: str
    task_id: str
    family: str = Field(description="Task family: the role and the area of the task's files.")
    write_mode: WriteMode
    tier: Tier
    previous_tier: Tier | None = None
    owned_paths: tuple[str, ...] = ()
    authorized_scope: tuple[str, ...] = ()
    declined_scopes: tuple[tuple[str, ...], ...] = ()
    holds_grant: bool = False
    active_workers: tuple[ActiveWorker, ...] = ()
    retry_count: int = 0
    previous_outcome: str | None = None
    # The worker's earlier session the platform could continue (an earlier attempt's developer), if any.
    warm_session: str | None = None
    # The harness the call would run on, the sandbox modes it can start in (None in snapshots from before
    # they were recorded: not checked) and the platforms that could start it instead.
    harness: str = ""
    harness_modes: tuple[SandboxMode, ...] | None = None
    compatible_harnesses: tuple[str, ...] = ()
    # Seconds the request has waited in the queue so far, time held for an approval not counted.
    queued_s: float = 0.0
    # The task used up its attempts and asks for an automatic retry; how many the run has granted so far.
    retries_exhausted: bool = False
    automatic_retries_used: int = 0


class Decision(_Frozen):
    """One route with its machine-readable reason and a sentence saying what would change it."""

    route: Route
    reason: str
    remediation: str = ""
    units: int = 0
    uncovered: tuple[str, ...] = ()
    resume_session: str | None = None
    # The tier an automatic retry runs at (always strictly above the task's).
    escalate_to: Tier | None = None


def _overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    # Two claims overlap when either could name a path of the other (conservative: a shared writer whose
    # claim cannot be told apart from another's waits).
    return any(covers(x, y) or covers(y, x) for x in a for y in b)


def decide(inputs: PolicyInputs, config: PolicySettings) -> Decision:
    """The route for ``inputs`` under ``config``; see the module docstring."""
    decision = _route(inputs, config)
    ttl = config.queue_ttl_s
    if decision.route == "queue" and ttl is not None and inputs.queued_s >= ttl:
        return Decision(
            route="reject",
            reason="queue_expired",
            remediation=f"the {inputs.role.replace('_', ' ')} waited {inputs.queued_s:.0f} s in the queue "
            f"({decision.reason}), past policy.queue_ttl_s ({ttl:g} s); raise the limit it waits for or the "
            f"time to live, then `autodev retry {inputs.task_id}`",
        )
    return decision


def _route(inputs: PolicyInputs, config: PolicySettings) -> Decision:
    ceiling = _permission_ceiling(inputs)
    if ceiling is not None:
        return ceiling
    if inputs.retries_exhausted:
        return _automatic_retry(inputs, config)
    if inputs.write_mode == "read_only":
        return Decision(route="execute", reason="read_only")
    if inputs.previous_tier is not None and _TIER_ORDER.index(inputs.tier) < _TIER_ORDER.index(
        inputs.previous_tier
    ):
        return Decision(
            route="reject",
            reason="tier_downgrade",
            remediation=f"a task's tier only rises: run it at {inputs.previous_tier} or above",
        )
    scope = WriteScope(inputs.authorized_scope)
    uncovered = tuple(scope.uncovered(inputs.owned_paths))
    if uncovered:
        for declined in inputs.declined_scopes:
            if set(uncovered) <= set(declined):
                return Decision(
                    route="reject",
                    reason="approval_declined",
                    remediation="the user declined this write scope; declare a scope that covers it "
                    "(`Write scope:` or --write-scope) or change the task's files",
                    uncovered=uncovered,
                )
        return Decision(
            route="require_approval",
            reason="owned_path_provenance_required",
            remediation="no write scope the user declared covers "
            f"{', '.join(uncovered)}; approve it (`autodev approvals`, `autodev approve --scope ID`) or "
            "declare it (`Write scope:` in the intent, or `autodev execute --write-scope`)",
            uncovered=uncovered,
        )
    units = config.units(inputs.tier)
    if inputs.holds_grant:
        if inputs.warm_session is not None:
            return Decision(
                route="resume_worker",
                reason="compatible_warm_worker",
                units=units,
                resume_session=inputs.warm_session,
            )
        return Decision(route="execute", reason="worker_holds_grant", units=units)
    if units > config.capability_units or (inputs.tier == "strong" and config.max_strong_workers == 0):
        return Decision(
            route="reject",
            reason="budget_exhausted",
            remediation=f"one {inputs.tier} worker needs more than the run's whole budget; raise "
            "policy.capability_units or policy.max_strong_workers, or lower the task's Model",
            units=units,
        )
    others = [worker for worker in inputs.active_workers if worker.task_id != inputs.task_id]
    if inputs.write_mode == "shared":
        for worker in others:
            if worker.write_mode == "shared" and _overlap(worker.owned_paths, inputs.owned_paths):
                return Decision(
                    route="queue",
                    reason="lease_conflict",
                    remediation=f"waits for {worker.task_id}, which owns overlapping paths",
                    units=units,
                )
    if len(others) >= config.max_workers:
        return Decision(
            route="queue",
            reason="worker_limit",
            remediation=f"waits for one of the {len(others)} workers under way (policy.max_workers)",
            units=units,
        )
    if inputs.tier == "strong" and sum(w.tier == "strong" for w in others) >= config.max_strong_workers:
        return Decision(
            route="queue",
            reason="strong_worker_limit",
            remediation="waits for the strong worker under way (policy.max_strong_workers)",
            units=units,
        )
    held = sum(config.units(worker.tier) for worker in others)
    if held + units > config.capability_units:
        return Decision(
            route="queue",
            reason="budget_exhausted",
            remediation=f"waits until the {held} capability units held leave room for {units} "
            "(policy.capability_units)",
            units=units,
        )
    return Decision(route="spawn", reason="within_budget", units=units)


def _permission_ceiling(inputs: PolicyInputs) -> Decision | None:
    """A rejection when the call's harness cannot start in the sandbox mode the call needs: decided
    before anything else, so such a route never reserves a worker or asks for an approval."""
    if inputs.harness_modes is None:
        return None
    needed = needed_mode(inputs.write_mode != "read_only")
    harness = SandboxDescriptor(frozenset(inputs.harness_modes), "", "")
    if harness.can_start(needed):
        return None
    others = [name for name in inputs.compatible_harnesses if name != inputs.harness]
    instead = f"run it on {', '.join(others)}" if others else "no installed platform can"
    return Decision(
        route="reject",
        reason="permission_ceiling",
        remediation=f"{inputs.harness} cannot start the {inputs.role.replace('_', ' ')} in a "
        f"{needed.replace('_', '-')} sandbox; {instead} (read_only_platform, or --platform)",
    )


def _automatic_retry(inputs: PolicyInputs, config: PolicySettings) -> Decision:
    """Whether a task that used up its attempts gets one more, as a new worker one tier higher."""
    rank = _TIER_ORDER.index(inputs.tier)
    if rank == len(_TIER_ORDER) - 1:
        return Decision(
            route="reject",
            reason="escalation_terminal",
            remediation="the task failed at the strong tier, the highest; change the task or its plan, "
            "then `autodev retry`",
        )
    if inputs.automatic_retries_used >= config.automatic_retries:
        return Decision(
            route="reject",
            reason="retry_budget_exhausted",
            remediation=f"the run's {config.automatic_retries} automatic retr"
            f"{'y was' if config.automatic_retries == 1 else 'ies were'} used (policy.automatic_retries); "
            "`autodev retry` the task",
        )
    higher = _TIER_ORDER[rank + 1]
    retried = decide(
        inputs.model_copy(
            update={
                "retries_exhausted": False,
                "tier": higher,
                "previous_tier": inputs.tier,
                "holds_grant": False,
                "warm_session": None,
            }
        ),
        config,
    )
    if retried.route == "spawn":
        return retried.model_copy(update={"reason": "automatic_retry", "escalate_to": higher})
    return retried.model_copy(update={"escalate_to": higher})
