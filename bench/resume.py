"""Resume cost: open and replay a ledger of 100,000 ops.

Builds a 1,000-task plan whose tasks go round the developer/gates retry loop until the ledger holds the
requested number of ops, then measures (in fresh processes, median of runs) a full replay without the
snapshot and an open that starts from a stale snapshot. The ledger lines are written with the ledger's own
canonical encoder but without one fsync per line, which only shortens the set-up.

    python bench/resume.py [--ops 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import independent_plan

from autodev.logging import configure_quiet_logging
from autodev.state.ledger import _canonical_body
from autodev.state.plan_manager import PlanManager

PROBE = """
import sys, time
from pathlib import Path
from autodev.state.plan_manager import PlanManager
start = time.perf_counter()
manager = PlanManager(Path(sys.argv[1]), readonly=True, use_snapshot=sys.argv[2] == "snapshot")
manager.load()
print(time.perf_counter() - start, manager.ledger_head.seq)
"""


def build(root: Path, n_ops: int) -> int:
    """Write a valid ledger of about ``n_ops`` entries; returns the number written."""
    plan = independent_plan(1_000)
    with PlanManager(root) as manager:
        manager.init_plan(plan)
        head = manager.ledger_head
    seq, prev = head.seq, head.hash
    ids = [task.id for task in plan.iter_tasks()]
    with (root / ".autodev" / "ledger.jsonl").open("ab") as handle:
        round_no = 0
        while seq < n_ops:
            for task_id in ids:
                if seq >= n_ops:
                    break
                ops: list[tuple[str, dict[str, object]]] = (
                    [("task_status", {"task_id": task_id, "from": "pending", "to": "in_progress"})]
                    if round_no == 0
                    else []
                )
                ops += [
                    ("task_status", {"task_id": task_id, "from": "in_progress", "to": "coded"}),
                    (
                        "task_retry",
                        {
                            "task_id": task_id,
                            "retry_count": round_no + 1,
                            "issues": ["lint: E501"],
                            "from": "coded",
                            "to": "in_progress",
                        },
                    ),
                ]
                for op, payload in ops:
                    seq += 1
                    body = _canonical_body(seq, "2026-01-01T00:00:00.000000+00:00", op, payload, prev)
                    digest = hashlib.sha256(body).hexdigest()
                    handle.write(body[:-1] + b',"hash":"' + digest.encode() + b'"}\n')
                    prev = digest
            round_no += 1
    return seq


def timed(root: Path, mode: str, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(root), mode], capture_output=True, text=True, check=True
        )
        samples.append(float(out.stdout.split()[0]))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    configure_quiet_logging()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written = build(root, args.ops)
        size = (root / ".autodev" / "ledger.jsonl").stat().st_size
        replay = timed(root, "replay", args.runs)
        stale = timed(root, "snapshot", args.runs)
        started = time.perf_counter()
        with PlanManager(root):
            pass  # a writable open verifies, replays the tail and writes a fresh snapshot
        rewrite = time.perf_counter() - started
        fresh = timed(root, "snapshot", args.runs)
    print(
        json.dumps(
            {
                "benchmark": "resume",
                "ops": written,
                "ledger_mb": round(size / 1e6, 1),
                "full_replay_s_median": round(statistics.median(replay), 3),
                "open_stale_snapshot_s_median": round(statistics.median(stale), 3),
                "open_current_snapshot_s_median": round(statistics.median(fresh), 3),
                "writable_open_with_snapshot_rewrite_s": round(rewrite, 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
