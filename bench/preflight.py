"""Preflight and baseline cost: the time from `autodev execute` to the first agent call, on a project with
1,000 tests (fresh processes, medians).

Three starts of the same saved plan, each ending at its first agent call (the inline platform suspends
there, so the process's wall time is exactly that):

- ``no_baseline``: the test gate turned off, so the preflight has no test run to take (the reference);
- ``cold``: the first start on the commit: the base's 1,000 tests run once, in the main checkout;
- ``cached``: every later start on the same commit: the baseline comes from ``.autodev/baseline/``.

A start before them is not counted: it caches Python's bytecode, as an installed package has it
(``installed_environment``). Target: ``cached`` at most 1.2 times ``no_baseline``.

    python bench/preflight.py [--tests 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cli_startup import installed_environment, summary

PLAN = """# Plan: One change

## Phase 1: Change

### Task 1.1: Touch the package
- Description: Add a constant to bigpkg/extra.py.
- Files: bigpkg/extra.py
"""


def _autodev() -> list[str]:
    exe = Path(sys.executable).with_name("autodev")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "autodev"]


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def make_project(root: Path, tests: int) -> None:
    """A package and ``tests`` trivial tests in files of 50, committed."""
    (root / "bigpkg").mkdir(parents=True)
    (root / "bigpkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "tests").mkdir()
    per_file = 50
    for index in range((tests + per_file - 1) // per_file):
        count = min(per_file, tests - index * per_file)
        body = "from bigpkg import VALUE\n\n" + "".join(
            f"\ndef test_{index}_{n}() -> None:\n    assert VALUE == 1\n" for n in range(count)
        )
        (root / "tests" / f"test_file_{index}.py").write_text(body)
    (root / "pyproject.toml").write_text('[project]\nname = "bigpkg"\nversion = "0"\n')
    (root / "plan.md").write_text(PLAN)
    (root / ".gitignore").write_text("plan.md\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")


def _env(*, tests_on: bool) -> dict[str, str]:
    env = {key: value for key, value in installed_environment().items() if not key.startswith("AUTODEV_")}
    # The project runs in this interpreter's environment, without the plugins installed beside it.
    env["AUTODEV_ENVIRONMENT__PYTHON"] = "autodev"
    # One task at a time: the worktree comparison of a parallel start is a separate, one-off cost.
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"
    if not tests_on:
        env["AUTODEV_QA_GATES__TEST__ENABLED"] = "false"
    return env


def start_to_first_call(root: Path, *, tests_on: bool, keep_baseline: bool) -> float:
    """Seconds from `autodev execute` to its first agent call, on a freshly saved plan."""
    state = root / ".autodev"
    kept = None
    if keep_baseline and (state / "baseline").is_dir():
        kept = root.parent / "baseline-kept"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(state / "baseline", kept)
    shutil.rmtree(state, ignore_errors=True)
    env = _env(tests_on=tests_on)
    subprocess.run(
        [*_autodev(), "-C", str(root), "plan", "--from-markdown", str(root / "plan.md")],
        check=True,
        capture_output=True,
        env=env,
    )
    if kept is not None:
        shutil.copytree(kept, state / "baseline")
    begin = time.perf_counter()
    result = subprocess.run(
        # The task's file is declared writable, as a user's run would: no approval stops it first.
        [*_autodev(), "-C", str(root), "execute", "--platform", "inline", "--write-scope", "bigpkg/**"],
        capture_output=True,
        text=True,
        env=env,
    )
    elapsed = time.perf_counter() - begin
    if result.returncode != 3 or "Suspended: the developer step of 1.1" not in result.stdout:
        raise SystemExit(f"execute did not stop at its first agent call:\n{result.stdout}\n{result.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autodev-bench-") as tmp:
        root = Path(tmp) / "project"
        make_project(root, args.tests)
        start_to_first_call(root, tests_on=False, keep_baseline=False)  # not counted: caches the bytecode
        no_baseline = [
            start_to_first_call(root, tests_on=False, keep_baseline=False) for _ in range(args.runs)
        ]
        cold = [start_to_first_call(root, tests_on=True, keep_baseline=False) for _ in range(args.runs)]
        cached = [start_to_first_call(root, tests_on=True, keep_baseline=True) for _ in range(args.runs)]
    ratio = statistics.median(cached) / statistics.median(no_baseline)
    print(
        json.dumps(
            {
                "benchmark": "preflight",
                "tests": args.tests,
                "runs": args.runs,
                "no_baseline": summary(no_baseline),
                "cold": summary(cold),
                "cached": summary(cached),
                "cached_over_no_baseline": round(ratio, 3),
                "target": "cached_over_no_baseline <= 1.2",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
