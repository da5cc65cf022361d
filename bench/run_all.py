"""Run every benchmark and print one JSON summary (each benchmark also runs alone; see its docstring).

    python bench/run_all.py [--quick]

``--quick`` shrinks the sizes (for a smoke run); the figures in docs/performance.md use the defaults.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent

BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    # name: (default arguments, quick arguments)
    "ledger_scaling": ([], ["--transitions", "100", "--status-runs", "3"]),
    "overhead": ([], ["--tasks", "20"]),
    "overhead_large_repository": (
        ["--tasks", "100", "--repo-files", "50000"],
        ["--tasks", "10", "--repo-files", "2000"],
    ),
    "resume": (["--ops", "100000"], ["--ops", "10000", "--runs", "1"]),
    "cli_startup": ([], ["--runs", "3"]),
    "memory": (["--tasks", "1000"], ["--tasks", "50"]),
    "makespan": ([], ["--quick"]),
    "makespan_floor": ([], ["--quick"]),
    "routing": ([], ["--quick"]),
    "git_ops": ([], ["--sizes", "100,1000", "--runs", "2"]),
    "worktree_pool": ([], ["--dirs", "10", "--iterations", "3"]),
    "preflight": ([], ["--tests", "100", "--runs", "1"]),
    "proof": ([], ["--tasks", "8"]),
    "report": ([], ["--tasks", "50", "--runs", "1"]),
    "ray_executor": ([], ["--quick"]),
}

# Entries that run another benchmark's script with other arguments.
SCRIPTS = {"overhead_large_repository": "overhead"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), default=None)
    args = parser.parse_args()
    summary: dict[str, object] = {}
    failed = False
    for name, (default, quick) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        result = subprocess.run(
            [
                sys.executable,
                str(HERE / f"{SCRIPTS.get(name, name)}.py"),
                *(quick if args.quick else default),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            failed = True
            summary[name] = {"error": result.stderr.strip().splitlines()[-1:] or ["failed"]}
            continue
        summary[name] = json.loads(result.stdout)
    print(json.dumps(summary, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
