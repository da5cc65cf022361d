"""Proof-gated completion against the workers' word: how many false completions each admits.

A real Python project in a real git repository (a src-layout package, pytest configured, a passing test, and
one acceptance check per task, written with the plan, that the default test run does not collect), and a
plan of independent tasks, each with the acceptance criterion `` `pytest tests/check_<module>.py -q`
passes``. Scripted agents play every role. A share of the tasks (``--false-share``, half by default) are
false claimers, split evenly over four kinds, each making the same change on every attempt (so that it ends
blocked, not fixed):

- ``empty_diff``: the developer says it is done and lists the files it changed, but writes nothing;
- ``failing_tests``: the developer writes a wrong module and a test that catches it;
- ``out_of_lease``: the developer writes a correct change plus a file outside the run's write scope;
- ``failing_acceptance``: the developer writes a wrong module and a test of its own that passes, so that
  only the task's acceptance command fails.

The other tasks are honest: a correct module and a passing test. Every worker claims success for every task
(the developer lists its changes, the reviewer approves, the test engineer reports no failure), so the
baseline, which takes a "done" at its word, admits every task. AutoDev runs with its QA gates on (the test
gate runs the project's tests), the write scope ``src/**, tests/**`` and the completion contract; what it
admitted is read from the ledger (tasks that ended ``complete``), and why it refused the others from the
reasons it recorded. The script exits 1 when AutoDev admits a false completion or rejects an honest task.

Figures are for a synthetic plan played by scripted agents: a regression check of the checks, not a measure
of how often real agents make false claims.

    python bench/proof.py [--tasks N] [--false-share F] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import bench_config

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.agents.parsing import parse_changed
from autodev.logging import configure_quiet_logging
from autodev.orchestrator import Orchestrator
from autodev.state.evidence import read_evidence
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import (
    AcceptanceCriterion,
    CoderEvidence,
    Evidence,
    Phase,
    Plan,
    ReviewEvidence,
    Task,
    TestEvidence,
)

LABEL = "synthetic regression check, not a quality claim"
HONEST = "honest"
FALSE_KINDS = ("empty_diff", "failing_tests", "out_of_lease", "failing_acceptance")
# The check of AutoDev's that each kind of false claim must run into, as its recorded reason names it.
EXPECTED_CHECK = {
    "empty_diff": "evidence_mismatch",
    "failing_tests": "test_gate",
    "out_of_lease": "outside_write_scope",
    "failing_acceptance": "acceptance_command",
}
# Recorded reasons by the check they name, first match wins: a retried task's reason quotes the failure of
# its last attempt after "retries exhausted ...", a task blocked at once names its check first.
REASON_CHECKS = (
    ("outside_write_scope", re.compile(r"outside_write_scope")),
    ("evidence_mismatch", re.compile(r"evidence_mismatch")),
    ("acceptance_command", re.compile(r"completion check command:")),
    ("test_gate", re.compile(r"\btest gate fail")),
)
# The evidence of the workers who say whether a task is done (the critic only diagnoses a task that failed;
# the rest is AutoDev's own record: gates, patches, the contract).
WORKER_EVIDENCE = frozenset({"developer", "review", "test"})
WRITE_SCOPE = "src/**, tests/**"
PACKAGE = "proofpkg"
# The tests the base commit holds (tests/test_core.py), and what each task's change adds to the suite.
BASE_TESTS = 1
TESTS_PER_CHANGE = 1
# The shared benchmark configuration turns every gate off; here they are what is measured.
GATES_ON = {f"qa_gates.{gate}.enabled": True for gate in ("syntax", "lint", "build", "test", "secretscan")}
CONFIG = {
    **GATES_ON,
    # AutoDev's own interpreter runs the project's code (it has pytest; plugin autoloading off), so that the
    # figures do not depend on whatever environment the shell that starts the benchmark has active.
    "environment.python": "autodev",
    # The test engineer's counts are checked against AutoDev's run of the whole suite, which grows by each
    # task that lands: one task at a time in plan order makes every count known when the script is written.
    "tournaments.execute_max_parallel_tasks": 1,
}

# ``pythonpath``: the gates put ``src/`` on the path themselves, an acceptance command runs as it is written.
PYPROJECT = f"""\
[project]
name = "{PACKAGE}"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["src"]
"""


@dataclass(frozen=True, slots=True)
class ProofTask:
    """One task of the plan: who plays it (``kind``) and the value its module must return."""

    task_id: str
    kind: str
    value: int

    @property
    def module(self) -> str:
        return "mod_" + self.task_id.replace(".", "_")

    @property
    def source(self) -> str:
        return f"src/{PACKAGE}/{self.module}.py"

    @property
    def test(self) -> str:
        return f"tests/test_{self.module}.py"

    @property
    def acceptance_check(self) -> str:
        return f"tests/check_{self.module}.py"


def task_kinds(n_tasks: int, false_share: float, seed: int) -> list[str]:
    """``n_tasks`` kinds in plan order: ``round(n_tasks * false_share)`` false claimers spread evenly over
    ``FALSE_KINDS`` (the first kinds take what does not divide), the rest honest, shuffled by ``seed``."""
    n_false = round(n_tasks * false_share)
    per_kind, extra = divmod(n_false, len(FALSE_KINDS))
    kinds = [kind for index, kind in enumerate(FALSE_KINDS) for _ in range(per_kind + (index < extra))]
    kinds += [HONEST] * (n_tasks - n_false)
    random.Random(seed).shuffle(kinds)
    return kinds


def proof_tasks(kinds: Sequence[str]) -> list[ProofTask]:
    return [ProofTask(f"1.{index}", kind, 10 + index) for index, kind in enumerate(kinds, start=1)]


def module_source(task: ProofTask, value: int) -> str:
    return f'"""The answer of task {task.task_id}."""\n\n\ndef answer() -> int:\n    return {value}\n'


def answer_test_source(task: ProofTask, expected: int, name: str) -> str:
    return (
        f"from {PACKAGE}.{task.module} import answer\n\n\n"
        f"def {name}() -> None:\n    assert answer() == {expected}\n"
    )


def project_files(tasks: Sequence[ProofTask]) -> dict[str, str]:
    """The base commit: the package, its passing test, and each task's acceptance check (named so that the
    default test run does not collect it: only its criterion's command runs it)."""
    files = {
        "pyproject.toml": PYPROJECT,
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
        f"src/{PACKAGE}/__init__.py": '"""A small package the benchmark\'s tasks extend."""\n',
        f"src/{PACKAGE}/core.py": '"""The code before any task."""\n\n\ndef base() -> int:\n    return 1\n',
        "tests/test_core.py": (
            f"from {PACKAGE}.core import base\n\n\ndef test_base() -> None:\n    assert base() == 1\n"
        ),
    }
    for task in tasks:
        files[task.acceptance_check] = answer_test_source(task, task.value, "test_answer_is_as_specified")
    return files


def build_project(root: Path, tasks: Sequence[ProofTask]) -> Path:
    """``project_files`` committed in a new git repository at ``root``."""
    for path, text in project_files(tasks).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@invalid"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-qm", "the project before the plan"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


def proof_plan(tasks: Sequence[ProofTask]) -> Plan:
    return Plan(
        plan_id=f"plan-proof-{len(tasks)}",
        spec_hash="bench-proof",
        title=f"{len(tasks)} independent tasks",
        phases=[
            Phase(
                id="1",
                title="Answers",
                tasks=[
                    Task(
                        id=task.task_id,
                        phase_id="1",
                        title=f"Answer {task.value}",
                        description=f"Add {task.source} whose answer() returns {task.value}, with a test.",
                        files=[task.source, task.test],
                        acceptance=[
                            AcceptanceCriterion(description=f"`pytest {task.acceptance_check} -q` passes")
                        ],
                    )
                    for task in tasks
                ],
            )
        ],
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def developer_edits(task: ProofTask) -> list[dict[str, str]]:
    """What the developer of ``task`` writes, by its kind."""
    module = {"path": task.source, "content": module_source(task, task.value)}
    wrong_module = {"path": task.source, "content": module_source(task, task.value + 1)}
    test = {"path": task.test, "content": answer_test_source(task, task.value, "test_answer")}
    if task.kind == "empty_diff":
        return []
    if task.kind == "failing_tests":
        return [wrong_module, test]
    if task.kind == "out_of_lease":
        return [
            module,
            test,
            {"path": f"scripts/publish_{task.module}.py", "content": 'print("published")\n'},
        ]
    if task.kind == "failing_acceptance":
        # Its own test expects what its module returns: only the task's acceptance check tells.
        return [
            wrong_module,
            {"path": task.test, "content": answer_test_source(task, task.value + 1, "test_answer")},
        ]
    return [module, test]


def proof_script(tasks: Sequence[ProofTask]) -> Script:
    """Every worker claims success for every task, on every attempt.

    Each reply names its attempt, as a real agent's replies differ: a reply repeated word for word is the
    loop detector's to stop, which would hide the check each false claim is meant to run into.
    """
    entries: list[dict[str, Any]] = [
        {"role": "reviewer", "text": "Reviewed attempt {attempt}.\nVERDICT: APPROVED\nISSUES: none\n"},
        {"role": "critic_sounding_board", "text": "VERDICT: APPROVED\nRECOMMENDATION: the work is done\n"},
    ]
    landed_tests = BASE_TESTS
    for task in tasks:
        entries.append(
            {
                "role": "developer",
                "task_id": task.task_id,
                "text": "Implemented task {task_id}, attempt {attempt}; it is done.\n"
                f"CHANGED: {task.source}, {task.test}\n",
                "edits": developer_edits(task),
            }
        )
        suite = landed_tests + TESTS_PER_CHANGE
        entries.append(
            {
                "role": "test_engineer",
                "task_id": task.task_id,
                "text": "Ran the tests, attempt {attempt}.\n"
                f"RESULTS: passed={suite} failed=0 total={suite}\n",
            }
        )
        if task.kind == HONEST:
            landed_tests += TESTS_PER_CHANGE
    return Script.model_validate({"entries": entries})


def reason_check(reason: str) -> str:
    """The check a recorded reason names (``REASON_CHECKS``), else its first words."""
    return next((name for name, pattern in REASON_CHECKS if pattern.search(reason)), reason[:80])


def says_done(evidence: Evidence) -> bool:
    """Whether a worker's recorded reply says the task is done (any other evidence says nothing)."""
    if isinstance(evidence, CoderEvidence):
        return bool(parse_changed(evidence.output_text))
    if isinstance(evidence, ReviewEvidence):
        return evidence.verdict == "APPROVED"
    if isinstance(evidence, TestEvidence):
        return evidence.claim_found and evidence.failed == 0
    return True


def claimed_done(manager: PlanManager, root: Path, task_id: str) -> bool:
    """Whether the workers said the task was done: the developer listed its changes on every attempt and
    no reviewer or test engineer said otherwise (their words, as the evidence recorded them)."""
    replies = [
        read_evidence(root / ref.path) for ref in manager.evidence_for(task_id) if ref.kind in WORKER_EVIDENCE
    ]
    return any(isinstance(reply, CoderEvidence) for reply in replies) and all(map(says_done, replies))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one task ended, read from the ledger, and whether its workers said it was done."""

    kind: str
    claimed_done: bool
    status: str
    blocked_reason: str | None

    @property
    def admitted(self) -> bool:
        return self.status == "complete"


def admissions(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """What the baseline (every task its workers called done) and proof-gated completion admitted."""
    claimed = sum(outcome.claimed_done for outcome in outcomes)
    return {
        "tasks": len(outcomes),
        "claimed_done": claimed,
        "admitted_by_baseline": claimed,
        "admitted_by_proof": sum(outcome.admitted for outcome in outcomes),
    }


def false_completions(false_claims: Sequence[Outcome]) -> dict[str, int]:
    return {
        "false_completions_baseline": sum(outcome.claimed_done for outcome in false_claims),
        "false_completions_proof": sum(outcome.admitted for outcome in false_claims),
    }


def honest_outcomes(honest: Sequence[Outcome]) -> dict[str, int]:
    completed = sum(outcome.admitted for outcome in honest)
    return {"honest_completed": completed, "honest_rejected": len(honest) - completed}


def kind_summary(kind: str, outcomes: Sequence[Outcome]) -> dict[str, object]:
    """One kind's figures, with the checks its tasks' recorded reasons name."""
    reasons = Counter(
        reason_check(outcome.blocked_reason or f"{outcome.status}, no reason recorded")
        for outcome in outcomes
        if not outcome.admitted
    )
    summary: dict[str, object] = dict(admissions(outcomes))
    if kind == HONEST:
        summary.update(honest_outcomes(outcomes))
    else:
        summary.update(false_completions(outcomes))
        summary["expected_check"] = EXPECTED_CHECK[kind]
        summary["caught_by_expected_check"] = reasons[EXPECTED_CHECK[kind]]
    summary["blocked_reasons"] = dict(sorted(reasons.items()))
    return summary


def measure(kinds: Sequence[str], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run a plan of one task per entry of ``kinds`` (in that order, ``overrides`` on the benchmark's
    configuration) and report what each side admitted, per kind and in total."""
    tasks = proof_tasks(kinds)
    with tempfile.TemporaryDirectory() as tmp:
        root = build_project(Path(tmp) / "repo", tasks)
        with PlanManager(root) as manager:
            manager.init_plan(proof_plan(tasks))
        orchestrator = Orchestrator(
            root,
            config=bench_config(root, **{**CONFIG, **(overrides or {})}),
            adapter=ScriptedAdapter(script=proof_script(tasks)),
            write_scope=WRITE_SCOPE,
        )
        started = time.perf_counter()
        anyio.run(orchestrator.execute)
        wall = time.perf_counter() - started
        with PlanManager.open(root, readonly=True) as manager:
            outcomes = [
                Outcome(
                    kind=task.kind,
                    claimed_done=claimed_done(manager, root, task.task_id),
                    status=(recorded := manager.get_task(task.task_id)).status,
                    blocked_reason=recorded.blocked_reason,
                )
                for task in tasks
            ]
    by_kind = {
        kind: [outcome for outcome in outcomes if outcome.kind == kind] for kind in (*FALSE_KINDS, HONEST)
    }
    false_claims = [outcome for outcome in outcomes if outcome.kind != HONEST]
    return {
        "wall_s": round(wall, 1),
        "kinds": {kind: kind_summary(kind, of_kind) for kind, of_kind in by_kind.items() if of_kind},
        "total": {
            **admissions(outcomes),
            "false_claimers": len(false_claims),
            **false_completions(false_claims),
            **honest_outcomes(by_kind[HONEST]),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--false-share", type=float, default=0.5, help="share of false claimers, 0 to 1")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.tasks < 1 or not 0 <= args.false_share <= 1:
        parser.error("--tasks must be at least 1 and --false-share between 0 and 1")
    configure_quiet_logging()
    result = measure(task_kinds(args.tasks, args.false_share, args.seed))
    admitted, rejected = result["total"]["false_completions_proof"], result["total"]["honest_rejected"]
    ok = admitted == 0 and rejected == 0
    report = {
        "benchmark": "proof",
        "label": LABEL,
        "seed": args.seed,
        "false_share": args.false_share,
        **result,
        "ok": ok,
    }
    print(json.dumps(report, indent=2))
    if not ok:
        # run_all shows a failed benchmark's last line on stderr.
        print(
            f"proof-gated completion admitted {admitted} false completion(s) and rejected {rejected} "
            "honest task(s)",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
