"""Hostile agents killed mid-act: a kill between what the agent did to git and AutoDev's check of the call.

The scenario is ``support.crash``'s, played by a fake ``cursor-agent`` that also does seeded acts
(``make_scenario(hostile=True)``). Each kill waits for the moment just after an act (the ``agent_acted``
trigger; the agent pauses there, so the kill lands before AutoDev's check): the next start must stop and
name what changed, the harness undoes it as the user would and resumes, and the run must end in the tree of
an uninterrupted hostile run, with no planted program ever run. ``bench/crash_sweep.py --hostile`` kills at
many more moments.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.crash import (
    AgentStop,
    KillAt,
    Recovery,
    Scenario,
    TimedRun,
    act_outcomes,
    check_hostile,
    check_invariants,
    final_fingerprint,
    hostile_acts,
    kill_and_recover,
    make_scenario,
    progress_lines,
    run_timed_as_user,
)

pytestmark = pytest.mark.slow

# The first two acts of this seed: the developer of 1.1 makes a tag, the developer of 1.3 plants a hook and
# an fsmonitor (then a reviewer and a test engineer plant too, and a test engineer commits).
SEED = 1
TAG = "refs/tags/agent-1.1-developer"


def _scenario(root: Path) -> Scenario:
    scenario = make_scenario(root, seed=SEED, hostile=True)
    # AutoDev's own pytest runs (3 s a task) decide nothing here: syntax and lint gates stay.
    scenario.env["AUTODEV_QA_GATES__TEST__ENABLED"] = "false"
    scenario.env["HOSTILE_PAUSE_S"] = "0.3"
    return scenario


def _reference(root: Path) -> tuple[Scenario, TimedRun, list[AgentStop]]:
    scenario = _scenario(root)
    run, stops = run_timed_as_user(scenario, root / "autodev.log")
    return scenario, run, stops


def _killed(root: Path) -> tuple[Scenario, Recovery]:
    scenario = _scenario(root)
    after_an_act = KillAt(0.0, trigger="agent_acted")
    return scenario, kill_and_recover(scenario, root / "autodev.log", after_an_act, (after_an_act,))


def test_kills_just_after_an_agents_act_stop_the_next_start_naming_it_and_resume_to_the_same_tree(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    first_acts = list(hostile_acts(SEED).items())[:2]
    assert first_acts == [("developer@1.1", "moves_ref"), ("developer@1.3", "plants")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reference_future = pool.submit(_reference, tmp_path_factory.mktemp("hostile-reference"))
        killed_future = pool.submit(_killed, tmp_path_factory.mktemp("hostile-killed"))
        reference, run, reference_stops = reference_future.result()
        scenario, recovery = killed_future.result()

    # The uninterrupted hostile run: the tag stops it live, everything else is put back or folded.
    assert run.code == 0, run.output[-3000:]
    assert [(stop.when, stop.named, stop.found) for stop in reference_stops] == [("live", [TAG], [TAG])]
    assert check_hostile(reference, reference_stops) == []
    fingerprint = final_fingerprint(reference.repo)
    assert len(fingerprint.commits) == 9, fingerprint.commits
    assert check_invariants(reference.repo, fingerprint) == []

    log = scenario.repo.parent / "autodev.log"
    report = "\n".join(
        [f"{kill.command} at {kill.at}: {kill.activity}" for kill in recovery.kills]
        + [str(stop.as_dict()) for stop in recovery.agent_stops]
        + progress_lines(log)[-15:]
    )
    assert [kill.killed for kill in recovery.kills] == [True, True], report
    assert [kill.probe.get("agent_act") for kill in recovery.kills] == ["developer@1.1", "developer@1.3"]
    assert recovery.finished, report
    # Each kill left a call unchecked: the next start named what it did, the harness undid it.
    assert [(stop.when, stop.named, stop.found) for stop in recovery.agent_stops] == [
        ("next start", [TAG], [TAG]),
        ("next start", [".git/hooks/post-commit", ".git/config"], [".git/hooks/post-commit", ".git/config"]),
    ], report
    assert "the developer of task 1.3" in recovery.agent_stops[1].message
    outcomes = act_outcomes(scenario, recovery.agent_stops, log)
    assert outcomes["developer@1.1"] == outcomes["developer@1.3"] == "named next start", outcomes
    problems = recovery.problems() + check_hostile(scenario, recovery.agent_stops)
    problems += check_invariants(scenario.repo, fingerprint)
    assert problems == [], f"{report}\nproblems:\n" + "\n".join(problems)
