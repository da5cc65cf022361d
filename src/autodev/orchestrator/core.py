"""``Orchestrator``: the public facade that wires configuration, an adapter and the state into the two FSMs.

``plan(intent)`` runs the plan phase, ``execute(task_id=None)`` the execute phase, ``run(intent)`` both,
``resume()`` continues after an inline suspend, a crash, an approval or a budget stop, and ``status()``
returns the status object. Each of the mutating methods holds the run lock for its whole duration, so a
second run in the same repository is refused at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.detect import detect_platform
from autodev.adapters.inline import InlineAdapter
from autodev.adapters.registry import create_adapter
from autodev.agents.registry import build_registry
from autodev.agents.spec import AgentSpec
from autodev.config import PLATFORMS, AutodevConfig, load_config
from autodev.config.schema import Platform
from autodev.errors import EXIT_SUSPENDED, AgentUnusableError, AutodevError, StateError, quote
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.guardrails import GuardrailEnforcer, LoopDetector
from autodev.logging import configure_logging, get_logger
from autodev.orchestrator.agent_health import check_adapter, probe_model
from autodev.orchestrator.base_check import check_base_at_start
from autodev.orchestrator.beside import beside
from autodev.orchestrator.checkout import check_head, require_clean_tree, require_repository
from autodev.orchestrator.delegation_policy import DelegationPolicy, ExecuteEverything
from autodev.orchestrator.events import ProgressEvent, ProgressListener, deliver
from autodev.orchestrator.execute.adoption import AdoptionRefusedError
from autodev.orchestrator.execute.adoption import adopt as adopt_change
from autodev.orchestrator.execute.adoption import discard as discard_change
from autodev.orchestrator.execute.entry import run_execute_phase
from autodev.orchestrator.execute.executor import TaskExecutor
from autodev.orchestrator.execute.ray_executor import RayExecutor, executor_for
from autodev.orchestrator.execute.results import resolve_selection
from autodev.orchestrator.execute.task_flow import TaskContext
from autodev.orchestrator.harnesses import (
    Verifier,
    check_sandboxes,
    harness_for,
    pick_read_only_adapter,
    pick_verifier,
    platform_of,
)
from autodev.orchestrator.inline_state import clear_suspend_state, load_suspend_state
from autodev.orchestrator.integrity import AgentWatch
from autodev.orchestrator.plan_phase import check_intent, run_plan_phase
from autodev.orchestrator.provider_guard import ProviderGuard
from autodev.orchestrator.run_context import RunContext
from autodev.orchestrator.run_policy import declared_scope
from autodev.orchestrator.run_router import check_autonomy
from autodev.orchestrator.submodules import refuse_submodule_files
from autodev.orchestrator.tournaments.impl import prune_stale_worktrees
from autodev.state.evidence import read_evidence
from autodev.state.hashing import sha256_hex
from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths, ensure_state_dir, normalize_repo_path
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import MODEL_NAMES, parse_plan_markdown, read_plan_markdown
from autodev.state.policy_records import ApprovalRecord, ScopeDeclaration
from autodev.state.schemas import CompletionEvidence, Plan, Task
from autodev.state.session_lock import SessionLock
from autodev.state.status_reader import read_status
from autodev.state.vocabulary import DONE_STATUSES, IN_FLIGHT_STATUSES
from autodev.workspace.base_freshness import check_base, refresh_onto_base
from autodev.workspace.git import GitRepo
from autodev.workspace.integration import (
    ADOPTION_REF_PREFIX,
    BASE_REF_PREFIX,
    BLOCKED_REF_PREFIX,
    TASK_REF_PREFIX,
    TaskWorkspace,
    adoption_ref,
    commit_message,
)
from autodev.workspace.worktree import WorktreeManager

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


_Part = TypeVar("_Part")


def _while_running(part: _Part | None) -> _Part:
    """A part of the orchestrator that exists only during a public call."""
    if part is None:
        raise AutodevError("the orchestrator is not running; call plan(), execute(), run() or resume()")
    return part


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

    ``adapter`` defaults to the configured platform (``auto``: the first agent CLI on PATH, else inline);
    ``read_only_adapter``, the platform of the roles that may not write, to ``read_only_platform``;
    ``verify_adapter``, the reviewer's platform while the completion contract wants another family than the
    developer's, to ``completion.verify_platform`` or one found (``autodev.orchestrator.harnesses``).
    ``listener`` receives ``ProgressEvent``s for a live display; the orchestrator itself never prints.
    """

    def __init__(
        self,
        repo_root: Path,
        *,
        config: AutodevConfig | None = None,
        adapter: PlatformAdapter | None = None,
        read_only_adapter: PlatformAdapter | None = None,
        verify_adapter: PlatformAdapter | None = None,
        registry: Mapping[str, AgentSpec] | None = None,
        session_id: str | None = None,
        listener: ProgressListener | None = None,
        disable_impl_tournament: bool = False,
        delegation_policy: DelegationPolicy | None = None,
        executor: TaskExecutor | None = None,
        write_scope: str | None = None,
        wait_for_approval: bool = False,
        stale_base_ok: bool = False,
        fetch_base: bool = True,
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
        # The roles that only read run elsewhere when this platform cannot start them read-only.
        if read_only_adapter is None:
            read_only_adapter, self.read_only_reason = pick_read_only_adapter(
                self.config, self.repo_root, adapter
            )
        else:
            self.read_only_reason = f"read-only roles: {read_only_adapter.name} (given)"
        self.read_only_adapter = read_only_adapter
        # The reviewer's platform when it is another family than the developer's (``completion``).
        self.verifier = (
            Verifier(verify_adapter, f"verifier: {verify_adapter.name} (given)")
            if verify_adapter is not None
            else pick_verifier(self.config, self.repo_root, adapter, read_only_adapter)
        )
        self.registry = dict(registry) if registry is not None else build_registry()
        self.session_id = session_id or f"sess-{secrets.token_hex(6)}"
        self.listener = listener
        self.disable_impl_tournament = disable_impl_tournament
        self.delegation_policy: DelegationPolicy = delegation_policy or ExecuteEverything()
        self.executor = executor if executor is not None else executor_for(self.config)
        # The scope a script declares for every run and execute call it makes (as --write-scope does).
        self.write_scope = write_scope
        # With nothing left but tasks waiting for an approval, wait for the answer (``--wait``) or pause.
        self.wait_for_approval = wait_for_approval
        # Build on a checkout behind its base without asking (``--stale-base-ok``); fetch the base ref at
        # ``run`` start (``--no-fetch``: no).
        self.stale_base_ok = stale_base_ok
        self.fetch_base = fetch_base
        self._agent_checked = False
        self.git = GitRepo(self.repo_root)
        self.agent_watch = AgentWatch(
            self.git,
            self.paths.config,
            calls_dir=self.paths.calls_dir,
            ledger=lambda: self._plan_manager.ledger if self._plan_manager else None,
            derived={
                self.paths.snapshot: lambda: (
                    self.plan_manager.checkpoint() if self.plan_manager.has_plan else None
                ),
                self.paths.state_dir / "knowledge.json": lambda: self.knowledge.save(),
            },
        )
        self.stopped_processes: list[int] = []
        self.loop_detector = LoopDetector(self.config.guardrails.loop_detection_threshold)
        self._plan_manager: PlanManager | None = None
        self._guardrails: GuardrailEnforcer | None = None
        self._knowledge: KnowledgeStore | None = None

    # --- wiring that needs the state directory ------------------------------------------------------

    @property
    def plan_manager(self) -> PlanManager:
        return _while_running(self._plan_manager)

    @property
    def guardrails(self) -> GuardrailEnforcer:
        return _while_running(self._guardrails)

    @property
    def knowledge(self) -> KnowledgeStore:
        return _while_running(self._knowledge)

    @contextmanager
    def _session(self) -> Iterator[None]:
        """Hold the run lock and open the ledger for one public call; always leave a checkpoint."""
        ensure_state_dir(self.paths)
        _log_like_the_cli(self.paths)
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
                self.agent_watch.release_records()
                manager.close()
                self._plan_manager = None
                self._guardrails = None

    def _context(self) -> RunContext:
        """The context of one public call, inside its event loop (locks and limiters belong to one) and its
        session. Everything found lazily (the project's environment: the user may have fixed it since the
        last call) is found anew."""
        return RunContext(
            repo_root=self.repo_root,
            paths=self.paths,
            config=self.config,
            git=self.git,
            session_id=self.session_id,
            platform_name=self.platform_name,
            adapter=self.adapter,
            read_only_adapter=self.read_only_adapter,
            verifier=self.verifier,
            wait_for_approval=self.wait_for_approval,
            stale_base_ok=self.stale_base_ok,
            registry=self.registry,
            plan_manager=self.plan_manager,
            guardrails=self.guardrails,
            knowledge=self.knowledge,
            agent_watch=self.agent_watch,
            loop_detector=self.loop_detector,
            listener=self.listener,
            disable_impl_tournament=self.disable_impl_tournament,
            delegation_policy=self.delegation_policy,
            agent_slots=anyio.CapacityLimiter(self.config.max_concurrent_agents),
            provider_guard=ProviderGuard(self.config.provider),
        )

    async def _recover_from_a_killed_run(self, session: RunContext) -> None:
        """Under the run lock (taking it stopped a killed run's children): clear git and temp-file debris."""
        _remove_dead_temp_files(self.paths.state_dir)
        cleared = await self.git.clear_stale_locks()
        if cleared:
            _log.warning("orchestrator.stale_git_locks_removed", paths=[str(path) for path in cleared])
        await prune_stale_worktrees(session)
        await self._prune_task_worktrees(session)
        base = WorktreeManager(
            self.repo_root, self.paths.baseline_worktree_dir, admin_lock=session.worktree_admin_lock
        )
        await base.prune_stale()

    async def _check_interrupted_calls(self) -> None:
        """Before any work: what agent calls that ended unchecked (a kill, an inline wait) did to git."""
        plans = self.plan_manager
        subjects = {commit_message(task) for task in plans.tasks()} if plans.has_plan else set()
        await self.agent_watch.check_interrupted(subjects)

    async def _prune_task_worktrees(self, session: RunContext) -> None:
        """Remove task worktrees, pinned task commits and pinned bases nothing in flight owns any more.

        A task interrupted mid-flight keeps its worktree (``resume`` continues it there), its pinned commit
        when it was interrupted while merging, and its base when that is uncommitted work (``auto_commit``
        off).
        """
        plans = self.plan_manager
        ids = plans.task_ids_with_status(*IN_FLIGHT_STATUSES) if plans.has_plan else []
        in_flight = {task_id: plans.get_task(task_id) for task_id in ids}
        keep = [self.repo_root / task.worktree for task in in_flight.values() if task.worktree]
        tasks_dir = self.paths.task_worktrees_dir
        worktrees = WorktreeManager(self.repo_root, tasks_dir, admin_lock=session.worktree_admin_lock)
        await worktrees.prune_stale(keep=keep)
        for ref in await self.git.refs_under(TASK_REF_PREFIX):
            task = in_flight.get(ref.removeprefix(TASK_REF_PREFIX))
            # A pinned commit belongs to the merge step only; back at an earlier step it is stale.
            if task is None or task.status != "tournamented":
                await self.git.delete_ref(ref)
        # A task in the main tree started on uncommitted work keeps that base while it is in flight.
        for ref in await self.git.refs_under(BASE_REF_PREFIX):
            if ref.removeprefix(BASE_REF_PREFIX) not in in_flight:
                await self.git.delete_ref(ref)
        # A change that waits for adoption is kept by its ref, put back from the ledger if it went missing
        # (the commit may be there still); a ref whose change no longer waits goes.
        waiting = {record.task_id: record for record in plans.pending_adoptions()} if plans.has_plan else {}
        for ref in await self.git.refs_under(ADOPTION_REF_PREFIX):
            if ref.removeprefix(ADOPTION_REF_PREFIX) not in waiting:
                await self.git.delete_ref(ref)
        for task_id, record in waiting.items():
            ref = adoption_ref(task_id)
            if await self.git.resolve(ref) is None and await self.git.resolve(f"{record.commit}^{{commit}}"):
                await self.git.set_ref(ref, record.commit)
        # A blocked task's kept change matters until the task finishes one way or another.
        for ref in await self.git.refs_under(BLOCKED_REF_PREFIX):
            task_id = ref.removeprefix(BLOCKED_REF_PREFIX)
            finished = plans.has_plan and plans.get_task_status(task_id) in {*DONE_STATUSES, None}
            if not plans.has_plan or finished:
                await self.git.delete_ref(ref)

    def emit(self, event: ProgressEvent) -> None:
        deliver(self.listener, event)

    async def _require_git(self) -> None:
        await require_repository(self.git)

    @contextlib.asynccontextmanager
    async def _opened(
        self, *, allow_detached: bool | None = None, gates: bool = False
    ) -> AsyncIterator[RunContext]:
        """How every command that may call an agent begins: a git repository, HEAD checked (not when
        ``allow_detached`` is None: the plan phase commits nothing), the run lock held, what a killed run
        left cleared, and what interrupted agent calls did to git named. A command that runs the gates
        (``gates``) finds the project's environment meanwhile (``RunContext.find_environment_early``)."""
        await self._require_git()
        if allow_detached is not None:
            await check_head(self.git, self.emit, allow_detached=allow_detached)
        with self._session():
            session = self._context()
            # Taking the run lock stopped a killed run's children: the probe is not one of them.
            async with beside(*((session.find_environment_early,) if gates else ())):
                await self._recover_from_a_killed_run(session)
                await self._check_interrupted_calls()
                yield session

    async def _check_agent(self) -> None:
        """Once per facade, before its first agent call and after the free local checks (a clean tree, the
        preflight): the platform's health check, paid part included (a one-word answer from the developer's
        model), so that a refused login or a used-up plan stops the run before the plan phase is paid for.
        Recorded nowhere: nothing was done."""
        if self._agent_checked:
            return
        if isinstance(self.executor, RayExecutor):
            # The cluster the tasks' flows will run on is reached first: an unreachable one costs nothing.
            self.executor.check_platforms(
                self.config, self.adapter, self.read_only_adapter, self.verifier.adapter
            )
            await anyio.to_thread.run_sync(self.executor.connect)
        check_sandboxes(self.registry, self.adapter_for)
        verifier = self.verifier.adapter
        for adapter, setting in (
            (self.adapter, "--platform"),
            (self.read_only_adapter, "read_only_platform"),
            (verifier if verifier is not self.read_only_adapter else None, "completion.verify_platform"),
        ):
            if adapter is None:
                continue
            model = probe_model(self.registry, self.config, platform_of(adapter, self.platform_name))
            health = await check_adapter(adapter, model)
            _log.info(
                "orchestrator.agent_checked",
                platform=adapter.name,
                healthy=health.healthy,
                detail=health.line,
            )
            if health.healthy:
                continue
            if adapter is verifier and self.verifier.found_on_path:
                # A CLI that merely sits on PATH is no reason to stop: the contract records the same family.
                self.verifier.drop(
                    f"verifier: {adapter.name} was found on PATH but cannot be used ({health.line}): the "
                    f"reviewer runs on {self.adapter.name}"
                )
                self.emit(ProgressEvent("note", self.verifier.reason))
                continue
            raise AgentUnusableError(
                f"the {adapter.name} agent cannot be used: {health.line}; fix that (log in, set the "
                f"API key, install the CLI) or choose another {setting}, then run the command again"
            )
        self._agent_checked = True

    def adapter_for(self, role: str) -> PlatformAdapter:
        """The platform ``role``'s calls go to (``harness_for``)."""
        return harness_for(self.registry, self.adapter, self.read_only_adapter, role, self.verifier.adapter)

    def platform_for(self, role: str) -> Platform:
        """The name of ``adapter_for(role)``'s platform (model tiers resolve per platform)."""
        return platform_of(self.adapter_for(role), self.platform_name)

    # --- the public API -----------------------------------------------------------------------------

    async def plan(self, intent: str, *, replace: bool = False) -> Plan:
        """Run the plan phase and save the plan (with the intent's ``Write scope:``, checked first)."""
        check_autonomy(self.config, self.repo_root)
        declared_scope(intent, self.repo_root, "intent")
        async with self._opened() as session:
            await self._check_agent()
            self.emit(ProgressEvent("phase", f"plan phase on {self.platform_name}"))
            _log.info("orchestrator.plan.start", intent_bytes=len(intent.encode("utf-8")))
            plan = await run_plan_phase(session, intent, replace=replace)
            clear_suspend_state(self.paths)
            _log.info("orchestrator.plan.done", plan_id=plan.plan_id, phases=len(plan.phases))
            return plan

    async def execute(
        self,
        task_id: str | None = None,
        *,
        allow_detached: bool = False,
        write_scope: str | None = None,
        evidence: Sequence[str] | None = None,
    ) -> list[Task]:
        """Run the execute phase over all runnable tasks, or only ``task_id``.

        A detached HEAD is refused unless ``allow_detached`` (the task commits would be on no branch).
        ``write_scope`` (``--write-scope``) is a scope the user declares for the run, recorded first.
        ``evidence``: the ids of the accepted results (``E<seq>``) every task's roles are given, in this
        order, instead of the most recent ones; checked before anything is recorded or any agent starts.
        """
        check_autonomy(self.config, self.repo_root)
        declaration = self._command_line_scope(write_scope or self.write_scope)
        async with self._opened(allow_detached=allow_detached, gates=True) as session:
            selection = (
                await resolve_selection(self.plan_manager, self.git, evidence)
                if evidence is not None
                else None
            )
            await require_clean_tree(session)
            self._declare(declaration)
            await self._check_agent()
            tasks = await run_execute_phase(session, task_id, executor=self.executor, evidence=selection)
            clear_suspend_state(self.paths)
            return tasks

    async def run(
        self,
        intent: str,
        *,
        confirm_plan: bool = False,
        replace: bool = False,
        allow_detached: bool = False,
        write_scope: str | None = None,
    ) -> RunOutcome:
        """Plan, then execute unless the plan must be approved first (``allow_detached``: see ``execute``).

        ``write_scope`` is added to the intent as its ``Write scope:`` line, so that a run resumed before
        its plan was saved still has it; the intent's scope is checked before anything starts."""
        check_autonomy(self.config, self.repo_root)
        scope = write_scope or self.write_scope
        if scope is not None:
            self._command_line_scope(scope)
            intent = f"{check_intent(intent)}\nWrite scope: {scope}"
        declared_scope(intent, self.repo_root, "intent")
        async with self._opened(allow_detached=allow_detached, gates=True) as session:
            await require_clean_tree(session)
            await check_base_at_start(session, fetch=self.fetch_base)
            await session.preflight()
            await self._check_agent()
            self.emit(ProgressEvent("phase", f"plan phase on {self.platform_name}"))
            _log.info("orchestrator.plan.start", intent_bytes=len(intent.encode("utf-8")))
            plan = await run_plan_phase(session, intent, replace=replace, require_approval=confirm_plan)
            _log.info("orchestrator.plan.done", plan_id=plan.plan_id, phases=len(plan.phases))
            if plan.metadata.get("requires_approval"):
                clear_suspend_state(self.paths)
                return RunOutcome(plan, [], awaiting_approval=True)
            tasks = await run_execute_phase(session, executor=self.executor)
            clear_suspend_state(self.paths)
            return RunOutcome(self.plan_manager.plan, tasks)

    async def resume(self, *, allow_detached: bool = False) -> list[Task]:
        """Continue after an inline suspend, a crash, an approval or a budget stop (``allow_detached``: see
        ``execute``)."""
        check_autonomy(self.config, self.repo_root)
        async with self._opened(allow_detached=allow_detached, gates=True) as session:
            state = load_suspend_state(self.paths)
            if state is not None and not await anyio.Path(state.response_path).exists():
                raise ResponseMissingError(
                    f"waiting for {state.response_path} (the {state.pending_role} answer for "
                    f"{state.pending_task_id}); the instructions are in {state.delegation_path}; write the "
                    "answer there, then run `autodev resume`"
                )
            pending = self.adapter_for(state.pending_role) if state is not None else None
            if state is not None and isinstance(pending, InlineAdapter):
                pending.check_response(state.pending_task_id, state.pending_role)
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
                await require_clean_tree(session)
                await session.preflight()
                await self._check_agent()
                _log.info("orchestrator.plan.start", intent_bytes=len(intent.encode("utf-8")), resumed=True)
                plan = await run_plan_phase(session, intent, replace=True)
                _log.info("orchestrator.plan.done", plan_id=plan.plan_id, phases=len(plan.phases))
            else:
                await require_clean_tree(session)
                await self._check_agent()
            tasks = await run_execute_phase(session, executor=self.executor)
            clear_suspend_state(self.paths)
            return tasks

    async def clean(self) -> list[int]:
        """What a start does after a crash, on demand: stop leftover children, clear stale git locks, remove
        dead temp files and stale worktrees (``autodev clean``). Work recorded in the ledger is untouched.
        Returns the pids of the leftover processes it stopped."""
        await self._require_git()
        with self._session():
            await self._recover_from_a_killed_run(self._context())
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

    def set_task_model(self, task_id: str, model: str) -> Task:
        """Give a task another Model level (``autodev task set ID --model M``): haiku, sonnet or opus (or
        fast, standard, strong); an empty ``model`` gives it the default, opus."""
        name = model.strip().lower()
        tier = MODEL_NAMES.get(name) if name else None
        if name and tier is None:
            raise AutodevError(f'unknown Model {quote(model)}; give haiku, sonnet or opus (or "" for opus)')
        with self._session():
            task = self.plan_manager.set_task_model(task_id, tier, by="user")
            _log.info("orchestrator.task_model_set", task_id=task_id, model=tier, previous=task.model)
            return self.plan_manager.get_task(task_id)

    def plan_from_markdown(self, markdown_file: Path, *, replace: bool = False) -> Plan:
        """Save a plan written by hand in the plan markdown (``autodev plan --from-markdown``), no agents.

        Everything is checked before the run lock is taken and the ledger opened: a file that is no plan, a
        task path outside the repository or inside a submodule is refused with the ledger untouched.
        Replacing a plan holds the run lock too: a live run's tasks must not be pulled away from it.
        """
        markdown = read_plan_markdown(markdown_file)
        spec = self.paths.spec
        spec_hash = sha256_hex(spec.read_bytes() if spec.is_file() else markdown.encode("utf-8"))[:16]
        parsed = parse_plan_markdown(markdown, spec_hash, source=str(markdown_file))
        for task in parsed.iter_tasks():
            for path in task.files:
                normalize_repo_path(path, self.repo_root, context=f"{markdown_file}: task {task.id}")
        refuse_submodule_files(parsed, self.repo_root, source=str(markdown_file))
        scope = declared_scope(markdown, self.repo_root, "plan_file")
        with self._session():
            saved = self.plan_manager.init_plan(
                parsed, session_id=self.session_id, replace=replace, write_scope=scope
            )
            _log.info("orchestrator.plan_imported", plan_id=saved.plan_id, source=str(markdown_file))
            return saved

    def approvals(self) -> list[ApprovalRecord]:
        """The current plan's approval requests for write scopes, oldest first (``autodev approvals``)."""
        plans = PlanManager.open(self.repo_root, readonly=True)
        try:
            return plans.approvals if plans.has_plan else []
        finally:
            plans.close()

    def resolve_approval(self, approval_id: str, *, accepted: bool) -> ApprovalRecord:
        """Accept or decline one approval request (``autodev approve --scope ID`` / ``autodev decline
        ID``). Accepting authorizes exactly the scope the request shows; the next ``resume`` re-decides
        the tasks that waited for it, or a run waiting for the answer takes it up."""
        # Under the ledger's lock only, not the run lock: the answer may come while a run waits for it, and
        # that run sees it at its next look at the ledger.
        ensure_state_dir(self.paths)
        _log_like_the_cli(self.paths)
        plans = PlanManager.open(self.repo_root, lock_timeout_s=self.config.lock_timeout_s)
        try:
            record = plans.resolve_approval(approval_id, accepted=accepted)
        finally:
            plans.close()
        _log.info("orchestrator.approval_resolved", approval_id=approval_id, status=record.status)
        return record

    async def refresh_base(self, *, fetch: bool = True) -> str:
        """Fast-forward the checked-out branch to its base ref (``autodev refresh-base``); what was done.
        Refused (``AutodevError``, nothing changed) while a run works, on a dirty tree, and when local
        commits the base lacks would be lost."""
        await self._require_git()
        with self._session():
            session = self._context()
            base = await check_base(
                self.git,
                fetch=fetch,
                fetch_timeout_s=self.config.base_fetch_timeout_s,
                threshold=self.config.base_behind_threshold,
            )
            try:
                done = await refresh_onto_base(self.git, base)
            except ValueError as exc:
                raise AutodevError(f"{exc} ({base.line()})") from None
            session.emit(ProgressEvent("note", done))
            _log.info("orchestrator.base_refreshed", ref=base.ref, commit=base.ref_commit, done=done)
            return done

    async def adopt(self, task_id: str) -> str:
        """Land ``task_id``'s verified change that waits for adoption (``autodev adopt``): a strict
        fast-forward of the main checkout, after a replay in git's object store when the branch moved; the
        task completes. Refused while a run works (the lock), and when it still cannot land without
        touching somebody's work (``AdoptionRefusedError``: it keeps waiting, nothing lost). The commit."""
        async with self._opened(allow_detached=False) as session:
            if not self.plan_manager.adoption_pending(task_id):
                self.plan_manager.get_task(task_id)  # a clear error for an unknown task
                raise AutodevError(f"task {task_id} has no change waiting for adoption (`autodev status`)")
            workspace = TaskWorkspace(self.repo_root, self.git, isolated=True)
            if not await adopt_change(session, task_id, TaskContext(workspace=workspace, resumed=True)):
                record = self.plan_manager.adoption(task_id)
                why = record.reason if record is not None else "its change no longer exists"
                raise AdoptionRefusedError(f"task {task_id} still waits for adoption: {why}")
            commit = self.plan_manager.get_task(task_id).commit
            assert commit is not None
            return commit

    async def discard(self, task_id: str, reason: str) -> None:
        """Give up ``task_id``'s change that waits for adoption (``autodev discard``): the task is blocked,
        its change kept for ``autodev retry``."""
        async with self._opened(allow_detached=None) as session:
            if not self.plan_manager.adoption_pending(task_id):
                self.plan_manager.get_task(task_id)
                raise AutodevError(f"task {task_id} has no change waiting for adoption (`autodev status`)")
            await discard_change(session, task_id, reason)

    def proof(self, task_id: str) -> CompletionEvidence | None:
        """The newest completion contract of ``task_id`` (``autodev proof``): its required checks, their
        outcomes and digests, waivers and verdict; None before its first. Read-only."""
        plans = PlanManager.open(self.repo_root, readonly=True)
        try:
            plans.get_task(task_id)  # a clear error for an unknown task
            refs = [ref for ref in plans.evidence_for(task_id) if ref.kind == "completion"]
        finally:
            plans.close()
        if not refs:
            return None
        evidence = read_evidence(self.repo_root / refs[-1].path)
        return evidence if isinstance(evidence, CompletionEvidence) else None

    def waive(self, task_id: str, check: str, reason: str) -> CompletionEvidence:
        """Waive ``check`` of ``task_id`` for the revision its newest contract checked (``autodev waive``);
        a new revision needs a new waiver. The contract it applies to."""
        contract = self.proof(task_id)
        if contract is None:
            raise AutodevError(f"task {task_id} has no completion contract yet; nothing to waive")
        known = {item.id: item for item in contract.checks}
        if check not in known:
            raise AutodevError(
                f"task {task_id}'s contract has no check {check!r}; its checks: {', '.join(known) or 'none'}"
            )
        if known[check].status not in ("blocked", "waived"):
            raise AutodevError(
                f"check {check} of task {task_id} is {known[check].status}, not blocked: only a check that "
                "could not run can be waived"
            )
        with self._session():
            self.plan_manager.waive_check(task_id, check, contract.revision, reason)
        return contract

    def approve(self) -> Plan:
        """Record the user's approval of the current plan (``autodev approve``)."""
        with self._session():
            self.plan_manager.approve_plan()
            return self.plan_manager.plan

    def status(self) -> dict[str, Any]:
        """The status object of ``autodev status --json`` (read-only; works beside a running writer)."""
        return read_status(self.repo_root)

    # --- helpers ------------------------------------------------------------------------------------

    def _command_line_scope(self, write_scope: str | None) -> ScopeDeclaration | None:
        return None if write_scope is None else declared_scope(write_scope, self.repo_root, "command_line")

    def _declare(self, declaration: ScopeDeclaration | None) -> None:
        if declaration is not None:
            self.plan_manager.declare_write_scope(declaration.source, declaration.patterns)

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
