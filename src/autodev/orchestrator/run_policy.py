"""``RunPolicy``: the delegation policy of a run, decided before every agent call and logged in the ledger.

Each call becomes a typed request (``PolicyInputs``: role, task family, write mode, tier, owned paths, the
scope the user authorized, the write workers under way). ``autodev.policy.decisions.decide`` turns it into
one route; this module records the inputs and the decision together (``delegation_decided``), so a resumed
run counts the same grants and ``autodev policy replay`` can re-decide the log offline.

What a write worker may touch is what the user authorized for the run: the ``Write scope:`` of the intent
or plan file, ``--write-scope``, and the approval requests they accepted. A task's ``Files`` (its owned
paths; the whole repository when it names none) must lie inside that scope before its developer starts,
and every change a writer makes is checked against it afterwards (``outside_scope``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.sandbox import compatible_platforms, needed_mode
from autodev.agents.spec import AgentSpec
from autodev.config import load_config
from autodev.config.schema import PolicySettings
from autodev.errors import AutodevError, ConfigError
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.logging import get_logger
from autodev.policy.decisions import ActiveWorker, Decision, PolicyInputs, Tier, WriteMode, decide
from autodev.policy.replay import LoggedDecision, ReplayReport, replay
from autodev.policy.router import RouteRecord
from autodev.policy.scope import (
    WHOLE_REPOSITORY,
    ScopeError,
    WriteScope,
    ground_scope,
    normalize_pattern,
    outside,
    parse_scope_list,
    parse_write_scope,
)
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.policy_records import ApprovalRecord, ScopeDeclaration, ScopeSource, WorkerGrant
from autodev.state.schemas import Task

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from autodev.orchestrator.delegation_policy import DelegationRequest
    from autodev.orchestrator.run_router import RunRouter

__all__ = ["DelegationRejectedError", "RunPolicy", "approval_wait_message", "declared_scope", "replay_log"]

_log = get_logger("autodev.run_policy")


class DelegationRejectedError(AutodevError):
    """The policy will never let this call run as asked: its task is blocked with the reason."""

    exit_code = 1


def declared_scope(text: str, repo_root: Path, source: ScopeSource) -> ScopeDeclaration | None:
    """The write scope the user's ``text`` declares, grounded in the tree at ``repo_root``: the
    ``Write scope:`` lines of an intent or plan file, or (``command_line``) the whole text as one list.
    None when an intent or plan file declares none; ``ScopeError`` for a scope that cannot be used."""
    if source == "command_line":
        patterns: tuple[str, ...] | None = tuple(parse_scope_list(text))
        if not patterns:
            raise ScopeError(
                "--write-scope names no path; give repository-relative paths, e.g. 'src/**, tests/**'"
            )
    else:
        parsed = parse_write_scope(text)
        patterns = parsed.patterns if parsed is not None else None
    if patterns is None:
        return None
    grounded = ground_scope(repo_root, patterns)
    return ScopeDeclaration(source=source, patterns=list(grounded.patterns))


def replay_log(repo_root: Path, candidate: Path | None = None) -> ReplayReport:
    """``autodev policy replay``: the repository's decision log re-decided under ``candidate`` (a JSON
    object of ``[policy]`` settings) or the configured settings. Reads the ledger without its lock."""
    if candidate is not None:
        try:
            settings = PolicySettings.model_validate_json(
                read_bounded_text(
                    candidate,
                    limit=MAX_INPUT_FILE_BYTES,
                    what="the candidate policy",
                    follow_symlinks=True,
                    error=led_by(candidate, ConfigError),
                )
            )
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "the object"
            raise ConfigError(
                f"{candidate}: {where}: {problem['msg']}; give a JSON object of [policy] settings"
            ) from exc
        except OSError as exc:
            raise ConfigError(f"{candidate} cannot be read ({exc.strerror or exc})") from exc
    else:
        settings = load_config(repo_root).policy
    paths = AutodevPaths(repo_root)
    ledger = Ledger(paths.ledger, readonly=True)
    if not paths.ledger.exists():
        return replay((), settings)
    ledger.open(repair=False)
    try:
        records = (
            LoggedDecision(seq=entry.seq, op=entry.op, payload=entry.payload)
            for entry in ledger.entries()
            if entry.op in ("delegation_decided", "usage_recorded")
        )
        return replay(records, settings)
    finally:
        ledger.close()


def _compact(route: RouteRecord) -> dict[str, Any]:
    """``route`` as its ledger entry holds it: defaults left out (a candidate's unset model and exclusion),
    the version always in."""
    return {"version": route.version, **route.model_dump(mode="json", exclude_defaults=True)}


def approval_wait_message(approvals: Sequence[ApprovalRecord]) -> str:
    """The one line a run that waits for approvals ends with."""
    listed = "; ".join(
        f"{record.id}: {', '.join(record.scope)} (for {', '.join(record.task_ids)})" for record in approvals
    )
    first = approvals[0].id
    return (
        f"waiting for approval of a write scope no declaration covers: {listed}; "
        f"`autodev approve --scope {first}` (or `autodev decline {first}`), then `autodev resume`"
    )


class RunPolicy:
    """The delegation policy of one run over ``plan_manager``'s ledger (see the module docstring)."""

    def __init__(
        self,
        plan_manager: PlanManager,
        settings: PolicySettings,
        registry: Mapping[str, AgentSpec],
        repo_root: Path,
        family_of: Callable[[Task], str] | None = None,
        *,
        resumes_sessions: bool = False,
        harness_for: Callable[[str], PlatformAdapter] | None = None,
        router: RunRouter | None = None,
    ) -> None:
        self.pm = plan_manager
        self.settings = settings
        self.registry = registry
        self.repo_root = repo_root
        self._family_of = family_of or (lambda task: "repository")
        # Whether the run's platform can continue an earlier session (``PlatformAdapter.resumes_sessions``).
        self.resumes_sessions = resumes_sessions
        # The platform a role's calls go to, whose sandbox modes the decision checks (None: not checked).
        self._harness_for = harness_for
        # The learning router (``router.mode`` not off): a route record with every decision of a call.
        self.router = router
        # The platform and tier an autonomous route gave a call, by request key, for ``delegate``.
        self._routes: dict[str, tuple[str, Tier]] = {}
        self._released = anyio.Event()
        self._last_queued: dict[str, str] = {}
        # When each queued request started waiting (monotonic) and the seconds its task had been held then.
        self._queued_since: dict[str, tuple[float, float]] = {}

    # --- what the user authorized -------------------------------------------------------------------

    def authorized(self) -> WriteScope:
        """The run's write scope: every declaration, and every approval the user accepted."""
        scope = WriteScope(())
        for declaration in self.pm.write_scopes:
            scope = scope.union(declaration.patterns)
        for approval in self.pm.approvals:
            if approval.status == "accepted":
                scope = scope.union(approval.scope)
        return scope

    @staticmethod
    def owned_paths(task: Task) -> tuple[str, ...]:
        """What ``task`` claims to write: its files, or the whole repository when it names none."""
        if not task.files:
            return (WHOLE_REPOSITORY,)
        return tuple(dict.fromkeys(normalize_pattern(path) for path in task.files))

    def outside_scope(self, paths: Iterable[str]) -> list[str]:
        """The changed ``paths`` no authorized scope covers (a writer's change outside its lease)."""
        return outside(self.authorized(), paths)

    # --- before the execute phase -------------------------------------------------------------------

    def awaiting_approval(self, tasks: Iterable[Task]) -> dict[str, ApprovalRecord]:
        """For the not yet started ``tasks`` whose owned paths are not authorized: one approval request
        for everything they need together (so the user answers once), or, for paths a declined request
        holds, that request. ``{task id: its request}`` for the tasks that must wait or be blocked."""
        scope = self.authorized()
        declined = [record for record in self.pm.approvals if record.status == "declined"]
        waiting: dict[str, ApprovalRecord] = {}
        needed: dict[str, list[str]] = {}
        for task in tasks:
            if task.status != "pending":
                continue
            uncovered = scope.uncovered(self.owned_paths(task))
            if not uncovered:
                continue
            refused = next((r for r in declined if set(uncovered) & set(r.scope)), None)
            if refused is not None:
                waiting[task.id] = refused
            else:
                needed[task.id] = uncovered
        if needed:
            union = list(dict.fromkeys(path for paths in needed.values() for path in paths))
            record = self._request(union, list(needed))
            if record.status != "accepted":
                waiting.update(dict.fromkeys(needed, record))
        return waiting

    def _request(self, uncovered: Sequence[str], task_ids: Sequence[str]) -> ApprovalRecord:
        return self.pm.request_approval(
            uncovered,
            task_ids,
            "owned_path_provenance_required",
            "no write scope the user declared covers these paths; accept to authorize exactly them",
        )

    # --- before every agent call --------------------------------------------------------------------

    def inputs(self, request: DelegationRequest) -> PolicyInputs:
        """The recorded inputs of the decision for ``request``."""
        spec = self.registry.get(request.role)
        task = self._task(request)
        writes = spec is not None and spec.can_write and task is not None
        mode: WriteMode = "read_only"
        if writes:
            isolated = request.cwd is not None and Path(request.cwd) != self.repo_root
            mode = "isolated" if isolated else "shared"
        declined = tuple(tuple(a.scope) for a in self.pm.approvals if a.status == "declined")
        workers = self.pm.workers
        return PolicyInputs(
            role=request.role,
            task_id=request.task_id,
            family=f"{request.role}:{self._family_of(task) if task is not None else 'plan'}",
            write_mode=mode,
            tier=self.pm.task_tier(task.id) if task is not None else "standard",
            owned_paths=self.owned_paths(task) if writes and task is not None else (),
            authorized_scope=self.authorized().patterns if writes else (),
            declined_scopes=declined if writes else (),
            holds_grant=task is not None and task.id in workers,
            active_workers=self._active_workers(),
            retry_count=request.retry_count,
            previous_outcome=task.status if task is not None else None,
            warm_session=request.warm_session if self.resumes_sessions else None,
            **self._harness(request.role, mode),
        )

    def _harness(self, role: str, mode: WriteMode) -> dict[str, Any]:
        """The harness inputs of a decision for ``role``: its platform, the sandbox modes that platform
        can start in, and the agent platforms that could start the call instead."""
        if self._harness_for is None:
            return {}
        adapter = self._harness_for(role)
        return {
            "harness": adapter.name,
            "harness_modes": tuple(sorted(adapter.sandbox.modes)),
            "compatible_harnesses": compatible_platforms(needed_mode(mode != "read_only")),
        }

    def _task(self, request: DelegationRequest) -> Task | None:
        if request.phase != "execute" or self.pm.get_task_status(request.task_id) is None:
            return None
        return self.pm.get_task(request.task_id)

    def decide(self, request: DelegationRequest) -> Decision:
        """Decide ``request`` and log the decision with its inputs; a ``spawn`` takes its grant."""
        key = f"{request.task_id}:{request.role}"
        inputs = self.inputs(request).model_copy(update={"queued_s": self._queued_for(key, request.task_id)})
        route = None
        if self.router is not None:
            route = self.router.route(request, inputs, self._task(request))
            inputs = self._routed(key, inputs, route)
        return self._decided(key, inputs, decide(inputs, self.settings), route)

    def _routed(self, key: str, inputs: PolicyInputs, route: RouteRecord) -> PolicyInputs:
        """``inputs`` for the route the call was given: an autonomous route other than the baseline is
        decided by the policy on its own platform and tier (a writer's grant is the tier it runs at)."""
        given, baseline = route.candidates[route.executed], route.candidates[route.baseline]
        if route.executed == route.baseline:
            self._routes.pop(key, None)
            return inputs
        self._routes[key] = (given.platform, given.tier)
        update: dict[str, Any] = {}
        if given.platform != baseline.platform and self.router is not None:
            adapter = self.router.adapter(given.platform)
            update |= {
                "harness": adapter.name,
                "harness_modes": tuple(sorted(adapter.sandbox.modes)),
                "warm_session": None,
            }
        if inputs.write_mode != "read_only":
            update["tier"] = given.tier
        return inputs.model_copy(update=update)

    def given_route(self, request: DelegationRequest) -> tuple[str, Tier] | None:
        """The platform and tier an autonomous route gave ``request`` other than its usual ones (None: the
        usual ones)."""
        return self._routes.get(f"{request.task_id}:{request.role}")

    def decide_retry(self, task: Task) -> Decision:
        """Whether ``task``, its attempts used up, gets the run's automatic retry one tier higher (a
        ``spawn`` with ``escalate_to``; its grant moves to that tier), logged like every decision."""
        workers = self.pm.workers
        held = workers.get(task.id)
        mode: WriteMode = held.write_mode if held is not None else ("isolated" if task.worktree else "shared")
        inputs = PolicyInputs(
            role="developer",
            task_id=task.id,
            family=f"developer:{self._family_of(task)}",
            write_mode=mode,
            tier=self.pm.task_tier(task.id),
            owned_paths=self.owned_paths(task),
            authorized_scope=self.authorized().patterns,
            declined_scopes=tuple(tuple(a.scope) for a in self.pm.approvals if a.status == "declined"),
            holds_grant=held is not None,
            active_workers=self._active_workers(),
            retry_count=task.retry_count,
            previous_outcome=task.status,
            retries_exhausted=True,
            automatic_retries_used=self.pm.automatic_retries_used,
            queued_s=self._queued_for(f"{task.id}:retry", task.id),
            **self._harness("developer", mode),
        )
        return self._decided(f"{task.id}:retry", inputs, decide(inputs, self.settings))

    def _queued_for(self, key: str, task_id: str) -> float:
        """Seconds the request ``key`` has waited in the queue in this run, time its task was held for an
        approval not counted (a new run starts its wait afresh)."""
        start = self._queued_since.get(key)
        if start is None:
            return 0.0
        since, held = start
        held_meanwhile = self.pm.human_blocked_seconds(task_id) - held
        return round(max(0.0, time.monotonic() - since - held_meanwhile), 3)

    def _active_workers(self) -> tuple[ActiveWorker, ...]:
        return tuple(
            ActiveWorker(
                task_id=grant.task_id,
                tier=grant.tier,
                write_mode=grant.write_mode,
                owned_paths=tuple(grant.owned_paths),
            )
            for grant in self.pm.workers.values()
        )

    def _decided(
        self, key: str, inputs: PolicyInputs, decision: Decision, route: RouteRecord | None = None
    ) -> Decision:
        if decision.route != "queue":
            self._queued_since.pop(key, None)
        elif key not in self._queued_since:
            self._queued_since[key] = (time.monotonic(), self.pm.human_blocked_seconds(inputs.task_id))
        if decision.route == "queue" and self._last_queued.get(key) == decision.reason:
            return decision  # the same wait as last time: logged once
        self._last_queued.pop(key, None)
        if decision.route == "queue":
            self._last_queued[key] = decision.reason
        grant = None
        if decision.route == "spawn" and inputs.write_mode != "read_only":
            grant = WorkerGrant(
                task_id=inputs.task_id,
                tier=decision.escalate_to or inputs.tier,
                write_mode="isolated" if inputs.write_mode == "isolated" else "shared",
                owned_paths=list(inputs.owned_paths),
                units=decision.units,
            )
        self.pm.record_decision(
            inputs.model_dump(mode="json"),
            decision.model_dump(mode="json", exclude_defaults=False),
            grant,
            route=None if route is None else _compact(route),
        )
        if decision.route != "execute":
            _log.info(
                "policy.decided",
                task_id=inputs.task_id,
                role=inputs.role,
                route=decision.route,
                reason=decision.reason,
            )
        return decision

    def request_for(self, request: DelegationRequest, decision: Decision) -> ApprovalRecord:
        """The approval request a ``require_approval`` decision stands for (recorded once per scope)."""
        return self._request(decision.uncovered, [request.task_id])

    # --- waiting for a worker to finish -------------------------------------------------------------

    def released(self) -> None:
        """A worker finished (its task is terminal, or went back to pending): queued requests try again."""
        event, self._released = self._released, anyio.Event()
        event.set()

    async def wait_for_release(self, timeout_s: float = 1.0) -> None:
        """Until a worker finishes, or ``timeout_s`` (a grant released by another process is seen then)."""
        with anyio.move_on_after(timeout_s):
            await self._released.wait()
