"""WorktreeManager on a real git repository: detached worktrees with a patch, diff, apply, remove, prune."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.parallel import git as _git
from support.parallel import index_format

from autodev.workspace.git import GitRepo, index_entries
from autodev.workspace.worktree import WorktreeError, WorktreeManager


def _repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "app.py").write_text("VALUE = 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    return root, _git(root, "rev-parse", "HEAD").strip()


def _worktrees(root: Path) -> list[str]:
    return [
        line
        for line in _git(root, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_create_from_base_with_patch_diff_apply_and_remove(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    (root / "app.py").write_text("VALUE = 2\n")
    (root / "new.py").write_text("NEW = True\n")

    async def scenario() -> None:
        a_change = await GitRepo(root).diff_against(base)
        manager = WorktreeManager(root, root / ".autodev" / "worktrees")
        wt = await manager.create("v-b", base, a_change.patch)
        assert (wt.path / "app.py").read_text() == "VALUE = 2\n" and (wt.path / "new.py").exists()
        assert _git(wt.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"  # detached
        (wt.path / "app.py").write_text("VALUE = 3\n")
        variant = await manager.diff(wt)
        assert variant.files == ("app.py", "new.py")
        await manager.revert_on_main(a_change.patch)
        assert (root / "app.py").read_text() == "VALUE = 1\n" and not (root / "new.py").exists()
        await manager.apply_to_main(variant.patch)
        assert (root / "app.py").read_text() == "VALUE = 3\n" and (
            root / "new.py"
        ).read_text() == "NEW = True\n"
        await manager.remove(wt)
        assert not wt.path.exists() and manager.active == []

    anyio.run(scenario)
    assert len(_worktrees(root)) == 1


def test_a_patch_that_does_not_apply_is_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    bogus = "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-NOPE = 0\n+NOPE = 1\n"

    async def scenario() -> None:
        manager = WorktreeManager(root, root / ".autodev" / "worktrees")
        with pytest.raises(WorktreeError, match="does not apply"):
            await manager.apply_to_main(bogus)
        with pytest.raises(WorktreeError, match="no longer matches"):
            await manager.revert_on_main(bogus)
        with pytest.raises(WorktreeError, match="failed"):
            await manager.create("broken", base, bogus)
        assert manager.active == []

    anyio.run(scenario)
    assert (root / "app.py").read_text() == "VALUE = 1\n"
    assert len(_worktrees(root)) == 1 and not (root / ".autodev" / "worktrees" / "broken").exists()


def test_cleanup_all_and_prune_stale_after_a_crash(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    worktrees_dir = root / ".autodev" / "worktrees"

    async def crashed_run() -> None:
        manager = WorktreeManager(root, worktrees_dir)
        await manager.create("left-1", base)
        await manager.create("left-2", base)
        (worktrees_dir / "half-made").mkdir()  # a directory git never registered

    async def next_start() -> list[Path]:
        return await WorktreeManager(root, worktrees_dir).prune_stale()

    async def normal_run() -> None:
        manager = WorktreeManager(root, worktrees_dir)
        await manager.create("x", base)
        await manager.create("y", base)
        await manager.cleanup_all()

    anyio.run(crashed_run)
    assert len(_worktrees(root)) == 3
    removed = anyio.run(next_start)
    assert {p.name for p in removed} == {"left-1", "left-2", "half-made"}
    assert len(_worktrees(root)) == 1 and list(worktrees_dir.iterdir()) == []
    anyio.run(normal_run)
    assert len(_worktrees(root)) == 1 and list(worktrees_dir.iterdir()) == []


def test_the_index_header_gives_its_entry_count(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path)
    (root / "pkg").mkdir()
    for number in range(3):
        (root / "pkg" / f"m{number}.py").write_text(f"N = {number}\n")
    _git(root, "add", "-A")
    assert index_entries(root / ".git") == 4 == len(_git(root, "ls-files").splitlines())
    assert index_entries(tmp_path / "nowhere") == 0
    (root / ".git" / "index").write_bytes(b"not an index")
    assert index_entries(root / ".git") == 0


@pytest.mark.parametrize(("split_from", "expected"), [(3, "split"), (4, "whole")])
def test_a_worktree_of_a_large_index_gets_a_split_index_and_keeps_it(
    tmp_path: Path, split_from: int, expected: str
) -> None:
    root, _ = _repo(tmp_path)
    for name in ("b.py", "c.py"):
        (root / name).write_text("X = 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "three files")
    base = _git(root, "rev-parse", "HEAD").strip()

    async def scenario() -> None:
        manager = WorktreeManager(root, root / ".autodev" / "worktrees", split_index_min_entries=split_from)
        worktree = await manager.create("v", base)
        assert index_format(worktree.path) == expected
        (worktree.path / "b.py").write_text("X = 2\n")
        _git(worktree.path, "add", "b.py")  # a later write by any git keeps the format
        assert index_format(worktree.path) == expected
        assert _git(worktree.path, "status", "--porcelain") == "M  b.py\n"
        await manager.remove(worktree)
        # The shared index lives in the worktree's own git directory and goes with it.
        assert not list((root / ".git").rglob("sharedindex.*"))

    anyio.run(scenario)
    assert index_format(root) == "whole"  # the user's own index is never split
