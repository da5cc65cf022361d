"""What each git operation of a task costs, in a repository of 100 files and one of 50,000.

A task in its own worktree runs the same few kinds of git command again and again (see the trace in
docs/performance.md): scanning the working copy (``status``), staging it into a throw-away index and
writing its tree (``add -A`` + ``write-tree``), diffing trees, committing, fast-forwarding the branch and
resetting a recycled worktree for the next task. This times each of them the way ``GitRepo`` runs it, in a
generated repository of each size (the tree of ``bench/overhead.py --repo-files``), with a three-file change
in the worktree: the median of ``--runs`` runs in milliseconds, and the ratio between the sizes.

    python bench/git_ops.py [--sizes 100,50000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import git_repo
from overhead import generated_tree

from autodev.gitsafety import HARDENED_CONFIG
from autodev.workspace.git import GitRepo

IDENTITY = ("-c", "user.name=bench", "-c", "user.email=bench@invalid")
STATUS = ("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
DIFF = ("diff", "--no-ext-diff", "--no-textconv", "-z", "--patch-with-raw", "--binary", "--no-renames")


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *HARDENED_CONFIG, "-c", "maintenance.auto=false", *args],
        cwd=cwd,
        env={**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", **(env or {})},
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def median_ms(action: Callable[[], object], runs: int, before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def write_change(copy: Path) -> None:
    """A task's change: one file edited, one added in a new directory, one deleted."""
    first = next((copy / "lib").rglob("m1.py"))
    first.write_text("VALUE = 'changed'\n")
    (copy / "new" / "pkg").mkdir(parents=True, exist_ok=True)
    (copy / "new" / "pkg" / "added.py").write_text("ADDED = True\n")
    last = next((copy / "lib").rglob("m2.py"))
    last.unlink(missing_ok=True)


def measure(n_files: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        generated_tree(root, n_files)
        base = git(root, "rev-parse", "HEAD").strip()
        copy = Path(tmp) / "copy"
        git(root, "worktree", "add", "-q", "--detach", str(copy), base)
        # As a recycled worktree is: its index written after its files (a fresh one's entries are all
        # "racily clean", and git re-reads every file until the index is written again).
        time.sleep(1.1)
        git(copy, "update-index", "-q", "--refresh")
        git(root, "update-index", "-q", "--refresh")
        git_dir = Path(git(copy, "rev-parse", "--absolute-git-dir").strip())
        scratch = Path(tmp) / "index"
        env = {"GIT_INDEX_FILE": str(scratch)}

        def seed_index() -> None:
            shutil.copy2(git_dir / "index", scratch)

        def reset() -> None:
            git(copy, "checkout", "--detach", "--force", "--quiet", base)
            git(copy, "clean", "-ffdxq")

        def stage() -> None:
            seed_index()
            git(copy, "add", "-A", "--", ".", ":(exclude).autodev", env=env)

        write_change(copy)
        stage()
        tree = git(copy, "write-tree", env=env).strip()
        figures = {
            "status": median_ms(lambda: git(copy, *STATUS), runs),
            "stage_into_scratch_index": median_ms(stage, runs),
            "write_tree": median_ms(lambda: git(copy, "write-tree", env=env), runs),
            "diff_base_to_tree": median_ms(lambda: git(copy, *DIFF, base, tree), runs),
            "for_each_ref": median_ms(lambda: git(root, "for-each-ref", "refs/heads/", "refs/tags/"), runs),
            "rev_parse_head": median_ms(lambda: git(root, "rev-parse", "--verify", "HEAD"), runs),
        }

        def commit() -> None:
            git(copy, "add", "-A")
            git(copy, *IDENTITY, "commit", "--no-verify", "-q", "-m", "task")

        def make_change() -> None:
            reset()
            write_change(copy)

        figures["commit"] = median_ms(commit, runs, before=make_change)
        figures["reset_recycled_worktree"] = median_ms(reset, runs, before=lambda: write_change(copy))
        # The branch moving forward by one task's commit, in the main checkout.
        git(root, "checkout", "-q", "-b", "work")
        landing: list[str] = []

        def task_commit() -> None:
            make_change()
            commit()
            git(root, "reset", "-q", "--hard", base)
            landing[:] = [git(copy, "rev-parse", "HEAD").strip()]

        figures["fast_forward_main"] = median_ms(
            lambda: git(root, "merge", "--ff-only", "-q", landing[0]), runs, before=task_commit
        )
        watched_figures(root, copy, base, runs, figures, task_commit, landing)
        figures["fresh_worktree"] = median_ms(
            lambda: git(root, "worktree", "add", "-q", "--detach", str(Path(tmp) / "fresh"), base),
            max(1, runs // 3),
            before=lambda: (
                git(root, "worktree", "remove", "--force", str(Path(tmp) / "fresh"))
                if (Path(tmp) / "fresh").exists()
                else None
            ),
        )
        return figures


def watched_figures(
    root: Path,
    copy: Path,
    base: str,
    runs: int,
    figures: dict[str, float],
    task_commit: Callable[[], None],
    landing: list[str],
) -> None:
    """The same operations on watched copies (ADR 0018): git asked about the changed paths only."""
    git(root, "checkout", "-q", "--detach", base)
    git(copy, "checkout", "--detach", "--force", "--quiet", base)
    git(copy, "clean", "-ffdxq")
    worktree = GitRepo(copy)
    if not anyio.run(lambda: worktree.watch(recycled=True)):
        return  # no inotify here: nothing to compare

    def recycle() -> None:
        anyio.run(lambda: worktree.recycle(base))
        anyio.run(worktree.settle)

    def fresh_change() -> None:
        recycle()
        write_change(copy)

    def settled_change() -> None:
        anyio.run(worktree.settle)
        write_change(copy)

    try:
        figures["watched_status"] = median_ms(
            lambda: anyio.run(worktree.dirty_paths), runs, before=fresh_change
        )
        figures["watched_stage_and_write_tree"] = median_ms(
            lambda: anyio.run(worktree.snapshot_tree), runs, before=fresh_change
        )
        figures["watched_commit"] = median_ms(
            lambda: anyio.run(lambda: worktree.commit_all("task")), runs, before=fresh_change
        )
        figures["watched_reset_recycled_worktree"] = median_ms(
            lambda: anyio.run(lambda: worktree.recycle(base)),
            runs,
            before=settled_change,
        )
    finally:
        worktree.unwatch()
    git(root, "checkout", "-q", "work")
    main_checkout = GitRepo(root)
    if not anyio.run(main_checkout.watch):
        return
    try:
        figures["watched_fast_forward_main"] = median_ms(
            lambda: anyio.run(lambda: main_checkout.fast_forward(landing[0])), runs, before=task_commit
        )
    finally:
        main_checkout.unwatch()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,50000", help="comma-separated repository sizes in files")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    results = {str(size): measure(size, args.runs) for size in sizes}
    small, large = results[str(sizes[0])], results[str(sizes[-1])]
    ratios = {name: round(large[name] / small[name], 1) for name in small if small[name] > 0}
    print(json.dumps({"benchmark": "git_ops", "ms": results, "ratio": ratios}, indent=2))


if __name__ == "__main__":
    main()
