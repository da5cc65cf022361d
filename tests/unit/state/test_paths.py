"""``AutodevPaths.relative``: state paths as the ledger records them, also through a linked ``.autodev``;
``StateDirKeeper``: ``.autodev/`` and its ``.gitignore`` kept, checked again when the directory changed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from autodev.errors import PathEscapeError, StateError
from autodev.files import STAMP_SETTLED_NS
from autodev.state import paths as paths_module
from autodev.state.paths import AutodevPaths, StateDirKeeper, ensure_state_dir


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


def _settled(paths: AutodevPaths) -> None:
    """Wait until the state directory's change time is older than the keeper's trust horizon."""
    changed = os.stat(paths.state_dir).st_ctime_ns
    while time.time_ns() - changed <= STAMP_SETTLED_NS:
        time.sleep(0.02)


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[AutodevPaths]:
    checked: list[AutodevPaths] = []
    real = paths_module.ensure_state_dir

    def counted(paths: AutodevPaths) -> Path:
        checked.append(paths)
        return real(paths)

    monkeypatch.setattr(paths_module, "ensure_state_dir", counted)
    return checked


def test_a_settled_unchanged_state_directory_is_not_checked_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = AutodevPaths(repo)
    keeper = StateDirKeeper(paths)
    keeper.ensure()
    _settled(paths)
    checked = _counting_checks(monkeypatch)
    keeper.ensure()  # the stamp it took was not settled yet: checked again, and now trusted
    keeper.ensure()
    keeper.ensure()
    assert len(checked) == 1


def test_a_state_directory_changed_within_its_tick_is_checked_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = AutodevPaths(repo)
    keeper = StateDirKeeper(paths)
    keeper.ensure()  # the .gitignore was just written: the directory's stamp is not to be trusted yet
    checked = _counting_checks(monkeypatch)
    keeper.ensure()
    assert len(checked) == 1


@pytest.mark.parametrize("settle", [True, False], ids=["settled", "fresh"])
def test_a_removed_gitignore_comes_back_at_the_next_check(repo: Path, settle: bool) -> None:
    paths = AutodevPaths(repo)
    if settle:
        keeper = _trusting(paths)
    else:
        keeper = StateDirKeeper(paths)
        keeper.ensure()
    (paths.state_dir / ".gitignore").unlink()
    keeper.ensure()
    assert (paths.state_dir / ".gitignore").read_text().splitlines()[-1] == "*"


def _trusting(paths: AutodevPaths) -> StateDirKeeper:
    """A keeper that checked the state directory and trusts the stamp it left."""
    keeper = StateDirKeeper(paths)
    keeper.ensure()
    _settled(paths)
    keeper.ensure()
    return keeper


def test_a_removed_state_directory_comes_back_at_the_next_check(repo: Path) -> None:
    paths = AutodevPaths(repo)
    keeper = _trusting(paths)
    shutil.rmtree(paths.state_dir)
    keeper.ensure()
    assert (paths.state_dir / ".gitignore").is_file()


def test_a_state_directory_replaced_by_a_dangling_link_is_refused_after_a_trusted_check(
    repo: Path, tmp_path: Path
) -> None:
    paths = AutodevPaths(repo)
    keeper = _trusting(paths)
    shutil.rmtree(paths.state_dir)
    paths.state_dir.symlink_to(tmp_path / "gone", target_is_directory=True)
    with pytest.raises(StateError, match="which does not exist"):
        keeper.ensure()
