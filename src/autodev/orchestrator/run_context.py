"""``RunContext``: what one public call of the facade hands the phases, the steps and the dispatcher.

The facade (``Orchestrator``) builds one for each of ``plan``, ``execute``, ``run``, ``resume`` and
``clean``, inside the event loop of that call and under its run lock, and passes it down; nothing below the
facade sees the ``Orchestrator`` itself. The context is frozen: which plan manager, git repository, adapter
and locks a call works with cannot change half way. What it finds out lazily and once per call (the
project's environment, the gates, the preflight) is kept in a cache it owns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from autodev.adapters.base import PlatformAdapter
from autodev.agents.spec import AgentSpec
from autodev.config import AutodevConfig
from autodev.config.schema import Platform
from autodev.errors import AutodevError
from autodev.guardrails import GuardrailEnforcer, LoopDetector
from autodev.logging import get_logger
from autodev.orchestrator.checks import ChangeChecks
from autodev.orchestrator.context import project_context
from autodev.orchestrator.delegation_policy import DelegationPolicy, ExecuteEverything
from autodev.orchestrator.events import ProgressEvent, ProgressListener, deliver
from autodev.orchestrator.execute.parallelism import resolve_parallelism
from autodev.orchestrator.harnesses import Verifier, harness_for, platform_of
from autodev.orchestrator.integrity import AgentWatch
from autodev.orchestrator.preflight import Preflight, run_preflight
from autodev.orchestrator.provider_guard import ProviderGuard
from autodev.orchestrator.run_policy import RunPolicy
from autodev.orchestrator.run_router import RunRouter
from autodev.qa.environment import EnvironmentResolution, resolve_environment
from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task
from autodev.workspace.areas import Area, areas_for_files, notes_file, read_areas
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree_setup import WorktreePreparer

__all__ = ["RunContext"]

_log = get_logger("autodev.orchestrator")


@dataclass(slots=True)
class _Found:
    """What a call finds out once, on first use."""

    environment: EnvironmentResolution | None = None
    # Set while a caller finds the environment; set (and cleared) when it is found or the caller gave up.
    environment_search: anyio.Event | None = None
    checks: ChangeChecks | None = None
    # The gates with an area's test recipe as the test command, by that command.
    recipe_checks: dict[tuple[str, ...], ChangeChecks] = field(default_factory=dict)
    # The area maps, with the notes file and its modification time they were read at.
    areas: tuple[tuple[Path, int] | None, tuple[list[Area], str]] | None = None
    preflight: Preflight | None = None
    run_policy: RunPolicy | None = None
    prepared: set[tuple[str, Path]] = field(default_factory=set)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    """Everything the phases of one public call work with (see the module docstring)."""

    repo_root: Path
    paths: AutodevPaths
    config: AutodevConfig
    git: GitRepo
    session_id: str
    platform_name: Platform
    adapter: PlatformAdapter
    registry: Mapping[str, AgentSpec]
    # The platform of the roles that only read, when it is not ``adapter`` (``read_only_platform``).
    read_only_adapter: PlatformAdapter | None = None
    # The reviewer's platform when it is another family than the developer's (``completion.cross_family``);
    # shared with the facade, which drops one found on PATH that fails its health check.
    verifier: Verifier = field(default_factory=Verifier)
    # With nothing left but tasks waiting for an approval, wait for the answer (``--wait``) or pause.
    wait_for_approval: bool = False
    # Build on a checkout behind its base without asking (``--stale-base-ok``).
    stale_base_ok: bool = False
    plan_manager: PlanManager
    guardrails: GuardrailEnforcer
    knowledge: KnowledgeStore
    agent_watch: AgentWatch
    loop_detector: LoopDetector
    listener: ProgressListener | None = None
    disable_impl_tournament: bool = False
    # Asked before every agent call (``autodev.orchestrator.delegation_policy``).
    delegation_policy: DelegationPolicy = field(default_factory=ExecuteEverything)
    # At most ``max_concurrent_agents`` agent calls at once, however many tasks are in flight.
    agent_slots: anyio.CapacityLimiter
    # Back-off and the circuit breaker for the provider's refusals, shared by every task of the call.
    provider_guard: ProviderGuard
    # One lock for ``git worktree add/remove/list/prune``: concurrent ones read each other's half-written
    # admin files and fail.
    worktree_admin_lock: anyio.Lock = field(default_factory=anyio.Lock)
    # Held while AutoDev changes the main checkout (merging a parallel task), so that the check after an
    # agent call never looks at it half way through a merge.
    main_tree_lock: anyio.Lock = field(default_factory=anyio.Lock)
    _found: _Found = field(default_factory=_Found)

    def emit(self, event: ProgressEvent) -> None:
        """Tell the listener (a live display); a failing listener never stops the run."""
        deliver(self.listener, event)

    def adapter_for(self, role: str) -> PlatformAdapter:
        """The platform ``role``'s calls go to: the verifier for a verifying role, the read-only one for a
        role that may not write, when the run has them; else the run's."""
        return harness_for(self.registry, self.adapter, self.read_only_adapter, role, self.verifier.adapter)

    @property
    def harnesses(self) -> tuple[PlatformAdapter, ...]:
        """Every platform the run calls: its own, then the read-only roles' and the verifier's when they
        are others."""
        found = [self.adapter]
        for other in (self.read_only_adapter, self.verifier.adapter):
            if other is not None and all(other is not known for known in found):
                found.append(other)
        return tuple(found)

    def platform_for(self, role: str) -> Platform:
        """The name of ``adapter_for(role)``'s platform (model tiers resolve per platform)."""
        return platform_of(self.adapter_for(role), self.platform_name)

    def adapter_named(self, name: str) -> PlatformAdapter:
        """The run's platform called ``name`` (one of ``harnesses``: an autonomous route's)."""
        return next(adapter for adapter in self.harnesses if adapter.name == name)

    async def prepare_workspace(self, cwd: Path, adapter: PlatformAdapter | None = None) -> None:
        """Let ``adapter`` (the run's by default) prepare ``cwd`` for its agents
        (``PlatformAdapter.init_workspace``), once per platform, directory and call: before the first agent
        works there."""
        adapter = adapter or self.adapter
        key = (adapter.name, cwd)
        if key not in self._found.prepared:
            await adapter.init_workspace(cwd, list(self.registry.values()))
            self._found.prepared.add(key)

    async def project_environment(self) -> EnvironmentResolution:
        """The project's environment (``autodev.qa.environment``), found once per call: a caller that comes
        while another finds it waits for that answer (and asks itself if that caller gave up)."""
        found = self._found
        while found.environment is None:
            if found.environment_search is not None:
                await found.environment_search.wait()
                continue
            found.environment_search = search = anyio.Event()
            try:
                resolution = await resolve_environment(self.repo_root, self.config.environment)
                found.environment = resolution
            finally:
                found.environment_search = None
                search.set()
            _log.info(
                "orchestrator.environment",
                chosen=resolution.environment.summary() if resolution.environment else None,
                problem=resolution.problem,
            )
        return found.environment

    async def find_environment_early(self) -> None:
        """``project_environment()``, started beside a command's first checks by a command that will need
        it: the probe starts the project's interpreter (over 100 ms through a version manager's shim) and
        needs nothing those checks find. A failure is left for the caller that needs the answer, which asks
        again and meets it itself."""
        try:
            await self.project_environment()
        except Exception as exc:
            _log.debug("orchestrator.environment_early_failed", error=str(exc))

    @property
    def worktree_preparer(self) -> WorktreePreparer:
        """The repository's worktree setup, for every worktree the run makes (tasks, pool, baseline)."""
        resolution = self._found.environment
        environment = resolution.environment if resolution is not None else None
        return WorktreePreparer(
            self.repo_root,
            self.config.worktree_setup,
            env=environment.env if environment is not None else None,
            children_dir=self.paths.children_dir,
        )

    async def change_checks(self, test_command: tuple[str, ...] | None = None) -> ChangeChecks:
        """The gates of this call, in the project's environment, judged against each task's base.

        ``test_command``: an area's test recipe, run as the test gate's command when the configuration
        names none (``qa_gates.test.command`` wins); its baselines are its own, as its key differs.
        """
        if test_command is not None and self.config.qa_gates.test.command is None:
            checks = self._found.recipe_checks.get(test_command)
            if checks is None:
                test = self.config.qa_gates.test.model_copy(update={"command": list(test_command)})
                gates = self.config.qa_gates.model_copy(update={"test": test})
                checks = await self._new_checks(self.config.model_copy(update={"qa_gates": gates}))
                self._found.recipe_checks[test_command] = checks
            return checks
        if self._found.checks is None:
            self._found.checks = await self._new_checks(self.config)
        return self._found.checks

    async def _new_checks(self, config: AutodevConfig) -> ChangeChecks:
        resolution = await self.project_environment()
        return ChangeChecks(
            paths=self.paths,
            config=config,
            git=self.git,
            environment=resolution.environment,
            preparer=self.worktree_preparer,
            admin_lock=self.worktree_admin_lock,
        )

    async def close_checks(self) -> None:
        """Remove what the gates of this call left (their baseline worktrees)."""
        for checks in [*self._found.recipe_checks.values(), await self.change_checks()]:
            await checks.close()

    @property
    def run_policy(self) -> RunPolicy:
        """The run's delegation policy over its ledger (``autodev.orchestrator.run_policy``)."""
        if self._found.run_policy is None:
            self._found.run_policy = RunPolicy(
                self.plan_manager,
                self.config.policy,
                self.registry,
                self.repo_root,
                self._family,
                resumes_sessions=self.adapter.resumes_sessions,
                harness_for=self.adapter_for,
                router=None
                if self.config.router.mode == "off"
                else RunRouter(
                    self.config,
                    self.registry,
                    self.plan_manager,
                    self.harnesses,
                    self.adapter_for,
                    refusing=self.provider_guard.refusing,
                ),
            )
        return self._found.run_policy

    def _family(self, task: Task) -> str:
        """A task's family for the policy: the first area map holding its files, else the repository."""
        areas, _ = self.area_maps()
        found = areas_for_files(areas, task.files)
        return found[0].name if found else "repository"

    def area_maps(self) -> tuple[list[Area], str]:
        """The area maps of the project's notes file and its name (none when there is no notes file, no
        ``## Areas`` section, or the file cannot be read: the maps only help). Read again only when the
        file changed, as a refresh task's landing changes it."""
        path = notes_file(self.repo_root, self.config.areas)
        try:
            stamp = (path, path.stat().st_mtime_ns) if path is not None else None
        except OSError:
            stamp = None
        cached = self._found.areas
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found: tuple[list[Area], str] = ([], "")
        if stamp is not None and path is not None:
            try:
                found = (read_areas(path), path.name)
            except AutodevError as exc:
                _log.warning("orchestrator.areas_unreadable", path=str(path), error=exc.message)
        self._found.areas = (stamp, found)
        return found

    def test_recipe(self, files: Sequence[str]) -> tuple[str, ...] | None:
        """The test recipe of the first area map (in file order) holding one of ``files``, as a command."""
        areas, _ = self.area_maps()
        for area in areas_for_files(areas, files):
            argv = area.test_argv()
            if argv is not None:
                return argv
        return None

    async def preflight(self) -> Preflight:
        """Check, before any paid call, that the gates can do their work (``autodev.orchestrator.preflight``);
        once per call."""
        if self._found.preflight is None:
            resolution = await self.project_environment()
            if resolution.environment is not None:
                self.emit(ProgressEvent("note", f"project environment: {resolution.environment.summary()}"))
            isolated = resolve_parallelism(self.config, *self.harnesses).isolated
            self._found.preflight = await run_preflight(
                await self.change_checks(), self.git, resolution, isolated=isolated
            )
        return self._found.preflight

    async def project_block(self) -> str:
        """What every task's roles are told about the project (``autodev.orchestrator.context``)."""
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
