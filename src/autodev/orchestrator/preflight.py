"""Preflight: everything the gates need, checked before the first paid agent call.

A missing tool found by the first task's gates costs an agent call per attempt and then blocks the task.
The preflight finds it first, and also what no developer could fix: a base commit whose tests cannot run at
all. Before the execute phase (and ``run`` before planning, and again on every ``resume``):

1. the project's environment is found (``autodev.qa.environment``);
2. every enabled gate is planned for a change in each detected language and every program it would start
   is looked up (``missing_requirements``): a tool that is not installed or a step the project does not
   configure is a problem, unless ``on_missing_tool = "skip"`` lets that gate skip;
3. the whole-tree gates (the tests) run once on the base commit, in the main checkout (cached by tree, gate
   configuration and environment): a gate that cannot run there at all (an internal or usage error, a
   collection error, a tool missing, a gate that writes into the repository) is a problem. Tests that run
   and fail are not: they are the base's pre-existing failures, listed and never blamed on a task;
4. when tasks will work in worktrees and the main checkout has git-ignored files of the project's own
   (not environments or caches: a worktree lacks only those), the same gates run in a fresh worktree of
   the base commit prepared by the worktree setup: a base that runs in the main checkout but not there (or
   fails tests there that pass in the main checkout) is a problem naming the git-ignored files the worktree
   lacks and the setting that provides them.

Every problem found is reported at once, in one ``PreflightError`` (exit 2), before any agent call and
without a ledger entry; ``autodev doctor`` prints the same resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autodev.adapters.detect import ToolProbe
from autodev.config.schema import AutodevConfig
from autodev.errors import EXIT_USAGE, AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.checks import ChangeChecks
from autodev.qa.baseline import TreeBaseline, cannot_run
from autodev.qa.environment import EnvironmentResolution, resolve_environment
from autodev.qa.gates import missing_requirements
from autodev.qa.tools import probe_tools
from autodev.state.plan_manager import BaselineGate, BaselineRecord
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree_setup import ignored_project_files, missing_ignored_files

__all__ = ["Diagnosis", "Preflight", "PreflightError", "diagnose", "run_preflight"]

_log = get_logger("autodev.preflight")
_SHOWN_FAILURES = 10
# The ledger keeps this many pre-existing findings per gate (and their count); the cache file keeps all.
_RECORDED_FINDINGS = 50


class PreflightError(AutodevError):
    """The gates cannot do their work here; nothing was run and nothing was recorded."""

    exit_code = EXIT_USAGE
    # Every problem is listed, each with its fix: more room than a one-problem message needs.
    max_message_chars = 6_000


@dataclass(frozen=True, slots=True)
class Preflight:
    """What the preflight found when nothing stops the run: the base commit and its baseline."""

    commit: str | None
    baseline: TreeBaseline | None
    worktree_baseline: TreeBaseline | None = None

    def preexisting_failures(self) -> list[str]:
        if self.baseline is None:
            return []
        return [finding for gate in self.baseline.gates for finding in gate.findings]

    def record(self) -> BaselineRecord | None:
        """The baseline as the ledger keeps it (``autodev status`` lists its pre-existing failures)."""
        if self.commit is None or self.baseline is None:
            return None
        return BaselineRecord(
            commit=self.commit,
            tree=self.baseline.tree,
            key=self.baseline.key,
            taken_in=self.baseline.taken_in,
            environment=self.baseline.environment,
            gates=[
                BaselineGate(
                    gate=gate.gate,
                    language=gate.language,
                    status=gate.status,
                    reason=gate.reason,
                    findings=gate.findings[:_RECORDED_FINDINGS],
                    finding_count=len(gate.findings),
                )
                for gate in self.baseline.gates
            ],
        )


def _raise(problems: list[str]) -> None:
    if not problems:
        return
    numbered = "; ".join(f"({index}) {problem}" for index, problem in enumerate(problems, 1))
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    raise PreflightError(f"preflight found {count}, so no agent was called: {numbered}")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What ``autodev doctor`` reports about the project: its environment (and how it was found), the
    tools as the gates would use them, and every gate that could not run here."""

    resolution: EnvironmentResolution
    tools: list[ToolProbe]
    problems: list[str]


async def diagnose(repo_root: Path, config: AutodevConfig) -> Diagnosis:
    """The environment and tool part of the preflight, without running the project's tests."""
    resolution = await resolve_environment(repo_root, config.environment)
    tools = await probe_tools(repo_root, resolution.environment)
    problems = [
        f"{result.gate} gate{f' ({result.language})' if result.language else ''}: {result.reason}"
        for result in missing_requirements(
            repo_root, config.qa_gates, resolution.environment, environment_problem=resolution.problem
        )
    ]
    return Diagnosis(resolution, tools, problems)


async def run_preflight(
    checks: ChangeChecks,
    git: GitRepo,
    resolution: EnvironmentResolution,
    *,
    isolated: bool,
) -> Preflight:
    """Check what the module docstring lists; raise ``PreflightError`` naming every problem found."""
    problems: list[str] = []
    if resolution.environment is None:
        problems.append(
            f"the project's environment: {resolution.problem}; fix it, or name the interpreter with "
            "environment.python"
        )
    for result in missing_requirements(
        git.root,
        checks.config.qa_gates,
        resolution.environment,
        environment_problem=resolution.problem,
        state_dir=checks.paths.state_dir,
    ):
        if resolution.environment is None and result.reason and "environment was not found" in result.reason:
            continue  # said once above
        where = f" ({result.language})" if result.language else ""
        problems.append(f"{result.gate} gate{where}: {result.reason}")
    _raise(problems)

    commit = await git.head()
    if commit is None:
        return Preflight(None, None)  # nothing committed yet: no base to take a baseline of
    tree = await git.tree_of(commit)
    baseline = checks.store.load(tree, checks.key)
    if baseline is None and await git.is_clean():
        # A clean checkout holds its commit's tree: the gates' first snapshot needs no staging.
        baseline = await checks.take_baseline(git.root, git, taken_in="the main checkout", tree=tree)
    elif baseline is None:
        # A resumed task's change is in the main checkout: the base commit is checked in a worktree of it.
        root = await checks.base_worktree(commit)
        baseline = await checks.take_baseline(
            root,
            GitRepo(root, like=git),
            taken_in="a fresh worktree (the main checkout holds a task's change)",
        )
    if baseline is None:
        return Preflight(commit, None)
    for gate in baseline.gates:
        reason = cannot_run(gate)
        if reason is not None:
            where = f" ({gate.language})" if gate.language else ""
            problems.append(
                f"the {gate.gate} gate{where} cannot run on the base commit {commit[:10]} in the main "
                f"checkout: {reason}; every task would fail it, so fix the project first (or configure "
                f"qa_gates.{gate.gate})"
            )
    _raise(problems)
    worktree_baseline = None
    if isolated and await ignored_project_files(git.root):
        # A clean main checkout and a fresh worktree differ only in git-ignored files: with none of the
        # project's own (environments and caches aside) they hold the same files, and agree.
        worktree_baseline = await _check_in_a_worktree(checks, git, commit, baseline, problems)
        _raise(problems)
    _log.info(
        "preflight.ok",
        commit=commit,
        preexisting=sum(len(gate.findings) for gate in baseline.gates),
        taken_in=baseline.taken_in,
    )
    return Preflight(commit, baseline, worktree_baseline)


async def _check_in_a_worktree(
    checks: ChangeChecks, git: GitRepo, commit: str, main: TreeBaseline, problems: list[str]
) -> TreeBaseline | None:
    """The base's whole-tree gates in a fresh, prepared worktree agree with the main checkout's, or a
    problem says which ignored files the worktree lacks."""
    marker = f"{main.tree}-worktree"
    cached = checks.store.load(marker, checks.key)
    if cached is not None:
        return cached
    root = await checks.base_worktree(commit)
    baseline = await checks.take_baseline(
        root, GitRepo(root, like=git), taken_in="a fresh worktree", cache=False
    )
    if baseline is None:
        return None
    differences = []
    for gate in baseline.gates:
        reason = cannot_run(gate)
        in_main = main.gate(gate.gate, gate.language)
        main_keys = set(in_main.finding_keys) if in_main else set()
        extra = [
            text for key, text in zip(gate.finding_keys, gate.findings, strict=False) if key not in main_keys
        ]
        if reason is not None and (in_main is None or cannot_run(in_main) is None):
            differences.append(f"the {gate.gate} gate cannot run there ({reason})")
        elif extra:
            shown = ", ".join(extra[:_SHOWN_FAILURES])
            differences.append(f"{len(extra)} test(s) fail there that pass in the main checkout: {shown}")
    if differences:
        lacking = await missing_ignored_files(git.root, root)
        listed = ", ".join(lacking) if lacking else "none found (check what the tests generate)"
        problems.append(
            f"tasks run in git worktrees, and the base commit {commit[:10]} works in the main checkout but "
            f"not in a fresh worktree: {'; '.join(differences)}. A worktree has only the tracked files; "
            f"git-ignored files the main checkout has and the worktree lacks: {listed}. Copy them with "
            "worktree_setup.copy_ignored (paths or globs) or generate them with worktree_setup.command"
        )
        return baseline
    checks.store.save(baseline.model_copy(update={"tree": marker}))
    return baseline
