"""How long `autodev report` takes to make the page of a large run, from its ledger and evidence alone.

A plan of N tasks (1,000 by default) is recorded as a run would record it: every task through developer,
gates, review, tests and completion to complete, one in ten sent back once by its reviewer, one in fifty
through a two-pass implementation tournament of three judges, with a developer record, a gates record, a
review, a test record, a completion contract and a patch per attempt. No agent runs: only the report is timed
(the median of ``--runs`` makes, each a fresh process's work: gather and render). Target: under 3 s for 1,000
tasks. ``--keep DIR`` records the run in ``DIR`` and leaves it there with its page (a browser test opens it).

    python bench/report.py [--tasks 1000] [--per-phase 100] [--runs 3] [--keep DIR]
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
    TournamentEvidence,
)

PATCH = (
    "diff --git a/src/m.py b/src/m.py\nnew file mode 100644\n--- /dev/null\n+++ b/src/m.py\n"
    '@@ -0,0 +1,3 @@\n+def value() -> int:\n+    """The value."""\n+    return 1  # one\n'
)


def _tournament_pass(number: int, winner: str) -> dict[str, object]:
    """One pass as ``TournamentEvidence.history`` keeps it: three judges, Borda points, the decision."""
    rankings = [["AB", "A", "B"], ["AB", "B", "A"], ["A", "AB", "B"]]
    judges: list[dict[str, object]] = [
        {"judge_no": n, "valid": True, "ranking": ranking, "reason": None}
        for n, ranking in enumerate(rankings, 1)
    ]
    if number == 2:
        judges[2] = {"judge_no": 3, "valid": False, "ranking": None, "reason": "not a ranking of A, B, AB"}
    return {
        "pass_no": number,
        "status": "decided",
        "winner": winner,
        "margin": 2,
        "scores": {
            winner: 5,
            **{other: points for other, points in (("A", 3), ("AB", 3), ("B", 1)) if other != winner},
        },
        "judges": judges,
    }


def record_run(root: Path, n_tasks: int, per_phase: int = 100) -> None:
    """Record ``n_tasks`` tasks from start to complete, as the execute phase records them."""
    with PlanManager(root) as plans:
        plans.init_plan(independent_plan(n_tasks, per_phase))
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
            if number % 50 == 0:
                plans.record_evidence(
                    TournamentEvidence(
                        task_id=task.id,
                        attempt=attempts,
                        tournament_id=f"impl-{task.id}",
                        phase="impl",
                        passes=2,
                        winner="AB",
                        converged=True,
                        history=[_tournament_pass(1, "AB"), _tournament_pass(2, "A")],
                    )
                )
            plans.update_task_status(task.id, "tournamented")
            plans.record_patch(task.id, PATCH, attempt=attempts)
            plans.update_task_status(task.id, "complete", commit="c" * 40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--per-phase", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="record the run here and leave it (with its page)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(args.keep or Path(tmp) / "repo")
        started = time.perf_counter()
        record_run(root, args.tasks, args.per_phase)
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
                "page": str(page) if args.keep else None,
                "target_s": 3.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
