"""A task's working state carried between repositories as a bundle (real git, two repositories).

What a remote node sends back must be exactly what its checks saw: every kind of change survives the trip
(new, deleted, renamed, mode change, binary, untracked in a new directory), ignored files and ``.autodev/``
stay behind, and restoring over an older state leaves nothing of it.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.parallel import git, git_repo

from autodev.state.paths import AutodevPaths, ensure_state_dir
from autodev.workspace.bundles import (
    CloneCache,
    bundle_refs,
    existing_commits,
    restore_working_state,
    unbundle,
    working_ref,
    working_state,
    working_tree,
)
from autodev.workspace.git import GitError


def _files(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file below ``root`` but ``.git`` and ``.autodev``: its content and whether it is executable."""
    found: dict[str, tuple[bytes, bool]] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and relative != ".git" and not relative.startswith((".git/", ".autodev/")):
            found[relative] = (path.read_bytes(), os.access(path, os.X_OK))
    return found


def _head_repository(tmp_path: Path) -> tuple[Path, str]:
    head = git_repo(
        tmp_path / "head",
        {
            "README.md": "project\n",
            "src/old_name.py": "x = 1\n",
            "src/gone.py": "y = 2\n",
            "run.sh": "echo hi\n",
            ".gitignore": "build/\n",
        },
    )
    return head, git(head, "rev-parse", "HEAD").strip()


def _node_clone(tmp_path: Path, head: Path, base: str, node: Path) -> CloneCache:
    """What a node does for a task: its clone cache receives the base, the task's clone borrows from it."""
    git(head, "update-ref", "refs/autodev/ray/base", base)
    cache = CloneCache(tmp_path / "cache", "repository")
    cache.ensure()
    cache.obtain(base, _head_answers(head))
    cache.clone(node, base)
    return cache


def _head_answers(head: Path, asked: list[list[str]] | None = None) -> Callable[[list[str]], bytes]:
    """What the head answers a node asking for ``refs/autodev/ray/base``: a bundle of it, less what the
    node's haves reach (the haves of each question are appended to ``asked``)."""

    def answer(haves: list[str]) -> bytes:
        if asked is not None:
            asked.append(haves)
        known = existing_commits(head, haves)
        return bundle_refs(head, ["refs/autodev/ray/base"], exclude=known)

    return answer


def test_a_nodes_working_state_reaches_the_head_with_every_kind_of_change(tmp_path: Path) -> None:
    head, base = _head_repository(tmp_path)
    node = tmp_path / "node"
    _node_clone(tmp_path, head, base, node)
    ensure_state_dir(AutodevPaths(node))
    assert git(node, "rev-parse", "HEAD").strip() == base

    # What an agent leaves: one change of each kind, plus things that must not travel.
    (node / "src" / "old_name.py").rename(node / "src" / "new_name.py")
    (node / "src" / "gone.py").unlink()
    (node / "run.sh").chmod(0o755)
    (node / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (node / "docs" / "deep").mkdir(parents=True)
    (node / "docs" / "deep" / "notes.md").write_text("new, untracked, in a new directory\n")
    (node / "README.md").write_text("project, changed\n")
    (node / "build").mkdir()
    (node / "build" / "out.o").write_text("ignored build output\n")
    (node / ".autodev" / "scratch.json").write_text("{}\n")
    expected = {name: data for name, data in _files(node).items() if not name.startswith("build/")}

    tree, commit = working_state(node, base, "1.1")
    assert git(node, "rev-parse", working_ref("1.1")).strip() == commit
    assert git(node, "rev-parse", "HEAD").strip() == base  # HEAD and index untouched
    assert git(node, "diff", "--cached", "--name-only") == ""
    data = bundle_refs(node, [working_ref("1.1")], exclude=[base])

    refs = unbundle(head, data)
    assert refs == {working_ref("1.1"): commit}
    assert git(head, "rev-parse", f"{commit}^{{tree}}").strip() == tree
    landing = tmp_path / "landing"
    git(head, "worktree", "add", "-q", "--detach", str(landing), base)
    (landing / "stale.txt").write_text("left by an earlier attempt\n")
    (landing / "build").mkdir()
    (landing / "build" / "keep.o").write_text("the head's own build output\n")

    restore_working_state(landing, base, commit, "1.1")

    restored = _files(landing)
    assert restored.pop("build/keep.o")[0] == b"the head's own build output\n"  # ignored files stay
    assert restored == {name: data for name, data in expected.items() if not name.startswith(".autodev")}
    assert git(landing, "rev-parse", "HEAD").strip() == base
    status = git(landing, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert " D src/gone.py" in status and "?? docs/deep/notes.md" in status and " M run.sh" in status
    # What git would commit there is the node's tree, to the byte.
    git(landing, "add", "-A")
    assert git(landing, "write-tree").strip() == tree


def test_each_working_state_keeps_the_earlier_ones_reachable(tmp_path: Path) -> None:
    """A later step diffs against the tree an earlier one recorded (what the reviewer saw): a node that
    continues the task must have it, so each state's second parent is the one before."""
    head, base = _head_repository(tmp_path)
    (head / "README.md").write_text("first attempt\n")
    first_tree, first = working_state(head, base, "3.1")
    (head / "README.md").write_text("second attempt\n")
    _, second = working_state(head, base, "3.1")
    assert git(head, "rev-parse", f"{second}^1", f"{second}^2").split() == [base, first]
    node = tmp_path / "node"
    _node_clone(tmp_path, head, base, node)
    unbundle(node, bundle_refs(head, [working_ref("3.1")], exclude=[base]))
    assert git(node, "cat-file", "-t", first_tree).strip() == "tree"


def test_the_bundle_of_a_working_state_holds_only_what_the_base_lacks(tmp_path: Path) -> None:
    head, _ = _head_repository(tmp_path)
    (head / "big.bin").write_bytes(os.urandom(50_000))  # does not compress
    git(head, "add", "big.bin")
    git(head, "commit", "-qm", "big file")
    base = git(head, "rev-parse", "HEAD").strip()
    (head / "small.txt").write_text("the task's change\n")
    _, commit = working_state(head, base, "2.1")
    whole = bundle_refs(head, [working_ref("2.1")])
    thin = bundle_refs(head, [working_ref("2.1")], exclude=[base])
    assert len(thin) < 2_000 and len(whole) > 50_000
    assert commit in thin.decode("utf-8", errors="replace")


def test_a_nodes_clone_cache_fetches_only_the_commits_it_lacks(tmp_path: Path) -> None:
    head, first = _head_repository(tmp_path)
    (head / "big.bin").write_bytes(os.urandom(50_000))
    git(head, "add", "big.bin")
    git(head, "commit", "-qm", "big file")
    second = git(head, "rev-parse", "HEAD").strip()
    cache = _node_clone(tmp_path, head, second, tmp_path / "task-1")
    assert cache.has(second) and cache.has(first)  # the first commit is reached from the second
    assert existing_commits(head, [*cache.haves(), "0" * 40]) == [second]

    (head / "small.txt").write_text("the next task's base\n")
    git(head, "add", "small.txt")
    git(head, "commit", "-qm", "small file")
    third = git(head, "rev-parse", "HEAD").strip()
    git(head, "update-ref", "refs/autodev/ray/base", third)
    thin = bundle_refs(head, ["refs/autodev/ray/base"], exclude=existing_commits(head, cache.haves()))
    assert len(thin) < 2_000  # the big file is not sent again
    cache.receive(thin, third)
    cache.clone(tmp_path / "task-2", third)

    # Each task's clone borrows the cache's objects instead of copying them.
    assert (tmp_path / "task-2" / ".git" / "objects" / "info" / "alternates").exists()
    assert (tmp_path / "task-2" / "small.txt").read_text() == "the next task's base\n"
    assert (tmp_path / "task-2" / "big.bin").stat().st_size == 50_000
    assert git(tmp_path / "task-2", "rev-parse", "HEAD").strip() == third


def test_a_kept_index_gives_the_same_tree_as_a_fresh_one_after_every_change(tmp_path: Path) -> None:
    head, base = _head_repository(tmp_path)
    kept = tmp_path / "kept.index"

    def new() -> None:
        (head / "new.py").write_text("new\n")

    def delete() -> None:
        (head / "src" / "gone.py").unlink()

    def mode() -> None:
        (head / "run.sh").chmod(0o755)

    def rename() -> None:
        (head / "new.py").rename(head / "renamed.py")

    def back_to_the_base() -> None:
        (head / "README.md").write_text("project\n")

    for step in (new, delete, mode, rename, back_to_the_base):
        step()
        assert working_tree(head, base, index=kept) == working_tree(head, base), step.__name__
    assert git(head, "status", "--porcelain", "--untracked-files=all")  # the user's index untouched
    assert git(head, "diff", "--cached", "--name-only") == ""


def _packs(root: Path) -> list[str]:
    return sorted(path.name for path in (root / ".git" / "objects" / "pack").glob("*.pack"))


def test_small_bundles_arrive_as_loose_objects_and_large_ones_as_a_pack(tmp_path: Path) -> None:
    """A run receives a few bundles per task: as packs they would soon set git repacking the repository
    (``gc.autoPackLimit``), so those below git's own unpack limit are written loose, as a fetch does."""
    head, base = _head_repository(tmp_path)
    node = tmp_path / "node"
    _node_clone(tmp_path, head, base, node)
    (node / "README.md").write_text("a one-file change\n")
    _, small = working_state(node, base, "1.1")
    packs = _packs(head)
    assert unbundle(head, bundle_refs(node, [working_ref("1.1")], exclude=[base])) == {
        working_ref("1.1"): small
    }
    assert _packs(head) == packs
    assert git(head, "cat-file", "-t", small).strip() == "commit"

    for number in range(150):
        (node / f"generated_{number}.txt").write_text(f"file {number}\n")
    _, large = working_state(node, base, "1.2")
    refs = unbundle(head, bundle_refs(node, [working_ref("1.2")], exclude=[base]))
    assert refs == {working_ref("1.2"): large}
    assert len(_packs(head)) == len(packs) + 1
    git(head, "update-ref", "refs/test/large", large)
    git(head, "fsck", "--no-dangling")


def test_a_small_bundle_whose_base_the_receiver_lacks_is_refused(tmp_path: Path) -> None:
    head, base = _head_repository(tmp_path)
    (head / "README.md").write_text("on top of a commit the stranger lacks\n")
    _, commit = working_state(head, base, "1.1")
    stranger = tmp_path / "stranger"
    git(tmp_path, "init", "-q", str(stranger))
    with pytest.raises(GitError, match="lacks"):
        unbundle(stranger, bundle_refs(head, [working_ref("1.1")], exclude=[base]))
    assert subprocess.run(["git", "cat-file", "-e", commit], cwd=stranger).returncode != 0


def test_tasks_starting_side_by_side_on_a_new_base_ask_the_head_for_it_once(tmp_path: Path) -> None:
    """Three tasks on one node start on the same base, new to the node's cache, at once: one asks the head
    and receives it; the others wait for it instead of asking with the base among their haves (the head's
    bundle would be empty, which git refuses) or cloning from objects still being unpacked."""
    head, first = _head_repository(tmp_path)
    CloneCache(tmp_path / "cache", "repository").ensure()
    _node_clone(tmp_path, head, first, tmp_path / "earlier-task")
    (head / "new.txt").write_text("a new base\n")
    git(head, "add", "new.txt")
    git(head, "commit", "-qm", "new base")
    base = git(head, "rev-parse", "HEAD").strip()
    git(head, "update-ref", "refs/autodev/ray/base", base)
    asked: list[list[str]] = []
    answer = _head_answers(head, asked)
    all_started = threading.Barrier(3)

    def slow_answer(haves: list[str]) -> bytes:
        time.sleep(0.3)  # the others check for the base meanwhile
        return answer(haves)

    def task(number: int) -> None:
        cache = CloneCache(tmp_path / "cache", "repository")  # each task its own, as each Ray worker
        all_started.wait()
        cache.obtain(base, slow_answer)
        cache.clone(tmp_path / f"task-{number}", base)

    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(task, number) for number in range(3)]:
            done.result()

    assert len(asked) == 1 and base not in asked[0]
    for number in range(3):
        assert (tmp_path / f"task-{number}" / "new.txt").read_text() == "a new base\n"
