"""Crash sweep: SIGKILL ``autodev run`` at many seeded moments, resume each until done, check every invariant.

Prints JSON: kills attempted and survived, the failures with what went wrong, every kill point (its delay,
what the reference run was doing then, what the killed process was actually doing, what it left on disk),
and the sweep's duration. Exit status 0 only when every kill was survived.

    python bench/crash_sweep.py [--kills 40] [--seed 1] [--resume-kill-share 0.25] [--trigger-share 0.25]
                                [--workers 1] [--hostile] [--keep DIR]

The scenario is ``tests/support/crash.py``'s: 8 tasks in 2 phases, scripted agents with 0.05-0.2 s
latencies, real git and real syntax/lint/test gates. An uninterrupted run is measured first; the kill times
are then spread over its whole duration, stratified so that the plan phase (about a tenth of the run) gets
its share. A quarter of the points (``--trigger-share``) kill at the first moment after their delay when a
narrow window is open: the ledger lock held (evidence write, append, snapshot), an evidence file being
written, a git lock held, or a commit made but not yet recorded. A quarter of the points
(``--resume-kill-share``) also kill the resumes that follow, once or twice, before the final resume.

Invariants (``check_invariants``): every task complete, each recorded complete exactly once; ``autodev
ledger verify`` passes; ``plan.json`` equals the ledger replay; the tracked tree and the commit list equal
the uninterrupted run's (as a set with ``--workers`` above 1: parallel tasks merge in completion order);
nothing uncommitted; one worktree; no pinned task commit; no process left in the repository; no lock held.
Every resume that was not killed must finish the run. Progress goes to stderr; stdout carries only the JSON.

``--hostile`` plays the same scenario through an agent CLI with a shell (``make_scenario(hostile=True)``):
on five seeded developer, reviewer and test engineer calls it also plants a post-commit hook and an
fsmonitor, makes a tag, or commits on its own, each at most once. The reference run is played the same way.
A run AutoDev stops for what the agent did (exit 3: a moved ref found after the call, or whatever changed
across a call the killed process never checked, found at the next start) is then undone by the harness as
the user would, and resumed; a kill not yet landed is still due in the resume. Such stops are no failures
but are recorded per point (``agent_stops``) and counted, with what became of every act (``acts``). Some of
the trigger points wait for the moment just after an act (``agent_acted``). Extra invariants
(``check_hostile``): no planted program ever ran, nothing planted is left, and whatever the harness found
planted at a stop was named by it; every tag the agent made was named by some stop.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autodev.logging import configure_quiet_logging

# The scenario and the invariants live with the crash tests.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.crash import (  # noqa: E402
    Fingerprint,
    KillAt,
    KillOutcome,
    TimedRun,
    act_outcomes,
    check_hostile,
    check_invariants,
    final_fingerprint,
    kill_and_recover,
    make_scenario,
    run_timed_as_user,
)

TRIGGERS = ("ledger_lock", "evidence_write", "git_lock", "committed")
# Hostile mode: just after one of the agent's acts, before AutoDev's check of the call.
HOSTILE_TRIGGER = "agent_acted"
_PLAN_WORDS = ("explorer", "domain_expert", "architect", "plan phase", "plan tournament", "platform:")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def category(step: str) -> str:
    """The kind of work a progress line belongs to: plan, develop, gates, review, test, verify, commit..."""
    if step.startswith("[") and "/" in step.split("]", 1)[0]:
        return step[1:].split("]", 1)[0].split("/", 1)[1]
    if any(word in step for word in _PLAN_WORDS):
        return "plan"
    if step.startswith("execute phase"):
        return "execute start"
    return "startup" if step == "startup" else "other"


def _stratified(rng: random.Random, count: int, low: float, high: float) -> list[float]:
    """``count`` times in [low, high): one uniformly random time in each of ``count`` equal slices."""
    width = (high - low) / count
    return [round(low + width * (index + rng.random()), 3) for index in range(count)]


def plan_points(
    rng: random.Random,
    kills: int,
    reference: TimedRun,
    trigger_share: float,
    resume_kill_share: float,
    last_act_s: float | None = None,
) -> list[tuple[KillAt, tuple[KillAt, ...]]]:
    """Where to kill the run (and its resumes) for each point, spread over the reference run.

    With ``last_act_s`` (hostile mode: when the reference run started the last call with an act) the
    triggers include ``agent_acted`` for the points before that."""
    plan_end = reference.first("execute phase")
    end = reference.duration_s * 0.95  # a later kill might miss a run that happens to go faster
    plan_kills = max(2, round(kills * plan_end / reference.duration_s), kills // 8)
    delays = _stratified(rng, plan_kills, 0.0, plan_end) + _stratified(rng, kills - plan_kills, plan_end, end)
    points = []
    for delay in delays:
        trigger = rng.choice(TRIGGERS) if rng.random() < trigger_share else None
        if trigger is not None and last_act_s is not None and delay < last_act_s and rng.random() < 0.5:
            trigger = HOSTILE_TRIGGER
        resumes: tuple[KillAt, ...] = ()
        if rng.random() < resume_kill_share:
            # The resume redoes at most the interrupted step, then the rest of the run.
            remaining = max(reference.duration_s - delay, 1.0)
            resumes = tuple(KillAt(round(rng.uniform(0.3, remaining), 3)) for _ in range(rng.choice((1, 2))))
        points.append((KillAt(delay, trigger=trigger), resumes))
    return points


@dataclass(frozen=True, slots=True)
class Reference:
    """The uninterrupted run every kill point is compared with."""

    run: TimedRun
    fingerprint: Fingerprint
    agent_stops: tuple[dict[str, Any], ...] = ()
    acts: dict[str, str] | None = None


def _kill_record(kill: KillOutcome) -> dict[str, Any]:
    return {
        "command": kill.command,
        "at": kill.at,
        "killed": kill.killed,
        "after_s": kill.after_s,
        "activity": kill.activity,
        "category": category(kill.step) if kill.killed else "not killed",
        "ledger_lock_held": bool(kill.probe.get("ledger_lock_held")),
        "agent_act": kill.probe.get("agent_act"),
        "syscall": kill.probe.get("syscall"),
        "children": kill.probe.get("children", []),
        "left": kill.left,
        "orphans_after_kill": kill.orphans,
    }


def _left(left: dict[str, Any]) -> str:
    """What a kill left on disk, in a few words."""
    words = [f"ledger {left.get('ledger_entries', 0)} entries (last {left.get('last_op')})"]
    if left.get("torn_ledger_bytes"):
        words.append(f"{left['torn_ledger_bytes']} torn bytes")
    words += left.get("git_locks", [])
    words += left.get("temp_files", [])
    return ", ".join(words)


def _stop_summary(stop: dict[str, Any]) -> str:
    return f"{stop['command']} stopped, named {stop['when']}: {', '.join(stop['named']) or 'nothing'}"


def _point_summary(result: dict[str, Any]) -> dict[str, Any]:
    run = result["run"]
    return {
        "index": result["index"],
        "delay_s": result["delay_s"],
        "trigger": result["trigger"],
        "reference_step": result["reference_step"],
        "killed_at": run["activity"],
        "category": run["category"],
        "left": _left(run["left"]),
        "orphans_after_kill": len(run["orphans_after_kill"]),
        "resume_kills": [f"{kill['at']}: {kill['activity']}" for kill in result["resume_kills"]],
        "resume_exit_codes": result["resume_exit_codes"],
        **(
            {
                "agent_stops": [_stop_summary(stop) for stop in result["agent_stops"]],
                "acts": result["acts"],
            }
            if result["acts"] is not None
            else {}
        ),
        "survived": result["survived"],
        "duration_s": result["duration_s"],
    }


def run_point(
    index: int,
    run_kill: KillAt,
    resume_kills: tuple[KillAt, ...],
    workdir: Path,
    reference: Reference,
    workers: int = 1,
    hostile: bool = False,
) -> dict[str, Any]:
    """Kill one fresh run as planned, recover it, and check the invariants."""
    started = time.monotonic()
    for attempt in range(3):
        root = workdir / f"point-{index:02d}" / f"try-{attempt}"
        scenario = make_scenario(root, workers=workers, hostile=hostile)
        log = root / "autodev.log"
        recovery = kill_and_recover(scenario, log, run_kill, resume_kills)
        if recovery.kills[0].killed or recovery.kills[0].exit_code != 0:
            break
        # This run went faster than the reference and finished first: the same point, a little earlier.
        run_kill = KillAt(round(run_kill.delay_s * 0.7, 3), run_kill.anchor, run_kill.trigger)
    problems = recovery.problems()
    if not recovery.kills[0].killed:
        problems.append(f"the kill did not land: `autodev run` exited {recovery.kills[0].exit_code} first")
    if not recovery.finished:
        problems.append("the run never finished")
    acts = act_outcomes(scenario, recovery.agent_stops, log) if hostile else None
    # Before the other invariants: it removes whatever planted thing is left, so that no git runs it.
    problems += check_hostile(scenario, recovery.agent_stops)
    problems += check_invariants(scenario.repo, reference.fingerprint, ordered=workers == 1)
    return {
        "index": index,
        "delay_s": run_kill.delay_s,
        "trigger": run_kill.trigger,
        "reference_step": reference.run.step_at(run_kill.delay_s),
        "run": _kill_record(recovery.kills[0]),
        "resume_kills": [_kill_record(kill) for kill in recovery.kills[1:]],
        "resume_exit_codes": [run.code for run in recovery.resumes],
        "restarted_run": recovery.restarted_run,
        "agent_stops": [stop.as_dict() for stop in recovery.agent_stops],
        "acts": acts,
        "survived": not problems,
        "problems": problems,
        "dir": str(root.parent),
        "duration_s": round(time.monotonic() - started, 1),
    }


def _hostile_summary(
    reference: Reference, results: list[dict[str, Any]], killed: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the hostile agents did over the sweep and how AutoDev answered."""
    stops = [stop for r in results for stop in r["agent_stops"]]
    return {
        "acts": reference.acts,
        "reference_stops": [_stop_summary(stop) for stop in reference.agent_stops],
        "agent_stops": len(stops),
        "stops_named_live": sum(stop["when"] == "live" for stop in stops),
        "stops_named_at_next_start": sum(stop["when"] == "next start" for stop in stops),
        "stops_naming_too_little": sum(bool(stop["unnamed"]) for stop in stops),
        "points_with_a_stop_at_next_start": sum(
            any(stop["when"] == "next start" for stop in r["agent_stops"]) for r in results
        ),
        "kills_right_after_an_act": sum(bool(k["agent_act"]) for k in killed),
        "kills_with_the_agent_running": sum(any("cursor-agent" in c for c in k["children"]) for k in killed),
        "act_outcomes": dict(
            Counter(outcome for r in results for outcome in (r["acts"] or {}).values()).most_common()
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=40, help="kill points (each a fresh repository)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--trigger-share", type=float, default=0.25, help="share of points that wait for a window"
    )
    parser.add_argument("--resume-kill-share", type=float, default=0.25, help="share that also kill resumes")
    parser.add_argument("--keep", type=Path, default=None, help="keep every repository under this directory")
    parser.add_argument(
        "--workers", type=int, default=1, help="execute parallelism (tasks in their own worktrees above 1)"
    )
    parser.add_argument(
        "--hostile", action="store_true", help="agents that also plant hooks, make tags, commit (see above)"
    )
    args = parser.parse_args()
    if args.kills < 4:
        parser.error("--kills must be at least 4 (the plan phase alone gets 2)")
    configure_quiet_logging()
    started = time.monotonic()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="autodev-crash-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)

    _log(f"reference run in {workdir / 'reference'} ...")
    scenario = make_scenario(workdir / "reference", workers=args.workers, hostile=args.hostile)
    reference_log = workdir / "reference" / "autodev.log"
    run, stops = run_timed_as_user(scenario, reference_log)
    if run.code != 0:
        _log(run.output[-3000:])
        sys.exit(f"the uninterrupted run failed (exit {run.code}); nothing to compare with")
    acts = act_outcomes(scenario, stops, reference_log) if args.hostile else None
    broken = check_hostile(scenario, stops)
    reference = Reference(
        run, final_fingerprint(scenario.repo), tuple(stop.as_dict() for stop in stops), acts
    )
    broken += check_invariants(scenario.repo, reference.fingerprint, ordered=args.workers == 1)
    if broken:
        sys.exit(f"the uninterrupted run breaks the invariants itself: {broken}")
    _log(f"reference: {run.duration_s:.1f}s, plan phase ends at {run.first('execute phase'):.1f}s")
    last_act_s = None
    if scenario.hostile is not None:
        _log(f"agent acts: {acts}; stops: {[stop['named'] for stop in reference.agent_stops]}")
        starts = [run.first(scenario.hostile.call_line(key)) for key in scenario.hostile.acts]
        last_act_s = max(starts)

    rng = random.Random(args.seed)
    points = plan_points(rng, args.kills, run, args.trigger_share, args.resume_kill_share, last_act_s)
    results = []
    for index, (run_kill, resume_kills) in enumerate(points):
        result = run_point(index, run_kill, resume_kills, workdir, reference, args.workers, args.hostile)
        results.append(result)
        verdict = "ok" if result["survived"] else "FAILED: " + "; ".join(result["problems"])[:300]
        extra = f" + {len(resume_kills)} resume kill(s)" if resume_kills else ""
        if result["agent_stops"]:
            extra += f" + {len(result['agent_stops'])} agent stop(s)"
        _log(f"[{index + 1}/{len(points)}] {run_kill}{extra}: {result['run']['activity'][:120]} -> {verdict}")
        if result["survived"] and args.keep is None:
            shutil.rmtree(result["dir"], ignore_errors=True)

    failures = [
        {
            "index": r["index"],
            "at": r["run"]["at"],
            "activity": r["run"]["activity"],
            "resume_kills": [k["activity"] for k in r["resume_kills"]],
            "resume_exit_codes": r["resume_exit_codes"],
            "problems": r["problems"],
            "dir": r["dir"],
        }
        for r in results
        if not r["survived"]
    ]
    kills = [r["run"] for r in results] + [kill for r in results for kill in r["resume_kills"]]
    killed = [kill for kill in kills if kill["killed"]]
    summary = {
        "kills_attempted": len(results),
        "kills_survived": sum(r["survived"] for r in results),
        "sigkills_delivered": len(killed),
        "failures": failures,
        "coverage": {
            "by_step": dict(Counter(r["run"]["category"] for r in results).most_common()),
            "with_resume_kills": sum(bool(r["resume_kills"]) for r in results),
            "ledger_lock_held": sum(k["ledger_lock_held"] for k in killed),
            "evidence_write_in_flight": sum(
                any("evidence" in path for path in k["left"].get("temp_files", [])) for k in killed
            ),
            "git_running": sum(any(c.startswith("git") for c in k["children"]) for k in killed),
            "gate_tool_running": sum(
                any(c.startswith(("pytest", "ruff", "python -c")) for c in k["children"]) for k in killed
            ),
            "gate_tool_orphaned": sum(bool(k["orphans_after_kill"]) for k in killed),
            "run_restarted_before_intent_saved": sum(r["restarted_run"] for r in results),
        },
        "reference": {
            "duration_s": round(run.duration_s, 2),
            "plan_phase_s": run.first("execute phase"),
            "commits": len(reference.fingerprint.commits),
        },
        **({"hostile": _hostile_summary(reference, results, killed)} if args.hostile else {}),
        "points": [_point_summary(r) for r in results],
        "workdir": str(workdir) if failures or args.keep else None,
        "duration_s": round(time.monotonic() - started, 1),
    }
    if not failures and args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(summary, indent=2))
    sys.exit(0 if summary["kills_survived"] == summary["kills_attempted"] else 1)


if __name__ == "__main__":
    main()
