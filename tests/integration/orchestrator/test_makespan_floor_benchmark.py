"""The makespan floor's dispatcher on a small DAG: every task lands its file on the branch through the git
commands a task of ``bench/makespan.py`` runs, and ``--git off`` starts none (``bench/makespan_floor.py``
runs the same measurement on the 60-task DAG)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
import makespan
import makespan_floor
from _scenario import git_repo


@pytest.mark.parametrize("git", [True, False])
def test_the_floor_lands_every_task_with_a_tasks_git_commands_or_none(git: bool) -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()
    assert any(task.depends_on for task in tasks)

    run_result = anyio.run(functools.partial(makespan_floor.measure, tasks, 0.0, 3, git=git, syncs=False))

    assert run_result["problems"] == []
    commands = run_result["git_ms_median"]
    assert isinstance(commands, dict)
    if git:
        # The snapshot (its tree and its diff written from the file, as AutoDev writes a new file's), the
        # fast-forward and the look after it for every task; the replays where the branch moved are
        # written in-process, as AutoDev writes a change no landing met.
        assert {"add", "restore", "status"} <= set(commands)
        assert not {"write-tree", "diff", "merge-tree"} & set(commands)
        assert run_result["git_processes_per_task"] >= 3
    else:
        assert commands == {} and run_result["git_processes_per_task"] == 0


def test_the_floor_with_its_snapshots_written_by_git_adds_a_write_tree_and_a_diff_to_every_task() -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()

    def measure(snapshot: makespan_floor.Snapshot) -> dict[str, object]:
        run = functools.partial(
            makespan_floor.measure, tasks, 0.0, 3, git=True, syncs=False, snapshot=snapshot
        )
        result: dict[str, object] = anyio.run(run)
        return result

    from_files, by_git = measure("files"), measure("write-tree")

    assert by_git["problems"] == []
    commands = by_git["git_ms_median"]
    assert isinstance(commands, dict) and {"add", "write-tree", "diff"} <= set(commands)
    processes, fewer = by_git["git_processes_per_task"], from_files["git_processes_per_task"]
    assert isinstance(processes, float) and isinstance(fewer, float)
    assert processes == pytest.approx(fewer + 2)


def test_the_floor_with_its_snapshots_written_in_process_lands_every_task_without_add_or_write_tree() -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()

    run_result = anyio.run(
        functools.partial(makespan_floor.measure, tasks, 0.0, 3, git=True, syncs=False, snapshot="in-process")
    )

    assert run_result["problems"] == []  # every task's file is on the branch, through the trees written
    commands = run_result["git_ms_median"]
    assert isinstance(commands, dict)
    assert "restore" in commands  # the landings still write the main checkout through git
    assert not {"add", "write-tree", "diff", "merge-tree"} & set(commands)


def test_the_floor_landing_in_process_leaves_the_main_checkout_as_git_would() -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()

    def measure(landing: makespan_floor.Landing) -> dict[str, object]:
        run = functools.partial(makespan_floor.measure, tasks, 0.0, 3, git=True, syncs=False, landing=landing)
        result: dict[str, object] = anyio.run(run)
        return result

    by_git, in_process = measure("restore"), measure("in-process")

    # Every file on the branch, and `git status` in the main checkout clean (its index and files are
    # HEAD's), with the main checkout's restores gone.
    assert in_process["problems"] == []
    processes, fewer = by_git["git_processes_per_task"], in_process["git_processes_per_task"]
    assert isinstance(processes, float) and isinstance(fewer, float)
    assert fewer < processes


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("untracked_cache", [False, True])
def test_an_index_with_a_new_file_is_the_index_git_add_writes(tmp_path: Path, untracked_cache: bool) -> None:
    root = git_repo(tmp_path / "repo")
    for name in ("a.py", "src/z.py", "src/b/c.py", "zz.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{name}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "more files")  # the index now has a cache tree
    if untracked_cache:
        _git(root, "config", "core.untrackedCache", "true")
        _git(root, "status", "--porcelain")  # writes the untracked cache extension
    index = root / ".git" / "index"
    for name in ("src/new.py", "0first.py", "src/b/d.py"):
        target = root / name
        target.write_bytes(f"print({name!r})\n".encode())
        blob = _git(root, "hash-object", "-w", name).strip()
        written = makespan_floor.index_with_new_file(
            index.read_bytes(), os.stat(index).st_mtime_ns, name, blob, os.stat(target)
        )
        index.write_bytes(written)

        staged = _git(root, "ls-files", "--stage")
        assert f"100644 {blob} 0\t{name}\n" in staged
        assert staged.splitlines() == sorted(
            staged.splitlines(), key=lambda line: line.split("\t")[1].encode()
        )
    # git reads the written index without complaint, and finds the files it names staged as they are
    assert _git(root, "status", "--porcelain") == "A  0first.py\nA  src/b/d.py\nA  src/new.py\n"
    _git(root, "commit", "-q", "-m", "the new files")
    assert _git(root, "status", "--porcelain") == ""
    assert "src/new.py" in _git(root, "ls-tree", "-r", "--name-only", "HEAD")


def test_an_index_entry_as_recent_as_its_index_is_smudged_so_git_compares_its_bytes(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    _git(root, "config", "core.trustctime", "false")  # the file's stamp is then its size and times
    kept, index = root / "kept.py", root / ".git" / "index"
    kept.write_text("aaaa\n")
    _git(root, "add", "kept.py")
    _git(root, "commit", "-q", "-m", "a file")
    written_at = os.stat(kept).st_mtime_ns
    # The index written in the same tick as the file (git then trusts the entry's stamp only after it
    # compared the bytes), and the file rewritten within that tick with the same size.
    os.utime(index, ns=(written_at, written_at))
    kept.write_text("bbbb\n")
    os.utime(kept, ns=(written_at, written_at))
    # git's own index, left as it is (a status may otherwise write it): git compares the bytes
    assert " M kept.py" in _git(root, "--no-optional-locks", "status", "--porcelain").splitlines()
    (root / "new.py").write_text("x = 1\n")
    blob = _git(root, "hash-object", "-w", "new.py").strip()

    new_index = makespan_floor.index_with_new_file(
        index.read_bytes(), written_at, "new.py", blob, os.stat(root / "new.py")
    )
    index.write_bytes(new_index)
    # Seen as written two seconds later (git may compare whole seconds): without the smudged size, git
    # would now trust the entry's stamp.
    later = written_at + 2_000_000_000
    os.utime(index, ns=(later, later))

    assert " M kept.py" in _git(root, "status", "--porcelain").splitlines()
