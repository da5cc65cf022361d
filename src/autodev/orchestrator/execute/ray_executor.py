"""``executor = "ray"``: each task's steps run as a Ray task on a cluster's node; this process keeps the
ledger and lands every change.

**On the node.** The Ray task clones the task's base commit from the node's clone cache (a bare repository
the node's tasks share, which asks the head for a bundle of only the commits it lacks), restores the task's
working state when the head holds one (a resumed or retried task), and runs the task's flow from its
recorded step (developer → gates → reviewer → test engineer → tournament) with the node's own agent CLIs,
credentials and QA tools, until the task is ready to merge or terminal. Its plan state is a
``RelayedPlanManager`` (``autodev.state.relay``): every change the flow makes is a call the head runs on the
run's ledger, under its lock, in order; each status change carries the task's working state as a bundle
(``autodev.workspace.bundles``), so the head holds the files of every step it recorded.

**On the head.** Workers reach the head through a mailbox actor: they ask (a ledger call, their seed) and
wait; the head takes the requests and answers them. When a task's flow is ready to merge, the head restores
its working state in the worktree the dispatcher opened for it and runs the merge step exactly as the local
executor does (the same fast-forward, conflict handling and commit). A conflict sends the task back to the
developer on a new base, and the next Ray task continues from there.

**Faults.** A worker process or node that dies mid-task: Ray runs the task again (``ray.max_retries``);
the new worker seeds from the ledger and continues from the last step it recorded, with that step's files.
The head killed: the workers' calls fail and they stop; ``autodev resume`` starts afresh on the cluster,
and the ledger says what is left (a change recorded ready to merge is landed once). A cluster that cannot
be reached stops the run before any agent call (``ExecutorUnreachableError``).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.registry import create_adapter
from autodev.agents.spec import AgentSpec
from autodev.config.schema import AutodevConfig, RayExecutorSettings
from autodev.errors import AutodevError, ConfigError
from autodev.guardrails import GuardrailEnforcer, LoopDetector
from autodev.logging import get_logger
from autodev.orchestrator.delegation_policy import DelegationPolicy
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.node_scratch import scratch_clone, sweep
from autodev.orchestrator.execute.task_flow import TaskContext, execute_task
from autodev.orchestrator.harnesses import Verifier
from autodev.orchestrator.integrity import AgentWatch
from autodev.orchestrator.provider_guard import ProviderGuard
from autodev.orchestrator.run_context import RunContext
from autodev.state.knowledge import KNOWLEDGE_FILE_NAME, KnowledgeStore, Lesson
from autodev.state.paths import AutodevPaths, ensure_state_dir
from autodev.state.plan_manager import PlanState
from autodev.state.relay import LedgerCall, LedgerReply, RelayedPlanManager, serve_call
from autodev.state.schemas import Task
from autodev.state.vocabulary import TERMINAL_STATUSES
from autodev.workspace.bundles import (
    CloneCache,
    bundle_refs,
    existing_commits,
    keep_working_state,
    restore_working_state,
    unbundle,
    working_ref,
    working_state,
    working_tree,
)
from autodev.workspace.git import GitRepo
from autodev.workspace.integration import TaskWorkspace, park_change
from autodev.workspace.worktree_setup import WorktreePreparer

if TYPE_CHECKING:
    from autodev.config.schema import Platform

__all__ = ["ExecutorUnreachableError", "RayExecutor", "RemoteFlowError"]

_log = get_logger("autodev.ray_executor")

_INSTALL_HINT = "pip install 'autodev[ray]'"
_PROBE_TIMEOUT_S = 5.0
# How long the end of a run waits for the nodes' sweeps (a node that does not answer is left to its next).
_SWEEP_WAIT_S = 30.0
# The status a node's flow stops at: the merge is the head's.
_READY_TO_MERGE = "tournamented"


class ExecutorUnreachableError(AutodevError):
    """The Ray cluster of ``executor = "ray"`` cannot be reached (exit 2, before any agent call)."""


class RemoteFlowError(AutodevError):
    """A task's flow failed on its node for a reason that is not the task's (its worker died more often
    than ``ray.max_retries`` allows, AutoDev failed there): the task is blocked with this message."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"executor = ray needs Ray, which is not installed: {_INSTALL_HINT}", key="executor"
        ) from exc
    return ray


# --- what travels -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _AdapterRecipe:
    """How a node gets one of the run's platforms: the agent CLIs are built there, from the node's own
    installation and credentials; a scripted platform travels as it is (its script is its agent)."""

    platform: str
    shipped: PlatformAdapter | None = None

    @classmethod
    def of(cls, adapter: PlatformAdapter) -> _AdapterRecipe:
        if adapter.name == "inline":
            raise ConfigError(
                "executor = ray cannot run the inline platform (its answers are written on this machine); "
                "choose an agent CLI or set executor = local",
                key="executor",
            )
        return cls(adapter.name, adapter if adapter.name == "scripted" else None)

    def build(self, root: Path, config: AutodevConfig) -> PlatformAdapter:
        if self.shipped is not None:
            return self.shipped
        return create_adapter(self.platform, repo_root=root, config=config)


@dataclass(frozen=True, slots=True)
class _Job:
    """One task's flow as a Ray task: what the node needs besides the base bundle."""

    task_id: str
    base_commit: str
    # The repository's name for the nodes' clone caches: its first commit.
    repository: str
    config: AutodevConfig
    session_id: str
    platform: Platform
    adapter: _AdapterRecipe
    read_only: _AdapterRecipe | None
    verifier: _AdapterRecipe | None
    verifier_reason: str
    registry: Mapping[str, AgentSpec]
    disable_impl_tournament: bool
    delegation_policy: DelegationPolicy
    project_block: str
    results_block: str
    resumed: bool
    mailbox: Any


@dataclass(frozen=True, slots=True)
class _SeedRequest:
    task_id: str


@dataclass(frozen=True, slots=True)
class _BaseRequest:
    """A node's clone cache lacks ``base``: the commits it lacks, less what ``haves`` (commits it holds)
    reach."""

    task_id: str
    base: str
    haves: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Seed:
    """The head's state as of ledger entry ``seq``, the task's working state (a bundle and its commit),
    the task's evidence files by their recorded paths, and the head's knowledge store (its file)."""

    state: bytes  # ``PlanManager.pickled_state``
    seq: int
    working: bytes | None = None
    working_commit: str | None = None
    evidence: Mapping[str, bytes] = field(default_factory=dict)
    knowledge: bytes | None = None


@dataclass(frozen=True, slots=True)
class _Learned:
    """Lessons an agent taught on a node (``LESSON:`` lines), for the head's knowledge store."""

    text: str
    role: str
    task_id: str


@dataclass(frozen=True, slots=True)
class _Failure:
    """What a node's flow ended with instead of an outcome: the head blocks the task with it."""

    message: str


@dataclass(frozen=True, slots=True)
class _Outcome:
    node: str
    status: str
    relayed: int
    failure: str | None = None


# --- the mailbox: workers ask, the head answers ------------------------------------------------------


class _Mailbox:
    """A Ray actor between the workers and the head (the head is Ray's driver, which workers cannot call).
    A worker's ``ask`` waits until the head ``answer``s it; ``tell`` expects no answer (progress events)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._asked = 0

    async def ask(self, request: Any) -> Any:
        self._asked += 1
        key = self._asked
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[key] = answer
        await self._queue.put((key, request))
        try:
            return await answer
        finally:
            self._waiting.pop(key, None)

    async def tell(self, request: Any) -> None:
        await self._queue.put((0, request))

    async def take(self) -> list[tuple[int, Any]]:
        """The requests waiting, in the order they came; at least one."""
        taken = [await self._queue.get()]
        while not self._queue.empty():
            taken.append(self._queue.get_nowait())
        return taken

    async def answer(self, key: int, reply: Any) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None and not waiting.done():
            waiting.set_result(reply)


# --- on the node ---------------------------------------------------------------------------------------


class _WorkingStateSender:
    """The task's working state as a bundle for the head, or None when its files did not change since the
    last one sent (asked before every status change the replica relays)."""

    def __init__(self, root: Path, base: str, task_id: str, sent_tree: str | None) -> None:
        self.root, self.base, self.task_id, self.sent_tree = root, base, task_id, sent_tree
        # Kept between status changes (the clone is the task's alone): git looks only at what changed.
        self.index = root / ".git" / "autodev-working.index"

    def __call__(self) -> bytes | None:
        tree = working_tree(self.root, self.base, index=self.index)
        if tree == self.sent_tree:
            return None
        keep_working_state(self.root, self.base, self.task_id, tree)
        self.sent_tree = tree
        return bundle_refs(self.root, [working_ref(self.task_id)], exclude=[self.base])


class _SharedKnowledge(KnowledgeStore):
    """A node's knowledge store: it starts from the head's lessons (the seed), and what an agent teaches
    here goes to the head's store as well, for every later task wherever it runs."""

    def __init__(self, paths: AutodevPaths, mailbox: Any) -> None:
        super().__init__(paths)
        self._mailbox = mailbox

    def add_from_text(self, text: str, *, role: str, task_id: str) -> list[Lesson]:
        learned = super().add_from_text(text, role=role, task_id=task_id)
        if learned:
            lines = "\n".join(f"LESSON: {lesson.text}" for lesson in learned)
            self._mailbox.tell.remote(_Learned(lines, role, task_id))
        return learned


class _NodeAgentWatch(AgentWatch):
    """The checks after each agent call, on a node. The node's clone is the task's base, not the branch:
    commits other tasks landed since are on the head's branch only, where the head checks them (at every
    start, and after every agent call it makes). Everything else (refs moved, git's control files, HEAD
    of the clone) is checked here as it is locally."""

    async def check_landed(self, commits: Mapping[str, str], *, tip: str | None = None) -> None:
        return None


def _inside_state_dir(recorded: str) -> bool:
    path = PurePosixPath(recorded)
    return not path.is_absolute() and ".." not in path.parts and path.parts[:1] == (".autodev",)


def _worker_context(job: _Job, root: Path, manager: RelayedPlanManager, mailbox: Any) -> RunContext:
    """The run's context on a node: the head's settings and platforms, the clone as the repository, the
    replica as the plan state; progress goes to the head's display."""
    paths = AutodevPaths(root)
    git = GitRepo(root)
    config = job.config
    verifier_adapter = job.verifier.build(root, config) if job.verifier is not None else None

    def listener(event: ProgressEvent) -> None:
        mailbox.tell.remote(event)

    return RunContext(
        repo_root=root,
        paths=paths,
        config=config,
        git=git,
        session_id=job.session_id,
        platform_name=job.platform,
        adapter=job.adapter.build(root, config),
        read_only_adapter=job.read_only.build(root, config) if job.read_only is not None else None,
        verifier=Verifier(verifier_adapter, job.verifier_reason),
        registry=job.registry,
        plan_manager=manager,
        guardrails=GuardrailEnforcer(config.guardrails, manager),
        knowledge=_SharedKnowledge(paths, mailbox),
        agent_watch=_NodeAgentWatch(git, paths.config, calls_dir=paths.calls_dir, keep_records=0),
        loop_detector=LoopDetector(config.guardrails.loop_detection_threshold),
        listener=listener,
        disable_impl_tournament=job.disable_impl_tournament,
        delegation_policy=job.delegation_policy,
        agent_slots=anyio.CapacityLimiter(config.max_concurrent_agents),
        provider_guard=ProviderGuard(config.provider),
    )


async def _set_up_clone(session: RunContext, root: Path) -> None:
    """The repository's worktree setup command, in the node's fresh clone and the project's environment
    there. The ignored files ``copy_ignored`` names live on the head's checkout, out of a node's reach:
    on a node, the command is what makes them."""
    setup = session.config.worktree_setup
    if setup.command is None:
        return
    resolution = await session.project_environment()
    environment = resolution.environment
    preparer = WorktreePreparer(
        root,
        setup.model_copy(update={"copy_ignored": []}),
        env=environment.env if environment is not None else None,
        children_dir=session.paths.children_dir,
    )
    await preparer.prepare(root, fresh=True)


def _ready_to_merge(task: Task) -> bool:
    return task.status == _READY_TO_MERGE


async def _flow_on_node(job: _Job, root: Path, node: str) -> _Outcome:
    ray = _ray()
    mailbox = job.mailbox
    seed: _Seed | _Failure = ray.get(mailbox.ask.remote(_SeedRequest(job.task_id)))
    if isinstance(seed, _Failure):
        return _Outcome(node, "unknown", 0, seed.message)
    state: PlanState = pickle.loads(seed.state)  # the head's, through Ray, which unpickles it anyway
    plan = state.plan
    task = next((task for task in plan.iter_tasks() if task.id == job.task_id), None) if plan else None
    if task is None or task.base_commit != job.base_commit:
        return _Outcome(node, "unknown", 0, f"task {job.task_id} is no longer at base {job.base_commit[:10]}")
    sent_tree: str | None = None
    if seed.working is not None and seed.working_commit is not None:
        await anyio.to_thread.run_sync(unbundle, root, seed.working)
        restore = partial(restore_working_state, root, job.base_commit, seed.working_commit, job.task_id)
        await anyio.to_thread.run_sync(restore)
        sent_tree = (await GitRepo(root).tree_of(seed.working_commit)) or None
    for recorded, data in seed.evidence.items():
        if _inside_state_dir(recorded):
            target = root / recorded
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    if seed.knowledge is not None:
        (AutodevPaths(root).state_dir / KNOWLEDGE_FILE_NAME).write_bytes(seed.knowledge)

    def relay(call: LedgerCall) -> LedgerReply:
        reply: LedgerReply = ray.get(mailbox.ask.remote(call))
        return reply

    manager = RelayedPlanManager(
        root, job.task_id, relay, attach=_WorkingStateSender(root, job.base_commit, job.task_id, sent_tree)
    )
    manager.seed(state, seed.seq)
    manager.record_node(job.task_id, node)
    session = _worker_context(job, root, manager, mailbox)
    session.emit(ProgressEvent("note", f"on node {node}", job.task_id))
    await _set_up_clone(session, root)
    context = TaskContext(
        workspace=TaskWorkspace(root, session.git, isolated=True),
        resumed=job.resumed or seed.working is not None,
        project_block=job.project_block,
        results_block=job.results_block,
    )
    try:
        await execute_task(session, job.task_id, context, until=_ready_to_merge)
    except BaseException:
        # The records a failing flow made still belong in the ledger; the flow's own error is the one
        # that counts.
        try:
            manager.flush()
        except Exception:
            _log.warning("ray_executor.records_lost", task_id=job.task_id, exc_info=True)
        raise
    else:
        manager.flush()
    finally:
        with anyio.CancelScope(shield=True):
            await session.close_checks()
    return _Outcome(node, manager.get_task(job.task_id).status, manager.relayed_calls)


class _BaseRefusedError(Exception):
    """The head could not send a node the base it asked for; ``reason`` is the head's message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _run_on_node(job: _Job) -> _Outcome:
    """The Ray task: a clone of the base in a scratch directory (its objects borrowed from the node's
    clone cache, which asks the head for the commits it lacks), the flow in it, the directory removed."""
    ray = _ray()
    # The host's name to read, the node's id to tell two nodes of one host apart.
    node = f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"
    try:
        cache = CloneCache(_cache_directory(job.config.ray), job.repository)
        cache.ensure()

        def fetch_base(haves: list[str]) -> bytes:
            asked = _BaseRequest(job.task_id, job.base_commit, tuple(haves))
            bundle: bytes | _Failure = ray.get(job.mailbox.ask.remote(asked))
            if isinstance(bundle, _Failure):
                raise _BaseRefusedError(bundle.message)
            return bundle

        try:
            cache.obtain(job.base_commit, fetch_base)
        except _BaseRefusedError as refused:
            return _Outcome(node, "unknown", 0, refused.reason)
        scratch_root = _scratch_root(job.config.ray)
        sweep(scratch_root)  # what a worker Ray killed on this node left running (a retry of this task's)
        with scratch_clone(scratch_root, job.task_id) as root:
            cache.clone(root, job.base_commit)
            ensure_state_dir(AutodevPaths(root))
            return anyio.run(_flow_on_node, job, root, node)
    except AutodevError as exc:
        return _Outcome(node, "unknown", 0, exc.message)


def _cache_directory(settings: RayExecutorSettings) -> Path:
    if settings.clone_cache_dir is not None:
        return Path(settings.clone_cache_dir).expanduser()
    return Path(tempfile.gettempdir()) / "autodev-clone-cache"


def _scratch_root(settings: RayExecutorSettings) -> Path:
    return _cache_directory(settings) / "scratch"


def _sweep_node(settings: RayExecutorSettings) -> tuple[str, list[int]]:
    """A Ray task pinned to one node: ``sweep`` its scratch root; the node and the pids stopped."""
    return socket.gethostname(), sweep(_scratch_root(settings))


# --- on the head ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Serving:
    mailbox: Any
    # The repository's name for the nodes' clone caches (``_repository_key``).
    repository: str | None = None
    # The context of each task in flight here: the dispatcher is told at once when a node's attempt fails.
    contexts: dict[str, TaskContext] = field(default_factory=dict)


class RayExecutor:
    """Runs each task's steps on a Ray cluster and lands its change here (see the module docstring)."""

    def __init__(self, settings: RayExecutorSettings) -> None:
        self.settings = settings
        # Which node ran each task's flow last (``autodev status`` and the live view show it).
        self.nodes: dict[str, str] = {}
        # The workers' ledger calls this head answered, by method, and the seconds it spent running them.
        self.calls_served: Counter[str] = Counter()
        # The ledger calls the workers waited for: each carried the records deferred before it.
        self.round_trips = 0
        self.ledger_seconds = 0.0
        # The seconds this head spent landing the nodes' changes (restore, merge step, commit).
        self.merge_seconds = 0.0
        # The bundles this head sent to the nodes' clone caches, in bytes.
        self.bundle_bytes: list[int] = []
        # Processes killed workers left running on the nodes, stopped by the sweeps at the run's start and
        # end (those stopped before a task on its node are in the node's log).
        self.orphans_stopped: list[int] = []
        self._serving: _Serving | None = None
        self._started_here = False

    def check_platforms(self, config: AutodevConfig, *adapters: PlatformAdapter | None) -> None:
        """Refuse, before anything starts, what nodes cannot do: the inline platform, and changes that do
        not land as commits (``auto_commit = false``)."""
        if not config.auto_commit:
            raise ConfigError(
                "executor = ray lands each task's change as a commit; set auto_commit = true or "
                "executor = local",
                key="executor",
            )
        for adapter in adapters:
            if adapter is not None:
                _AdapterRecipe.of(adapter)

    def connect(self) -> None:
        """Join the cluster (or start a local one) now: an unreachable cluster stops the run before any
        agent call."""
        ray = _ray()
        if ray.is_initialized():
            return
        address = self.settings.address
        options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address == "local":
            options |= {"address": "local", "include_dashboard": False}
        else:
            options["address"] = address
            _probe(address if address != "auto" else os.environ.get("RAY_ADDRESS", ""))
        try:
            ray.init(**options)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... for one cause
            raise _unreachable(address, " ".join(str(exc).split())[:300] or type(exc).__name__) from exc
        self._started_here = True

    @asynccontextmanager
    async def serving(self, session: RunContext) -> AsyncIterator[None]:
        """Connected, with the mailbox up and its requests answered, while the dispatcher runs."""
        ray = _ray()
        self.connect()
        mailbox = ray.remote(num_cpus=0)(_Mailbox).remote()
        self._serving = _Serving(mailbox)
        # What killed workers of an earlier run left on the nodes stops now, alongside this run's start.
        starting = self._sweep_nodes()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._answer_requests, session, mailbox)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            self._serving = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(_SWEEP_WAIT_S):
                for sweeping in [*starting, *self._sweep_nodes()]:
                    await self._note_swept(sweeping)
            ray.kill(mailbox)
            if self._started_here:
                ray.shutdown()
                self._started_here = False

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        if not context.workspace.isolated:
            # A task a local run left mid-flight in the main checkout finishes there, here: its work is in
            # that checkout, which a node's working state must never be restored over.
            await execute_task(session, task_id, context)
            return session.plan_manager.get_task(task_id)
        serving = self._require_serving()
        serving.contexts[task_id] = context
        try:
            await self._continue_from_the_worktree(session, session.plan_manager.get_task(task_id), context)
            return await self._run_until_done(session, task_id, context)
        finally:
            serving.contexts.pop(task_id, None)

    async def _run_until_done(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        manager = session.plan_manager
        while True:
            task = manager.get_task(task_id)
            if task.status in TERMINAL_STATUSES or manager.adoption_pending(task_id):
                return task
            if task.status == _READY_TO_MERGE:
                started = time.perf_counter()
                await self._merge(session, task, context)
                self.merge_seconds += time.perf_counter() - started
            else:
                await self._run_remotely(session, task, context)
                after = manager.get_task(task_id)
                if after.status == "blocked":
                    await self._park(session, after, context)
                if (after.status, after.retry_count, after.base_commit) == (
                    task.status,
                    task.retry_count,
                    task.base_commit,
                ):
                    raise RemoteFlowError(f"task {task_id}'s flow on its node recorded no step")

    # --- one task ----------------------------------------------------------------------------------

    async def _run_remotely(self, session: RunContext, task: Task, context: TaskContext) -> None:
        ray = _ray()
        serving = self._require_serving()
        assert task.base_commit is not None
        job = _Job(
            task_id=task.id,
            base_commit=task.base_commit,
            repository=await self._repository_key(session, serving),
            config=session.config,
            session_id=session.session_id,
            platform=session.platform_name,
            adapter=_AdapterRecipe.of(session.adapter),
            read_only=_AdapterRecipe.of(session.read_only_adapter) if session.read_only_adapter else None,
            verifier=_AdapterRecipe.of(session.verifier.adapter) if session.verifier.adapter else None,
            verifier_reason=session.verifier.reason,
            registry=dict(session.registry),
            disable_impl_tournament=session.disable_impl_tournament,
            delegation_policy=session.delegation_policy,
            project_block=context.project_block,
            results_block=context.results_block,
            resumed=context.resumed,
            mailbox=serving.mailbox,
        )
        settings = self.settings
        options: dict[str, Any] = {
            "num_cpus": settings.num_cpus,
            "max_retries": settings.max_retries,
            "retry_exceptions": False,
        }
        if settings.resources:
            options["resources"] = dict(settings.resources)
        if settings.memory_mb is not None:
            options["memory"] = settings.memory_mb * 1024 * 1024
        pending = ray.remote(_run_on_node).options(**options).remote(job)
        try:
            outcome: _Outcome = await pending
        except ray.exceptions.RayError as exc:
            detail = " ".join(str(exc).split())[:300]
            raise RemoteFlowError(f"task {task.id}'s flow failed on the cluster: {detail}") from exc
        finally:
            if not _finished(ray, pending):
                ray.cancel(pending, force=True)
        self.nodes[task.id] = outcome.node
        _log.info(
            "ray_executor.flow_done",
            task_id=task.id,
            node=outcome.node,
            status=outcome.status,
            relayed_calls=outcome.relayed,
        )
        if outcome.failure is not None:
            raise RemoteFlowError(f"task {task.id} on node {outcome.node[:12]}: {outcome.failure}")

    async def _merge(self, session: RunContext, task: Task, context: TaskContext) -> None:
        """The merge step here, in the task's worktree, from the working state its node recorded."""
        assert task.base_commit is not None
        commit = await session.git.resolve(working_ref(task.id))
        if commit is None:
            raise RemoteFlowError(f"task {task.id} is ready to merge but its node's files never arrived")
        root = context.workspace.root
        await anyio.to_thread.run_sync(restore_working_state, root, task.base_commit, commit, task.id)
        context.workspace.git.unwatch()
        await execute_task(session, task.id, context, until=lambda now: now.status != _READY_TO_MERGE)
        after = session.plan_manager.get_task(task.id)
        if after.status == "complete":
            await session.git.delete_ref(working_ref(task.id))  # landed: nothing continues from it
        elif after.status not in TERMINAL_STATUSES and after.base_commit is not None:
            # Sent back (a conflict): the next node starts from the files as the merge left them.
            _, moved = await anyio.to_thread.run_sync(working_state, root, after.base_commit, task.id)
            await session.git.set_ref(working_ref(task.id), moved)

    async def _continue_from_the_worktree(
        self, session: RunContext, task: Task, context: TaskContext
    ) -> None:
        """A task whose worktree here holds a change its node has not got (a blocked task's parked change,
        put back by ``autodev retry``) starts its node from that change: it becomes the working state."""
        base = task.base_commit
        if base is None or task.status in TERMINAL_STATUSES or task.status == _READY_TO_MERGE:
            return
        if await self._working_state_on(session, task.id, base) is not None:
            return  # a node's work on this base, newer than anything here
        if await context.workspace.git.is_clean():
            return
        _, kept = await anyio.to_thread.run_sync(working_state, context.workspace.root, base, task.id)
        await session.git.set_ref(working_ref(task.id), kept)

    async def _park(self, session: RunContext, task: Task, context: TaskContext) -> None:
        """A task blocked on its node keeps its last change here, as a local one does (``park_change``:
        ``autodev retry`` continues from it): the node's last working state, put into the task's worktree
        and parked from there."""
        base = task.base_commit
        commit = await self._working_state_on(session, task.id, base) if base is not None else None
        if base is None or commit is None:
            return
        await anyio.to_thread.run_sync(restore_working_state, context.workspace.root, base, commit, task.id)
        context.workspace.git.unwatch()
        # The working state stays too: the retry's node continues from it when the base is the same, and
        # its earlier states hold the trees the task's recorded steps refer to.
        kept = await park_change(context.workspace, task, session.git)
        if kept is not None:
            note = f"its last change on node {self.nodes.get(task.id, '?')} is kept: git show {kept[:10]}"
            session.emit(ProgressEvent("note", f"{note} (autodev retry {task.id})", task.id))

    async def _working_state_on(self, session: RunContext, task_id: str, base: str) -> str | None:
        """The task's working state kept here, when it was made on ``base``."""
        commit = await session.git.resolve(working_ref(task_id))
        if commit is None or await session.git.resolve(f"{commit}^") != base:
            return None
        return commit

    async def _base_bundle(self, session: RunContext, request: _BaseRequest) -> bytes:
        """The commits a node's clone cache lacks to hold ``request.base``: a bundle of the base less
        what the commits it has (those this repository knows) reach."""
        root = session.repo_root
        known = await anyio.to_thread.run_sync(existing_commits, root, request.haves)
        ref = f"refs/autodev/ray/{request.task_id}"
        await session.git.set_ref(ref, request.base)
        try:
            data = await anyio.to_thread.run_sync(partial(bundle_refs, root, [ref], exclude=known))
        finally:
            await session.git.delete_ref(ref)
        self.bundle_bytes.append(len(data))
        return data

    async def _repository_key(self, session: RunContext, serving: _Serving) -> str:
        if serving.repository is None:
            roots = await session.git.query("rev-list", "--max-parents=0", "HEAD")
            serving.repository = min((roots or "unborn").split())
        return serving.repository

    def _sweep_nodes(self) -> list[Any]:
        """A sweep of its scratch root on every live node (``node_scratch``); their pending results."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        sweeping = []
        for node in ray.nodes():
            if node.get("Alive"):
                strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                task = ray.remote(_sweep_node).options(num_cpus=0, scheduling_strategy=strategy)
                sweeping.append(task.remote(self.settings))
        return sweeping

    async def _note_swept(self, sweeping: Any) -> None:
        try:
            host, stopped = await sweeping
        except Exception as exc:  # a node lost meanwhile: its processes are beyond reach anyway
            _log.warning("ray_executor.sweep_failed", error=" ".join(str(exc).split())[:300])
            return
        if stopped:
            self.orphans_stopped += stopped
            _log.warning("ray_executor.orphans_stopped", node=host, pids=stopped)

    def _require_serving(self) -> _Serving:
        if self._serving is None:
            raise RemoteFlowError("the Ray executor ran a task outside its serving() block")
        return self._serving

    # --- answering the workers ---------------------------------------------------------------------

    async def _answer_requests(self, session: RunContext, mailbox: Any) -> None:
        async with anyio.create_task_group() as group:
            while True:
                taken: list[tuple[int, Any]] = await mailbox.take.remote()
                for key, request in taken:
                    if isinstance(request, ProgressEvent):
                        session.emit(request)
                    elif isinstance(request, _Learned):
                        session.knowledge.add_from_text(
                            request.text, role=request.role, task_id=request.task_id
                        )
                    else:
                        group.start_soon(self._answer, session, mailbox, key, request)

    async def _answer(self, session: RunContext, mailbox: Any, key: int, request: Any) -> None:
        reply: Any
        try:
            if isinstance(request, _SeedRequest):
                reply = await self._seed(session, request.task_id)
            elif isinstance(request, _BaseRequest):
                reply = await self._base_bundle(session, request)
            elif isinstance(request, LedgerCall):
                if request.attachment is not None:
                    await self._keep_working_state(session, request.task_id, request.attachment)
                reply = self._serve(session, request)
            else:
                reply = _Failure(f"unknown request {type(request).__name__}")
        except Exception as exc:  # the worker waits for an answer: it gets the failure, the run goes on
            _log.exception("ray_executor.request_failed", request=type(request).__name__)
            message = exc.message if isinstance(exc, AutodevError) else f"{type(exc).__name__}: {exc}"
            reply = (
                LedgerReply(None, (), (request.method, type(exc).__name__, message))
                if isinstance(request, LedgerCall)
                else _Failure(message)
            )
        await mailbox.answer.remote(key, reply)

    def _serve(self, session: RunContext, call: LedgerCall) -> LedgerReply:
        manager = session.plan_manager
        before = manager.get_task(call.task_id)
        started = time.perf_counter()
        reply = serve_call(manager, call)
        self.ledger_seconds += time.perf_counter() - started
        self.round_trips += 1
        self.calls_served.update(step.method for step in (*call.before, call))
        after = manager.get_task(call.task_id)
        blocked = after.status == "blocked" and before.status != "blocked"
        failed = blocked or after.retry_count > before.retry_count
        context = self._serving.contexts.get(call.task_id) if self._serving is not None else None
        if failed and context is not None:
            context.on_change(call.task_id)  # a speculative child of this task may have to be rolled back
        return reply

    async def _keep_working_state(self, session: RunContext, task_id: str, data: bytes) -> None:
        refs = await anyio.to_thread.run_sync(unbundle, session.repo_root, data)
        commit = refs.get(working_ref(task_id))
        if commit is None:
            raise RemoteFlowError(f"task {task_id}'s node sent a working state without its ref")
        await session.git.set_ref(working_ref(task_id), commit)

    async def _seed(self, session: RunContext, task_id: str) -> _Seed:
        manager = session.plan_manager
        with manager.transaction():
            state, seq = manager.pickled_state(), manager.ledger_head.seq
        task = manager.get_task(task_id)
        working: bytes | None = None
        base = task.base_commit
        commit = await self._working_state_on(session, task_id, base) if base is not None else None
        if commit is not None and base is not None:
            bundle = partial(bundle_refs, session.repo_root, [working_ref(task_id)], exclude=[base])
            working = await anyio.to_thread.run_sync(bundle)
        evidence: dict[str, bytes] = {}
        for recorded in manager.evidence_for(task_id):
            path = session.repo_root / recorded.path
            if _inside_state_dir(recorded.path) and await anyio.Path(path).is_file():
                evidence[recorded.path] = await anyio.Path(path).read_bytes()
        knowledge_file = anyio.Path(session.knowledge.path)
        knowledge = await knowledge_file.read_bytes() if await knowledge_file.is_file() else None
        return _Seed(state, seq, working, commit if working is not None else None, evidence, knowledge)


def _unreachable(address: str, detail: str) -> ExecutorUnreachableError:
    return ExecutorUnreachableError(
        f"cannot reach the Ray cluster at {address!r}: {detail}; start it (`ray start --head`) or fix "
        "ray.address in .autodev/config.toml"
    )


def _probe(address: str) -> None:
    """Knock at a ``host:port`` address first: Ray itself retries an address nobody listens at for many
    minutes before it gives up."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise _unreachable(address, exc.strerror or str(exc) or type(exc).__name__) from exc


def _finished(ray: Any, pending: Any) -> bool:
    ready, _ = ray.wait([pending], timeout=0)
    return bool(ready)


def executor_for(config: AutodevConfig) -> RayExecutor | None:
    """The executor ``config`` asks for, when it is not the local one."""
    return RayExecutor(config.ray) if config.executor == "ray" else None
