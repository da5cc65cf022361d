"""``AutodevPaths.relative``: state paths as the ledger records them, also through a linked ``.autodev``."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodev.errors import PathEscapeError, StateError
from autodev.state.paths import AutodevPaths, ensure_state_dir


def test_a_path_in_the_repository_is_relative_to_its_root(repo: Path) -> None:
    paths = AutodevPaths(repo)

    assert paths.relative(paths.task_worktrees_dir / "task-1.1") == ".autodev/task-worktrees/task-1.1"
    assert paths.relative(repo / "src" / "mod.py") == "src/mod.py"


def test_a_resolved_path_through_a_linked_state_directory_keeps_the_links_name(
    repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "task-worktrees" / "task-1.1").mkdir(parents=True)
    (repo / ".autodev").symlink_to(elsewhere, target_is_directory=True)
    paths = AutodevPaths(repo)
    resolved = (paths.task_worktrees_dir / "task-1.1").resolve()

    assert not resolved.is_relative_to(repo)
    assert paths.relative(resolved) == ".autodev/task-worktrees/task-1.1"
    assert (repo / paths.relative(resolved)).resolve() == resolved


def test_a_path_outside_the_repository_and_its_state_is_refused(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(PathEscapeError):
        AutodevPaths(repo).relative(tmp_path / "other" / "file")


def test_a_link_to_a_missing_state_directory_names_its_target(repo: Path, tmp_path: Path) -> None:
    (repo / ".autodev").symlink_to(tmp_path / "gone", target_is_directory=True)

    with pytest.raises(StateError, match=r"is a link to .*gone, which does not exist; create that directory"):
        ensure_state_dir(AutodevPaths(repo))
