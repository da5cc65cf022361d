"""Worktree pool: how much of a task's worktree cost does recycling save over a fresh worktree?

Prints JSON: on a repository of ``--dirs`` x ``--files-per-dir`` small files (one commit), the per-task
cost of ``WorktreePool.claim`` + ``release`` (size 2, after ``cold_start``; the task's edits are reset away)
against ``WorktreeManager.create`` + ``remove`` (git worktree add and remove), median/min/max of
``--iterations`` each (interleaved, after one warm-up of each), their ratio, and the cold start's wall time.

    python bench/worktree_pool.py [--iterations 15] [--dirs 50] [--files-per-dir 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from autodev.logging import configure_quiet_logging
from autodev.workspace.worktree import Worktree, WorktreeManager
from autodev.workspace.worktree_pool import WorktreePool

POOL_SIZE = 2
TARGET_RATIO = 0.3


def build_repo(root: Path, dirs: int, files_per_dir: int) -> str:
    for d in range(dirs):
        package = root / f"pkg_{d:02d}"
        package.mkdir(parents=True)
        for f in range(files_per_dir):
            (package / f"mod_{f:03d}.py").write_text(
                f'"""Module {d}.{f}."""\n\nVALUE = {d * files_per_dir + f}\n'
            )
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(
            ["git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", *args],
            cwd=root,
            check=True,
            capture_output=True,
        )
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def task_edits(worktree: Worktree, i: int) -> None:
    """What a small task leaves behind: one edited file, one new file, one ignored-style build artefact."""
    (worktree.path / "pkg_00" / "mod_000.py").write_text(f"VALUE = {i}\n")
    (worktree.path / "pkg_00" / f"new_{i}.py").write_text("NEW = True\n")
    (worktree.path / "__pycache__").mkdir(exist_ok=True)
    (worktree.path / "__pycache__" / "x.pyc").write_bytes(b"\0" * 64)


async def pool_iteration(pool: WorktreePool, i: int) -> float:
    start = time.perf_counter()
    worktree = await pool.claim(f"b{i}")
    elapsed = time.perf_counter() - start
    task_edits(worktree, i)
    start = time.perf_counter()
    await pool.release(worktree)
    return elapsed + time.perf_counter() - start


async def cold_iteration(manager: WorktreeManager, base: str, i: int) -> float:
    start = time.perf_counter()
    worktree = await manager.create(f"cold-{i}", base)
    elapsed = time.perf_counter() - start
    task_edits(worktree, i)
    start = time.perf_counter()
    await manager.remove(worktree)
    return elapsed + time.perf_counter() - start


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples) * 1000, 2),
        "min": round(min(samples) * 1000, 2),
        "max": round(max(samples) * 1000, 2),
    }


async def measure(root: Path, base: str, iterations: int) -> dict[str, object]:
    pool = WorktreePool(root, root / ".autodev" / "pool", POOL_SIZE)
    manager = WorktreeManager(root, root / ".autodev" / "cold")
    try:
        start = time.perf_counter()
        started = await pool.cold_start()
        cold_start_s = time.perf_counter() - start
        assert len(started) == POOL_SIZE, "cold start left the pool short"
        await pool_iteration(pool, -1)  # warm-up, as for the cold path below
        await cold_iteration(manager, base, -1)
        pool_samples: list[float] = []
        cold_samples: list[float] = []
        for i in range(iterations):  # interleaved, so drift in the machine's load hits both alike
            pool_samples.append(await pool_iteration(pool, i))
            cold_samples.append(await cold_iteration(manager, base, i))
        assert len(pool.active) == POOL_SIZE, "a recycled worktree was lost"
    finally:
        await pool.cleanup_all()
        await manager.cleanup_all()
    pool_ms, cold_ms = summary(pool_samples), summary(cold_samples)
    return {
        "pool_ms": pool_ms,
        "cold_ms": cold_ms,
        "ratio": round(pool_ms["median"] / cold_ms["median"], 3),
        "target_ratio": TARGET_RATIO,
        "cold_start_ms": round(cold_start_s * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--dirs", type=int, default=50)
    parser.add_argument("--files-per-dir", type=int, default=100)
    args = parser.parse_args()
    configure_quiet_logging()
    result: dict[str, object] = {"benchmark": "worktree_pool", "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve() / "repo"
        base = build_repo(root, args.dirs, args.files_per_dir)
        result["files"] = args.dirs * args.files_per_dir
        result["iterations"] = args.iterations
        result["pool_size"] = POOL_SIZE
        result.update(anyio.run(measure, root, base, args.iterations))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
