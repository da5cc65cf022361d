"""SIGKILL ``autodev run`` (and sometimes the resume too), resume until done, and compare with a clean run.

The scenario (``support.crash``): 8 tasks in 2 phases, scripted agents with 0.05-0.2 s latencies, real git,
real syntax/lint/test gates. The fast subset here kills at a few points chosen by a fixed seed, one in each
kind of work: the plan phase, a developer call (with the resume killed twice more), a gate run, and the
moment between a task's commit and the ledger entry that records it. Each kill point is a delay after a
line of the run's output, so it lands in the same step on a slow machine as on a fast one.
``bench/crash_sweep.py`` runs the full sweep of seeded kill times over the whole run.

The tests named ``test_bug_*`` reproduce defects found by the sweep; they fail until the defect is fixed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.crash import (
    Fingerprint,
    KillAt,
    Recovery,
    Scenario,
    check_invariants,
    final_fingerprint,
    kill_and_recover,
    make_scenario,
    progress_lines,
    restore_git_speed,
    run_cli,
    run_timed,
    slow_down_git_add,
    start_and_kill,
    stray_processes,
)

pytestmark = pytest.mark.slow

SEED = 20_260_601


@dataclass(frozen=True, slots=True)
class Case:
    """Where to kill ``autodev run``, where to kill the resumes that follow, and what a resume must say."""

    run: KillAt
    resumes: tuple[KillAt, ...] = ()
    resume_says: str | None = None
    workers: int = 1


def _cases(seed: int) -> dict[str, Case]:
    rng = random.Random(seed)
    return {
        # Inside the domain expert's call: the explorer's recorded findings must be reused, not lost.
        "plan-phase": Case(
            KillAt(rng.uniform(0.0, 0.06), "domain_expert working"),
            resume_says="explorer: reusing the findings recorded earlier",
        ),
        # Inside a developer call; then the resume dies in a gate run, and the next one in the test step.
        "developer": Case(
            KillAt(rng.uniform(0.0, 0.1), "[1.3/develop] developer working"),
            (
                KillAt(rng.uniform(0.1, 0.3), "[1.3/gates] QA gates running"),
                KillAt(rng.uniform(0.0, 0.05), "[1.4/test] test_engineer working"),
            ),
        ),
        # Somewhere in the syntax, lint or pytest run of the gates.
        "gates": Case(KillAt(rng.uniform(0.05, 0.35), "[2.1/gates] QA gates running")),
        # The commit exists but the ledger does not say so yet: the resume must record it, not commit again.
        "commit": Case(KillAt(rng.uniform(0.0, 0.01), "[2.2/commit] committing", trigger="committed")),
        # Three tasks at once in their own worktrees: killed while several agents work; the first resume
        # is killed inside a ledger transaction while other workers are mid-step, the second between a
        # merge onto the branch and the ledger entry that records it.
        "parallel": Case(
            KillAt(rng.uniform(0.0, 0.1), "[1.2/develop] developer working"),
            (
                KillAt(rng.uniform(0.0, 0.05), "reviewer working", trigger="ledger_lock"),
                KillAt(0.0, "merging", trigger="committed"),
            ),
            workers=3,
        ),
    }


CASES = _cases(SEED)


@dataclass(frozen=True, slots=True)
class Reference:
    """What the uninterrupted run left in git, and how long it took."""

    fingerprint: Fingerprint
    duration_s: float


def _reference_run(root: Path) -> Reference:
    """One uninterrupted run of the scenario: what every killed run must end up equal to."""
    scenario = make_scenario(root)
    run = run_timed(scenario.repo, scenario.run_args(), scenario.env, root / "run.log")
    assert run.code == 0, run.output[-3000:]
    fingerprint = final_fingerprint(scenario.repo)
    assert len(fingerprint.commits) == 9, fingerprint.commits  # the initial commit and one per task
    # The invariants hold for a run nobody killed; otherwise a failure below would prove nothing.
    assert check_invariants(scenario.repo, fingerprint) == []
    return Reference(fingerprint, run.duration_s)


def _report(recovery: Recovery, log: Path) -> str:
    kills = "\n".join(f"  {kill.command} at {kill.at}: {kill.activity}" for kill in recovery.kills)
    tail = "\n".join(progress_lines(log)[-15:])
    return f"kills:\n{kills}\nresume exit codes: {[run.code for run in recovery.resumes]}\nlog tail:\n{tail}"


@dataclass(frozen=True, slots=True)
class Killed:
    """One case's scenario, its log, and what it took to recover it."""

    scenario: Scenario
    log: Path
    recovery: Recovery


@pytest.fixture(scope="module")
def crash_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Any]]]:
    """The reference run and every case, killed and recovered, side by side.

    A run spends much of its time waiting on agent latencies and child processes, so running them at once
    keeps this file fast; each kill point is a line of that run's own output, so a run slowed down by the
    others still dies in the same step.
    """

    def kill_and_resume(name: str) -> Killed:
        root = tmp_path_factory.mktemp(f"crash-{name}")
        scenario = make_scenario(root, workers=CASES[name].workers)
        log = root / "autodev.log"
        return Killed(scenario, log, kill_and_recover(scenario, log, CASES[name].run, CASES[name].resumes))

    def kill_in_lock_window(window: str) -> Killed:
        widen, _, delay_s = GIT_LOCK_WINDOWS[window]
        root = tmp_path_factory.mktemp("crash-lock")
        scenario = make_scenario(root)
        widen(scenario.repo)
        log = root / "autodev.log"
        recovery = kill_and_recover(
            scenario,
            log,
            KillAt(delay_s, "[1.2/commit] committing"),
            after_first_kill=lambda: restore_git_speed(scenario.repo),
        )
        return Killed(scenario, log, recovery)

    with ThreadPoolExecutor(max_workers=len(CASES) + len(GIT_LOCK_WINDOWS) + 1) as pool:
        runs: dict[str, Future[Any]] = {
            "reference": pool.submit(_reference_run, tmp_path_factory.mktemp("crash-reference"))
        }
        runs.update({name: pool.submit(kill_and_resume, name) for name in CASES})
        for window in GIT_LOCK_WINDOWS:
            runs[f"lock:{window}"] = pool.submit(kill_in_lock_window, window)
        yield runs


@pytest.fixture(scope="module")
def reference(crash_runs: dict[str, Future[Any]]) -> Reference:
    result: Reference = crash_runs["reference"].result()
    return result


@pytest.fixture(scope="module")
def killed_runs(crash_runs: dict[str, Future[Any]]) -> dict[str, Future[Any]]:
    return {name: future for name, future in crash_runs.items() if name != "reference"}


@pytest.mark.parametrize("name", list(CASES))
def test_killed_run_resumes_to_the_same_result(
    name: str, reference: Reference, killed_runs: dict[str, Future[Any]]
) -> None:
    killed: Killed = killed_runs[name].result()
    recovery = killed.recovery

    report = _report(recovery, killed.log)
    assert all(kill.killed for kill in recovery.kills), f"a kill came too late to land:\n{report}"
    assert recovery.finished, f"`autodev resume` never finished the run:\n{report}"
    ordered = CASES[name].workers == 1
    problems = recovery.problems() + check_invariants(
        killed.scenario.repo, reference.fingerprint, ordered=ordered
    )
    assert problems == [], f"{report}\nproblems:\n" + "\n".join(problems)
    expected = CASES[name].resume_says
    assert expected is None or expected in killed.log.read_text(), f"no {expected!r}:\n{report}"


# How to hold a git lock long enough for a kill to land inside it, which lock that is, and when to kill
# (after the "committing" line): `git add` runs the clean filter with the index locked. `git commit` holds
# HEAD.lock only while it writes the ref, and AutoDev's git calls run no hook that could widen that window;
# the stale HEAD and ref locks such a kill leaves are cleared the same way (tests/cli/test_cli_clean.py).
GIT_LOCK_WINDOWS: dict[str, tuple[Callable[[Path], None], str, float]] = {
    "git add holds index.lock": (lambda repo: slow_down_git_add(repo, 0.3), ".git/index.lock", 0.1),
}


@pytest.mark.parametrize("window", list(GIT_LOCK_WINDOWS))
def test_a_kill_while_git_holds_a_lock_still_resumes(
    window: str, reference: Reference, killed_runs: dict[str, Future[Any]]
) -> None:
    """A kill inside a task's ``git add`` or ``git commit`` leaves git's lock file behind.

    Every later git write then fails ("Unable to create '.git/index.lock': File exists", or "cannot lock
    ref 'HEAD'"), so no resume can commit a task again: the run cannot finish until someone deletes the
    lock by hand. The windows are a millisecond or two per commit (the sweep hits them at random); a slow
    clean filter (as git-lfs installs) widens the index's so the kill is sure to land in it (and is
    removed again before the resumes, which need not crawl).
    """
    killed: Killed = killed_runs[f"lock:{window}"].result()
    recovery, lock = killed.recovery, GIT_LOCK_WINDOWS[window][1]

    report = _report(recovery, killed.log)
    assert lock in recovery.kills[0].left["git_locks"], f"the kill missed git's lock window:\n{report}"
    problems = recovery.problems() + check_invariants(killed.scenario.repo, reference.fingerprint)
    assert recovery.finished, f"`autodev resume` never finished the run:\n{report}\n" + "\n".join(problems)
    assert problems == [], f"{report}\nproblems:\n" + "\n".join(problems)


@pytest.mark.parametrize("workers", [1, 3], ids=["main tree", "task worktree"])
def test_a_resume_first_stops_the_gate_tool_a_killed_run_left_running(tmp_path: Path, workers: int) -> None:
    """A gate tool (or agent CLI) runs in a session of its own, so a SIGKILL to AutoDev's group does not reach
    it. The run registers it; the next run, holding the run lock, stops it before doing anything else.
    A slow lint command makes the window wide enough to see. With parallel tasks the gate runs in the
    task's worktree, and must still be registered where the next run looks.
    """
    scenario = make_scenario(tmp_path, workers=workers)
    # Slow only where task 1.1's change is: the baseline taken on the base commit at the start runs the
    # same lint command, and must not spend the sleeper's time before the run reaches the task's gates.
    sleeper = [
        sys.executable,
        "-c",
        "import os, time; time.sleep(30 if os.path.exists('mathkit/add.py') else 0)",
    ]
    scenario.env["AUTODEV_QA_GATES__LINT__COMMAND"] = json.dumps(sleeper)

    kill = start_and_kill(
        scenario, scenario.run_args(), tmp_path / "autodev.log", KillAt(0.5, "[1.1/gates] QA gates running")
    )
    assert kill.killed, kill.activity
    assert [text for _, text in stray_processes(scenario.repo)] != [], "the kill landed outside the gate"
    # `autodev status` is read-only and never touches them; a writing command with the run lock does.
    run_cli(["status", "--json"], scenario.env, 60, repo=scenario.repo)
    assert stray_processes(scenario.repo) != []
    run_cli(["approve"], scenario.env, 60, repo=scenario.repo)
    strays = stray_processes(scenario.repo)
    for pid, _ in strays:  # never let the test's own leftovers outlive it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert [text for _, text in strays] == [], f"killed at {kill.activity}"
