"""``Orchestrator``: the public facade that wires configuration, an adapter and the state into the two FSMs.

``plan(intent)`` runs the plan phase, ``execute(task_id=None)`` the execute phase, ``run(intent)`` both,
``resume()`` continues after an inline suspend, a crash, an approval or a budget stop, and ``status()``
returns the status object. Each of the mutating methods holds the run lock for its whole duration, so a
second run in the same repository is refused at once.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.detect import detect_platform
from autodev.adapters.inline import InlineAdapter
from autodev.adapters.registry import create_adapter
from autodev.agents.registry import build_registry
from autodev.agents.spec import AgentSpec
from autodev.config import PLATFORMS, AutodevConfig, load_config
from autodev.config.schema import Platform
from autodev.errors import EXIT_SUSPENDED, AutodevError, StateError
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.guardrails import GuardrailEnforcer, LoopDetector
from autodev.logging import configure_logging, get_logger
from autodev.orchestrator.checkout import check_head, require_clean_tree, require_repository
from autodev.orchestrator.checks import ChangeChecks
from autodev.orchestrator.events import ProgressEvent, ProgressListener
from autodev.orchestrator.execute_phase import MID_FLIGHT, run_execute_phase
from autodev.orchestrator.git import GitRepo
from autodev.orchestrator.impl_tournament_runner import prune_stale_worktrees, run_impl_tournament
from autodev.orchestrator.inline_state import clear_suspend_state, load_suspend_state
from autodev.orchestrator.integrity import AgentWatch
from autodev.orchestrator.parallelism import resolve_parallelism
from autodev.orchestrator.plan_phase import run_plan_phase
from autodev.orchestrator.plan_tournament_runner import run_plan_tournament
from autodev.orchestrator.preflight import Preflight, run_preflight
from autodev.orchestrator.workspace import BLOCKED_REF_PREFIX, TASK_REF_PREFIX, TaskWorkspace, commit_message
from autodev.orchestrator.worktree import WorktreeManager
from autodev.orchestrator.worktree_setup import WorktreePreparer
from autodev.qa.environment import EnvironmentResolution, resolve_environment
from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths, ensure_state_dir
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Plan, Task
from autodev.state.session_lock import SessionLock
from autodev.state.status import read_status

__all__ = ["Orchestrator", "ResponseMissingError", "RunOutcome"]

_log = get_logger("autodev.orchestrator")


def _remove_dead_temp_files(state_dir: Path) -> None:
    """Delete ``.<name>.<pid>.tmp`` files of atomic writes whose writer died before renaming them, and the
    ``.<name>.<pid>.prev`` links kept while an evidence file was being replaced and recorded."""
    for pattern in (".*.tmp", ".*.prev"):
        for temp in state_dir.rglob(pattern):
            pid = temp.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                temp.unlink(missing_ok=True)


def _log_like_the_cli(paths: AutodevPaths) -> None:
    """A script driving the ``Orchestrator`` gets the CLI's log file, unless it configured logging itself."""
    import structlog

    if not structlog.is_configured():
        configure_logging(paths.log_file, level=os.environ.get("AUTODEV_LOG_LEVEL"))


class ResponseMissingError(AutodevError):
    """``autodev resume`` after an inline suspend, but the agent has not written its answer yet."""

    exit_code = EXIT_SUSPENDED


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What ``run`` did: the plan, the tasks it processed, and whether it stopped for plan approval."""

    plan: Plan
    tasks: list[Task]
    awaiting_approval: bool = False


class Orchestrator:
    """Drive one repository from an intent to reviewed, tested, committed changes.

    ``adapter`` defaults to the configured platform (``auto``: the first agent CLI on PATH, else inline).
    ``listener`` receives ``ProgressEvent``s for a live display; the orchestrator itself never prints.
    """

    def __init__(
        self,
        repo_root: Path,
        *,
        config: AutodevConfig | None = None,
        adapter: PlatformAdapter | None = None,
        registry: Mapping[str, AgentSpec] | None = None,
        session_id: str | None = None,
        listener: ProgressListener | None = None,
        disable_impl_tournament: bool = False,
    ) -> None:
        self.repo_root = Path(repo_root).resolve()
        self.paths = AutodevPaths(self.repo_root)
        self.config = config if config is not None else load_config(self.repo_root)
        if adapter is None:
            preference = self.config.platform
            if preference == "auto" and self.paths.inline_state.exists():
                # A run suspended on an inline delegation continues inline: its answer waits in responses/,
                # and an agent CLI found on PATH meanwhile must not take the step over.
                preference = "inline"
            choice = detect_platform(preference)
            adapter = create_adapter(choice.name, repo_root=self.repo_root, config=self.config)
            self.platform_reason = choice.reason
        else:
            self.platform_reason = f"given: {adapter.name}"
        self.adapter = adapter
        if adapter.name not in PLATFORMS:
            known = ", ".join(PLATFORMS)
            raise AutodevError(f"adapter {adapter.name!r} is not a known platform; known: {known}")
        self.platform_name: Platform = adapter.name
        self.registry = dict(registry) if registry is not None else build_registry()
        self.session_id = session_id or f"sess-{secrets.token_hex(6)}"
        self.listener = listener
        self.disable_impl_tournament = disable_impl_tournament
        self.git = GitRepo(self.repo_root)
        self.agent_watch = AgentWatch(
            self.git,
            self.paths.config,
            calls_dir=self.paths.calls_dir,
            ledger=self.paths.ledger,
            ledger_head=lambda: self._plan_manager.ledger_head if self._plan_manager else None,
            after_ledger_restored=lambda: self._plan_manager.ledger.close() if self._plan_manager else None,
            derived={
                self.paths.snapshot: lambda: (
                    self.plan_manager.checkpoint() if self.plan_manager.has_plan else None
                ),
                self.paths.state_dir / "knowledge.json": lambda: self.knowledge.save(),
            },
        )
        self.stopped_processes: list[int] = []
        # Held while a parallel run changes the main checkout (set by the dispatcher for its run).
        self.main_tree_lock: anyio.Lock | None = None
        self.loop_detector = LoopDetector(self.config.guardrails.loop_detection_threshold)
        self._plan_manager: PlanManager | None = None
        self._guardrails: GuardrailEnforcer | None = None
        self._knowledge: KnowledgeStore | None = None
        self._agent_slots: anyio.CapacityLimiter | None = None
        self._worktree_admin_lock: anyio.Lock | None = None
        self._environment: EnvironmentResolution | None = None
        self._checks: ChangeChecks | None = None
        self._preflight: Preflight | None = None

    # --- wiring that needs the state directory ------------------------------------------------------

    @property
    def plan_manager(self) -> PlanManager:
        if self._plan_manager is None:
            raise AutodevError("the orchestrator is not running; call plan(), execute(), run() or resume()")
        return self._plan_manager

    @property
    def guardrails(self) -> GuardrailEnforcer:
        if self._guardrails is None:
            raise AutodevError("the orchestrator is not running; call plan(), execute(), run() or resume()")
        return self._guardrails

    @property
    def knowledge(self) -> KnowledgeStore:
        if self._knowledge is None:
            raise AutodevError("the orchestrator is not running; call plan(), execute(), run() or resume()")
        return self._knowledge

    @property
    def agent_slots(self) -> anyio.CapacityLimiter:
        """At most ``max_concurrent_agents`` agent calls at once, however many tasks are in flight."""
        if self._agent_slots is None:  # made lazily: a limiter belongs to the running event loop
            self._agent_slots = anyio.CapacityLimiter(self.config.max_concurrent_agents)
        return self._agent_slots

    @property
    def worktree_admin_lock(self) -> anyio.Lock:
        """One lock for ``git worktree add/remove/list/prune`` in this repository: concurrent ones can read
        each other's half-written admin files and fail."""
        if self._worktree_admin_lock is None:
            self._worktree_admin_lock = anyio.Lock()
        return self._worktree_admin_lock

    async def project_environment(self) -> EnvironmentResolution:
        """The project's environment (``autodev.qa.environment``), found once per public call."""
        if self._environment is None:
            self._environment = await resolve_environment(self.repo_root, self.config.environment)
            _log.info(
                "orchestrator.environment",
                chosen=self._environment.environment.summary() if self._environment.environment else None,
                problem=self._environment.problem,
            )
        return self._environment

    @property
    def worktree_preparer(self) -> WorktreePreparer:
        """The repository's worktree setup, for every worktree the run makes (tasks, pool, baseline)."""
        resolution = self._environment
        environment = resolution.environment if resolution is not None else None
        return WorktreePreparer(
            self.repo_root,
            self.config.worktree_setup,
            env=environment.env if environment is not None else None,
            children_dir=self.paths.children_dir,
        )

    async def change_checks(self) -> ChangeChecks:
        """The gates of this call, in the project's environment, judged against each task's base."""
        if self._checks is None:
            resolution = await self.project_environment()
            self._checks = ChangeChecks(
                paths=self.paths,
                config=self.config,
                git=self.git,
                environment=resolution.environment,
                preparer=self.worktree_preparer,
                admin_lock=self.worktree_admin_lock,
            )
        return self._checks

    async def preflight(self) -> Preflight:
        """Check, before any paid call, that the gates can do their work (``autodev.orchestrator.preflight``);
        once per public call."""
        if self._preflight is None:
            resolution = await self.project_environment()
            if resolution.environment is not None:
                self.emit(ProgressEvent("note", f"project environment: {resolution.environment.summary()}"))
            isolated = resolve_parallelism(self.config, self.adapter).isolated
            self._preflight = await run_preflight(
                await self.change_checks(), self.git, resolution, isolated=isolated
            )
        return self._preflight

    async def project_block(self) -> str:
        """What every task's roles are told about the project (``autodev.orchestrator.context``)."""
        from autodev.orchestrator.context import project_context

        preflight = await self.preflight()
        resolution = await self.project_environment()
        context = project_context(
            self.plan_manager,
            self.repo_root,
            environment=resolution.environment,
            baseline=preflight.baseline,
            commit=preflight.commit,
        )
        return context.block()

    @contextmanager
    def _session(self) -> Iterator[None]:
        """Hold the run lock and open the ledger for one public call; always leave a checkpoint."""
        ensure_state_dir(self.paths)
        _log_like_the_cli(self.paths)
        # Locks and limiters belong to one event loop; each public call may run in a new one. The project
        # environment is looked up anew too: the user may have fixed it since the last call.
        self._agent_slots = None
        self.main_tree_lock = None
        self._worktree_admin_lock = None
        self._environment = None
        self._checks = None
        self._preflight = None
        with SessionLock(self.paths) as session:
            self.stopped_processes = session.stopped
            manager = PlanManager(self.repo_root, lock_timeout_s=self.config.lock_timeout_s)
            manager.load()
            self._plan_manager = manager
            self._guardrails = GuardrailEnforcer(self.config.guardrails, manager)
            self._knowledge = KnowledgeStore(self.paths)
            try:
                yield
            finally:
                manager.close()
                self._plan_manager = None
                self._guardrails = None

    async def _recover_from_a_killed_run(self) -> None:
        """Under the run lock (taking it stopped a killed run's children): clear git and temp-file debris."""
        _remove_dead_temp_files(self.paths.state_dir)
        cleared = await self.git.clear_stale_locks()
        if cleared:
            _log.warning("orchestrator.stale_git_locks_removed", paths=[str(path) for path in cleared])
        await prune_stale_worktrees(self)
        await self._prune_task_worktrees()
        base = WorktreeManager(
            self.repo_root, self.paths.baseline_worktree_dir, admin_lock=self.worktree_admin_lock
        )
        await base.prune_stale()

    async def _check_interrupted_calls(self) -> None:
        """Before any work: what agent calls that ended unchecked (a kill, an inline wait) did to git."""
        plans = self.plan_manager
        subjects = {commit_message(task) for task in plans.tasks()} if plans.has_plan else set()
        await self.agent_watch.check_interrupted(subjects)

    async def _prune_task_worktrees(self) -> None:
        """Remove task worktrees and pinned task commits nothing in flight owns any more.

        A task interrupted mid-flight keeps its worktree (``resume`` continues it there), and its pinned
        commit when it was interrupted while merging.
        """
        plans = self.plan_manager
        ids = plans.task_ids_with_status(*MID_FLIGHT) if plans.has_plan else []
        in_flight = {task_id: plans.get_task(task_id) for task_id in ids}
        keep = [self.repo_root / task.worktree for task in in_flight.values() if task.worktree]
        tasks_dir = self.paths.task_worktrees_dir
        worktrees = WorktreeManager(self.repo_root, tasks_dir, admin_lock=self.worktree_admin_lock)
        await worktrees.prune_stale(keep=keep)
        for ref in await self.git.refs_under(TASK_REF_PREFIX):
            task = in_flight.get(ref.removeprefix(TASK_REF_PREFIX))
            # A pinned commit belongs to the merge step only; back at an earlier step it is stale.
            if task is None or task.status != "tournamented":
                await self.git.delete_ref(ref)
        # A blocked task's kept change matters until the task finishes one way or another.
        for ref in await self.git.refs_under(BLOCKED_REF_PREFIX):
            task_id = ref.removeprefix(BLOCKED_REF_PREFIX)
            finished = plans.has_plan and plans.get_task_status(task_id) in ("complete", "skipped", None)
            if not plans.has_plan or finished:
                await self.git.delete_ref(ref)

    def emit(self, event: ProgressEvent) -> None:
        if self.listener is None:
            return
        try:
            self.listener(event)
        except Exception:
            _log.exception("orchestrator.listener_failed", kind=event.kind)

    async def _require_git(self) -> None:
        await require_repository(self.git)

    # --- the public API -----------------------------------------------------------------------------

    async def plan(self, intent: str, *, replace: bool = False) -> Plan:
        """Run the plan phase and save the plan."""
        await self._require_git()
        with self._session():
            await self._recover_from_a_killed_run()
            await self._check_interrupted_calls()
            self.emit(ProgressEvent("phase", f"plan phase on {self.platform_name}"))
            _log.info("orchestrator.plan.start", intent_bytes=len(intent.encode("utf-8")))
            plan = await run_plan_phase(self, intent, replace=replace)
            clear_suspend_state(self.paths)
            _log.info("orchestrator.plan.done", plan_id=plan.plan_id, phases=len(plan.phases))
            return plan

    async def execute(self, task_id: str | None = None, *, allow_detached: bool = False) -> list[Task]:
        """Run the execute phase over all runnable tasks, or only ``task_id``.

        A detached HEAD is refused unless ``allow_detached`` (the task commits would be on no branch).
        """
        await self._require_git()
        await check_head(self, allow_detached=allow_detached)
        with self._session():
            await self._recover_from_a_killed_run()
            await self._check_interrupted_calls()
            await require_clean_tree(self)
            tasks = await run_execute_phase(self, task_id)
            clear_suspend_state(self.paths)
            return tasks

    async def run(
        self, intent: str, *, confirm_plan: bool = False, replace: bool = False, allow_detached: bool = False
    ) -> RunOutcome:
        """Plan, then execute unless the plan must be approved first (``allow_detached``: see ``execute``)."""
        await self._require_git()
        await check_head(self, allow_detached=allow_detached)
        with self._session():
            await self._recover_from_a_killed_run()
            await self._check_interrupted_calls()
            await require_clean_tree(self)
            await self.preflight()
            self.emit(ProgressEvent("phase", f"plan phase on {self.platform_name}"))
            plan = await run_plan_phase(self, intent, replace=replace, require_approval=confirm_plan)
            if plan.metadata.get("requires_approval"):
                clear_suspend_state(self.paths)
                return RunOutcome(plan, [], awaiting_approval=True)
            tasks = await run_execute_phase(self)
            clear_suspend_state(self.paths)
            return RunOutcome(self.plan_manager.plan, tasks)

    async def resume(self, *, allow_detached: bool = False) -> list[Task]:
        """Continue after an inline suspend, a crash, an approval or a budget stop (``allow_detached``: see
        ``execute``)."""
        await self._require_git()
        await check_head(self, allow_detached=allow_detached)
        with self._session():
            await self._recover_from_a_killed_run()
            await self._check_interrupted_calls()
            state = load_suspend_state(self.paths)
            if state is not None and not await anyio.Path(state.response_path).exists():
                raise ResponseMissingError(
                    f"waiting for {state.response_path} (the {state.pending_role} answer for "
                    f"{state.pending_task_id}); the instructions are in {state.delegation_path}; write the "
                    "answer there, then run `autodev resume`"
                )
            if state is not None and isinstance(self.adapter, InlineAdapter):
                self.adapter.check_response(state.pending_task_id, state.pending_role)
            if state is not None:
                self.emit(
                    ProgressEvent(
                        "note",
                        f"resuming {state.phase} at {state.orchestrator_step} ({state.pending_role})",
                        state.pending_task_id,
                        state.orchestrator_step,
                        state.attempt,
                    )
                )
            if not self.plan_manager.has_plan or self.plan_manager.plan_phase is not None:
                intent = self._saved_intent()
                await require_clean_tree(self)
                await self.preflight()
                await run_plan_phase(self, intent, replace=True)
            else:
                await require_clean_tree(self)
            tasks = await run_execute_phase(self)
            clear_suspend_state(self.paths)
            return tasks

    async def clean(self) -> list[int]:
        """What a start does after a crash, on demand: stop leftover children, clear stale git locks, remove
        dead temp files and stale worktrees (``autodev clean``). Work recorded in the ledger is untouched.
        Returns the pids of the leftover processes it stopped."""
        await self._require_git()
        with self._session():
            await self._recover_from_a_killed_run()
            return list(self.stopped_processes)

    def retry(self, task_id: str, *, reset_attempts: bool = False) -> Task:
        """Send a blocked task back to work (``autodev retry``); the next ``resume``/``execute`` runs it.

        It starts anew from the branch as it is then, continuing from its last change (kept when it was
        blocked), with at least one attempt left (all of them with ``reset_attempts``); the tasks blocked
        because of it are pending again. Refused with a one-line reason when the task is not blocked or
        cannot run yet.
        """
        with self._session():
            manager = self.plan_manager
            unblocked = manager.retry_blocked(
                task_id, reset_attempts=reset_attempts, retry_limit=self.config.qa_retry_limit
            )
            _log.info("orchestrator.task_retried", task_id=task_id, unblocked=unblocked)
            return manager.get_task(task_id)

    def skip(self, task_id: str) -> list[str]:
        """Skip a pending task (``autodev skip``); the ids of the dependents it blocked (by configuration,
        ``skipped_dependency_satisfies = false``), else an empty list."""
        with self._session():
            blocked = self.plan_manager.skip_task(
                task_id, satisfies_dependents=self.config.skipped_dependency_satisfies
            )
            _log.info("orchestrator.task_skipped", task_id=task_id, blocked=blocked)
            return blocked

    def approve(self) -> Plan:
        """Record the user's approval of the current plan (``autodev approve``)."""
        with self._session():
            self.plan_manager.approve_plan()
            return self.plan_manager.plan

    def status(self) -> dict[str, Any]:
        """The status object of ``autodev status --json`` (read-only; works beside a running writer)."""
        return read_status(self.repo_root)

    # --- hooks filled by the tournament work ----------------------------------------------------------

    async def plan_tournament_hook(self, plan: Plan, intent: str) -> Plan:
        """Refine the architect's plan with a plan tournament when enabled; returns the winning plan."""
        if not self.config.tournaments.plan.enabled:
            return plan
        return await run_plan_tournament(self, plan, intent)

    async def impl_tournament_hook(self, task: Task, workspace: TaskWorkspace | None = None) -> None:
        """Refine a tested implementation with an implementation tournament when enabled.

        ``workspace`` is where the task's change lives (its own worktree when tasks run in parallel).
        """
        if self.config.tournaments.impl.enabled and not self.disable_impl_tournament:
            tree = workspace or TaskWorkspace(self.repo_root, self.git)
            await run_impl_tournament(self, task, tree.root, tree.git)

    # --- helpers ------------------------------------------------------------------------------------

    def _saved_intent(self) -> str:
        try:
            return read_bounded_text(
                self.paths.spec,
                limit=MAX_INPUT_FILE_BYTES,
                what="the saved intent",
                follow_symlinks=False,
                error=led_by(self.paths.spec, StateError),
            )
        except OSError as exc:
            raise AutodevError(
                f'there is no plan and no saved intent ({self.paths.spec}); start with `autodev run "..."`'
            ) from exc
