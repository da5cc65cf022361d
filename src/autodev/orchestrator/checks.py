"""The QA checks a task's change gets: the gates in the project's environment, proven read-only, and judged
against the task's base commit.

``ChangeChecks.check`` runs the gates on a working copy (the main checkout or a task's worktree) with a
``GitTreeGuard`` (a gate that changes the tree is an error and the tree is put back), then moves every
finding the base commit has as well out of the way (``autodev.qa.baseline``):

- whole-tree gates (tests) are compared with a ``TreeBaseline`` of the base commit's tree: from the cache
  under ``.autodev/baseline/`` when any run of the same gates saw exactly that tree (the preflight's run at
  the start, or the last check of the task that produced the commit), else taken once in the baseline
  worktree, ``.autodev/baseline-worktree/base`` (prepared by the worktree setup like any task worktree,
  made when first needed and removed when the call ends);
- the build gate's import check is repeated in the baseline worktree for the modules that fail;
- syntax, lint and secretscan are run on the base versions of the changed files.

Every whole-tree run is remembered as the baseline of the tree it saw: a result is a fact about a tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from autodev.config.schema import AutodevConfig
from autodev.logging import get_logger
from autodev.qa.baseline import (
    BaselineStore,
    TreeBaseline,
    baseline_key,
    excuse,
    require_tests_like_base,
    require_tests_still_run,
    tree_baseline,
)
from autodev.qa.environment import ProjectEnvironment
from autodev.qa.gates import GateName, GateResult, GateRun, run_gate_suite, run_on_base_versions
from autodev.state.paths import AutodevPaths
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree import Worktree, WorktreeManager
from autodev.workspace.worktree_setup import WorktreePreparer

__all__ = ["BASE_WORKTREE_NAME", "ChangeChecks", "GitTreeGuard", "whole_tree"]

_log = get_logger("autodev.checks")
BASE_WORKTREE_NAME = "base"
_FILE_GATES: frozenset[GateName] = frozenset({"syntax", "lint", "secretscan"})
# The test results the base's tests can excuse or demand something of (``_judge_tests``).
_JUDGED_TEST_STATUSES = frozenset({"pass", "fail", "no_tests"})


class GitTreeGuard:
    """``TreeGuard`` over a git working copy: snapshots are tree ids written through a scratch index.

    ``current`` is the tree the copy holds now when the caller has just written it (``WorkingDiff.tree``,
    with nothing run in the copy since): the first snapshot is then that tree, without staging the copy
    again."""

    def __init__(self, git: GitRepo, *, current: str | None = None) -> None:
        self.git = git
        self._current = current

    async def snapshot(self) -> str:
        if self._current is not None:
            tree, self._current = self._current, None
            return tree
        return await self.git.snapshot_tree()

    async def changed_paths(self, before: str, after: str) -> list[str]:
        return await self.git.changed_between(before, after)

    async def restore(self, snapshot: str, paths: Sequence[str]) -> None:
        await self.git.restore_from_tree(snapshot, paths)


def _changed_tree(result: GateResult) -> bool:
    return bool(result.changed_files)


def whole_tree(result: GateResult) -> bool:
    """Whether a gate's result depends on the whole tree rather than on the files a change touched."""
    return result.gate == "test" or (result.gate == "build" and result.language not in (None, "python"))


class ChangeChecks:
    """The gates of one orchestrator session; see the module docstring."""

    def __init__(
        self,
        *,
        paths: AutodevPaths,
        config: AutodevConfig,
        git: GitRepo,
        environment: ProjectEnvironment | None,
        preparer: WorktreePreparer,
        admin_lock: anyio.Lock,
    ) -> None:
        self.paths = paths
        self.config = config
        self.git = git
        self.environment = environment
        self.key = baseline_key(config.qa_gates, environment)
        self.store = BaselineStore(paths.baseline_dir)
        self._base_worktrees = WorktreeManager(
            paths.repo_root,
            paths.baseline_worktree_dir,
            admin_lock=admin_lock,
            preparer=preparer,
            split_index_min_entries=config.worktree_split_index_min_files,
        )
        self._base_worktree: Worktree | None = None
        self._base_lock = anyio.Lock()

    # --- running the gates --------------------------------------------------------------------------

    async def run(
        self,
        root: Path,
        git: GitRepo,
        files: Sequence[str],
        *,
        only: Sequence[GateName] | None = None,
        tree: str | None = None,
    ) -> GateRun:
        """The gates on the working copy at ``root``, guarded, unjudged; whole-tree results remembered.
        ``tree``: the copy's tree as the caller has just written it (see ``GitTreeGuard``)."""
        run = await run_gate_suite(
            root,
            files,
            self.config.qa_gates,
            environment=self.environment,
            state_dir=self.paths.state_dir,
            guard=GitTreeGuard(git, current=tree),
            only=only,
            main_root=self.paths.repo_root,
        )
        if run.tree is not None:
            self._remember(run, taken_in=f"a check of {root}")
        return run

    def _remember(self, run: GateRun, *, taken_in: str) -> None:
        results = [result for result in run.results if whole_tree(result) and result.status != "skipped"]
        # A gate that changed the tree did not see the snapshot's tree: nothing to remember then.
        if run.tree is None or not results or any(_changed_tree(result) for result in run.results):
            return
        if self.store.load(run.tree, self.key) is None:
            self.store.save(
                tree_baseline(run.tree, self.key, results, taken_in=taken_in, environment=self.environment)
            )

    async def check(
        self,
        root: Path,
        git: GitRepo,
        base_commit: str,
        files: Sequence[str],
        *,
        only: Sequence[GateName] | None = None,
        tree: str | None = None,
    ) -> GateRun:
        """The gates on a change, every finding its base commit has too moved to ``preexisting``."""
        run = await self.run(root, git, files, only=only, tree=tree)
        judged = []
        for result in run.results:
            if result.gate == "test" and result.status in _JUDGED_TEST_STATUSES:
                # The whole change, not only the files of this step: a test the change edits anywhere is
                # the reviewer's to judge.
                change = await git.changed_between(base_commit, run.tree) if run.tree else files
                judged.append(await self._judge_tests(result, base_commit, change))
            elif result.gate == "test":
                # Skipped or unable to run: nothing the base's tests could excuse or demand, so the base
                # is not looked at (its baseline would cost a checkout and a gate run for nothing).
                judged.append(result)
            else:
                judged.append(await self._judge(result, base_commit, files))
        return GateRun(judged, run.tree, run.environment)

    async def _judge_tests(self, result: GateResult, base_commit: str, change: Sequence[str]) -> GateResult:
        """The test gate against the base: its old failures excused, missing or hidden tests a failure."""
        label = f"the base commit {base_commit[:10]}"
        baseline = await self.tree_baseline(base_commit)
        base = baseline.gate("test", result.language) if baseline else None
        if result.status == "no_tests":
            judged = require_tests_like_base(result, base, base_label=label)
        elif result.status == "fail" and result.finding_keys:
            judged = excuse(result, base.finding_keys if base else None, base_label=label)
        else:
            judged = result
        return require_tests_still_run(judged, base, change, base_label=label)

    async def _judge(self, result: GateResult, base_commit: str, files: Sequence[str]) -> GateResult:
        label = f"the base commit {base_commit[:10]}"
        if result.status != "fail" or not result.finding_keys:
            return result
        if result.gate in _FILE_GATES:
            versions = await self._base_versions(base_commit, result.gate, files)
            if not versions:
                return result
            base = await run_on_base_versions(
                result.gate,
                versions,
                self.git.root,
                self.config.qa_gates,
                environment=self.environment,
                state_dir=self.paths.state_dir,
            )
            return excuse(result, base.finding_keys, base_label=label)
        if result.gate == "build" and result.language == "python":
            at_base = [path for path in files if await self.git.show_file(base_commit, path) is not None]
            if not at_base:
                return result
            async with self._base_lock:
                root = await self._base_checkout(base_commit)
                run = await run_gate_suite(
                    root,
                    at_base,
                    self.config.qa_gates,
                    environment=self.environment,
                    state_dir=self.paths.state_dir,
                    only=("build",),
                    main_root=self.paths.repo_root,
                )
            base_keys = [key for gate in run.results for key in gate.finding_keys]
            return excuse(result, base_keys, base_label=label)
        return result

    async def _base_versions(self, commit: str, gate: GateName, files: Sequence[str]) -> dict[str, bytes]:
        wanted = [path for path in files if gate == "secretscan" or path.endswith(".py")]
        versions: dict[str, bytes] = {}
        for path in wanted:
            content = await self.git.show_file(commit, path)
            if content is not None:
                versions[path] = content
        return versions

    # --- baselines of whole trees ---------------------------------------------------------------------

    async def tree_baseline(self, commit: str) -> TreeBaseline | None:
        """The whole-tree gates on ``commit``: cached, else run once in the baseline worktree."""
        tree = await self.git.tree_of(commit)
        cached = self.store.load(tree, self.key)
        if cached is not None:
            return cached
        async with self._base_lock:
            cached = self.store.load(tree, self.key)
            if cached is not None:
                return cached
            root = await self._base_checkout(commit)
            taken_in = f"a fresh worktree at {commit[:10]}"
            return await self.take_baseline(root, GitRepo(root, like=self.git), taken_in=taken_in)

    async def take_baseline(
        self, root: Path, git: GitRepo, *, taken_in: str, cache: bool = True, tree: str | None = None
    ) -> TreeBaseline | None:
        """Run the whole-tree gates in the working copy at ``root``; cache what they found (``cache``).

        A gate that could not run is kept in the baseline (``cannot_run`` reads it); a run in which a
        gate changed the tree is not cached, so that the next start reports the problem again. ``tree``:
        the tree the copy holds, when the caller has just seen it clean at a commit (``GitTreeGuard``'s
        ``current``).
        """
        run = await run_gate_suite(
            root,
            (),
            self.config.qa_gates,
            environment=self.environment,
            state_dir=self.paths.state_dir,
            guard=GitTreeGuard(git, current=tree),
            main_root=self.paths.repo_root,
        )
        if run.tree is None:
            return None
        results = [
            result
            for result in run.results
            if result.status != "skipped" and (whole_tree(result) or result.status == "error")
        ]
        baseline = tree_baseline(run.tree, self.key, results, taken_in=taken_in, environment=self.environment)
        if cache and not any(_changed_tree(result) for result in results):
            self.store.save(baseline)
        return baseline

    async def close(self) -> None:
        """Remove the baseline worktree (a run's start prunes one a killed run left)."""
        with anyio.CancelScope(shield=True):
            if self._base_worktree is not None:
                GitRepo(self._base_worktree.path, like=self.git).unwatch()
            await self._base_worktrees.cleanup_all()
            self._base_worktree = None

    async def base_worktree(self, commit: str) -> Path:
        """The baseline worktree, exactly at ``commit`` and prepared by the worktree setup."""
        async with self._base_lock:
            return await self._base_checkout(commit)

    async def _base_checkout(self, commit: str) -> Path:
        existing = self._base_worktree
        path = self._base_worktrees.root_dir / BASE_WORKTREE_NAME
        if existing is not None:
            try:
                self._base_worktree = await self._base_worktrees.reset(existing, commit)
                return self._base_worktree.path
            except Exception:  # a damaged leftover: make it anew
                _log.warning("checks.base_worktree_reset_failed", path=str(path))
        self._base_worktree = await self._base_worktrees.create(BASE_WORKTREE_NAME, commit, replace=True)
        if self.config.change_tracking_enabled:
            # Reset to one base after another: undoing only what the gates wrote costs O(changed files).
            await GitRepo(self._base_worktree.path, like=self.git).watch(recycled=True)
        return self._base_worktree.path
