"""The preflight's baseline of a clean main checkout: the checkout's tree is the commit's, so the gates' first
snapshot stages nothing, and a gate that writes into the checkout is still caught and put back."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.git_calls import command_names, git_started
from support.projects import mini_project, write_files

from autodev.config.schema import AutodevConfig, GateSettings, QAGatesSettings
from autodev.orchestrator.checks import ChangeChecks
from autodev.orchestrator.preflight import PreflightError, run_preflight
from autodev.qa import GATE_NAMES
from autodev.qa.environment import EnvironmentResolution, autodev_environment
from autodev.state.paths import AutodevPaths
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree_setup import WorktreePreparer


def _checks(root: Path, git: GitRepo, *gates: str) -> ChangeChecks:
    config = AutodevConfig(
        qa_gates=QAGatesSettings(**{gate: GateSettings(enabled=gate in gates) for gate in GATE_NAMES})
    )
    paths = AutodevPaths(root)
    return ChangeChecks(
        paths=paths,
        config=config,
        git=git,
        environment=autodev_environment(),
        preparer=WorktreePreparer(root, config.worktree_setup, children_dir=paths.children_dir),
        admin_lock=anyio.Lock(),
    )


def _resolution() -> EnvironmentResolution:
    return EnvironmentResolution(autodev_environment(), None, ())


@pytest.mark.asyncio
async def test_a_clean_checkout_s_baseline_is_its_commit_s_tree_without_staging_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(repo)
    git = GitRepo(root)
    head = await git.head()
    assert head is not None
    started = git_started(monkeypatch)

    preflight = await run_preflight(_checks(root, git), git, _resolution(), isolated=False)

    assert preflight.baseline is not None
    assert preflight.baseline.tree == await git.tree_of(head)
    git_commands = command_names(started)
    assert "add" not in git_commands and "write-tree" not in git_commands


@pytest.mark.asyncio
async def test_a_gate_that_writes_into_the_clean_checkout_is_still_caught_and_put_back(repo: Path) -> None:
    root = mini_project(repo)
    write_files(
        root,
        {
            "tests/test_core.py": (
                "from pathlib import Path\n\n\ndef test_writes() -> None:\n"
                "    Path('report.txt').write_text('x')\n"
                "    Path('mini/core.py').write_text('BROKEN = True\\n')\n"
            )
        },
    )
    git = GitRepo(root)
    await git.commit_all("a test that writes into the tree")
    before = (root / "mini" / "core.py").read_text()

    with pytest.raises(
        PreflightError, match=r"the test gate .*changed the working tree \(mini/core.py, report.txt\)"
    ):
        await run_preflight(_checks(root, git, "test"), git, _resolution(), isolated=False)

    assert (root / "mini" / "core.py").read_text() == before
    assert not (root / "report.txt").exists()
    assert await git.is_clean()
