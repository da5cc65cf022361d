"""How long `autodev report` takes to make the page of a large run, from its ledger and evidence alone.

A plan of N tasks (1,000 by default) is recorded as a run would record it: every task through developer,
gates, review, tests and completion to complete, one in ten sent back once by its reviewer, with a developer
record, a gates record, a review, a test record, a completion contract and a patch per attempt. No agent runs:
only the report is timed (the median of ``--runs`` makes, each a fresh process's work: gather and render).
Target: under 3 s for 1,000 tasks.

    python bench/report.py [--tasks 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import git_repo, independent_plan

from autodev.report.writer import write_report
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import (
    CoderEvidence,
    CompletionEvidence,
    GateCheck,
    GateEvidence,
    RequiredCheck,
    ReviewEvidence,
    TestEvidence,
)

PATCH = (
    "diff --git a/src/m.py b/src/m.py\nnew file mode 100644\n--- /dev/null\n+++ b/src/m.py\n"
    "@@ -0,0 +1 @@\n+V = 1\n"
)


def record_run(root: Path, n_tasks: int) -> None:
    """Record ``n_tasks`` tasks from start to complete, as the execute phase records them."""
    with PlanManager(root) as plans:
        plans.init_plan(independent_plan(n_tasks))
        for number, task in enumerate(plans.tasks()):
            attempts = 2 if number % 10 == 0 else 1
            plans.update_task_status(task.id, "in_progress", base_commit="0" * 40)
            for attempt in range(1, attempts + 1):
                plans.record_evidence(
                    CoderEvidence(task_id=task.id, attempt=attempt, diff=PATCH, success=True)
                )
                plans.record_patch(task.id, PATCH, attempt=attempt, developer=True)
                plans.update_task_status(task.id, "coded")
                check = GateCheck(gate="test", status="pass", counts_as_pass=True)
                plans.record_evidence(
                    GateEvidence(task_id=task.id, attempt=attempt, passed=True, checks=[check])
                )
                plans.update_task_status(task.id, "auto_gated")
                verdict = "APPROVED" if attempt == attempts else "NEEDS_CHANGES"
                plans.record_evidence(ReviewEvidence(task_id=task.id, attempt=attempt, verdict=verdict))
                if attempt < attempts:
                    plans.mark_task_retry(task.id, ["reviewer: not yet"], back_to_developer=True)
            plans.update_task_status(task.id, "reviewed")
            plans.record_evidence(
                TestEvidence(task_id=task.id, attempt=attempts, passed=1, failed=0, total=1)
            )
            plans.update_task_status(task.id, "tested")
            semantic = RequiredCheck(
                id="semantic:1", kind="semantic", description="it works", status="settled"
            )
            contract = CompletionEvidence(
                task_id=task.id,
                attempt=attempts,
                verdict="verified",
                revision="f" * 40,
                checkout=".",
                checks=[semantic],
            )
            plans.record_evidence(contract)
            plans.update_task_status(task.id, "tournamented")
            plans.record_patch(task.id, PATCH, attempt=attempts)
            plans.update_task_status(task.id, "complete", commit="c" * 40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        started = time.perf_counter()
        record_run(root, args.tasks)
        recorded_s = time.perf_counter() - started
        timings = []
        for _ in range(args.runs):
            started = time.perf_counter()
            page = write_report(root, root / ".autodev" / "report")
            timings.append(time.perf_counter() - started)
        size = page.stat().st_size
    print(
        json.dumps(
            {
                "benchmark": "report",
                "tasks": args.tasks,
                "recording_s": round(recorded_s, 2),
                "report_s_median": round(statistics.median(timings), 3),
                "report_s_min": round(min(timings), 3),
                "report_s_max": round(max(timings), 3),
                "page_bytes": size,
                "target_s": 3.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
