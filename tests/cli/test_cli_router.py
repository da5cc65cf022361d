"""The learning router end to end through the installed executable: the demo's run records a route with
every decision in shadow mode, `autodev router replay` reports it from the ledger without writing
anything, a preferences file changes its recommendations, and autonomous mode is refused before the gate
with the ledger untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import RunCli

from autodev.cli.demo import DemoSetup
from autodev.config.schema import PolicySettings
from autodev.state.ledger import Ledger

pytestmark = pytest.mark.slow

AUTONOMOUS = {"AUTODEV_ROUTER__MODE": "autonomous"}


def _entries(ledger_path: Path) -> list[tuple[int, str, dict[str, Any]]]:
    ledger = Ledger(ledger_path, readonly=True)
    ledger.open(repair=False)
    try:
        return [(entry.seq, entry.op, entry.payload) for entry in ledger.entries()]
    finally:
        ledger.close()


def _tree(state: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(state)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in state.rglob("*")
    }


def test_replay_reports_the_recorded_run_from_the_ledger_and_writes_nothing(
    run_cli: RunCli, demo: DemoSetup, agents: list[str], tmp_path: Path
) -> None:
    root = str(demo.repo_root)
    ran = run_cli("-C", root, "run", *agents, demo.intent)
    assert ran.code == 0, ran.out + ran.err
    state = demo.repo_root / ".autodev"
    entries = _entries(state / "ledger.jsonl")
    decided = [(seq, payload) for seq, op, payload in entries if op == "delegation_decided"]
    usage = [payload for _, op, payload in entries if op == "usage_recorded"]
    assert decided and all(payload["route"]["mode"] == "shadow" for _, payload in decided)
    for lock in ("lock", "lock.owner", "session.lock"):
        (state / lock).unlink(missing_ok=True)
    ledger_bytes = (state / "ledger.jsonl").read_bytes()
    before = _tree(state)

    replayed = run_cli("-C", root, "router", "replay", "--json")
    assert replayed.code == 0, replayed.err
    report = json.loads(replayed.out)

    # Every call was routed and given a recommendation; shadow mode ran the baseline each time.
    assert report["routes"] == len(decided) == report["recommended"] and report["coverage"] == 1.0
    assert report["calls"] == len(usage)
    routes = [payload["route"] for _, payload in decided]
    assert all(route["executed"] == route["baseline"] for route in routes)
    assert report["shadow_alternatives"] == sum(route["recommended"] != route["executed"] for route in routes)
    # Outcomes: the calls of task 1.1 before its retry were retried, every other call passed.
    (retry_seq,) = [seq for seq, op, _ in entries if op == "task_retry"]
    retried = sum(payload["inputs"]["task_id"] == "1.1" and seq < retry_seq for seq, payload in decided)
    figures = report["figures"]
    assert (figures["retried"], figures["passed"]) == (retried, len(decided) - retried)
    assert (figures["blocked"], figures["open"]) == (0, 0) and report["retries"] == 1
    assert figures["pass_rate"] == round((len(decided) - retried) / len(decided), 3)
    assert figures["latency_s_total"] == round(sum(payload.get("call_s", 0.0) for payload in usage), 3)
    assert figures["cost_usd_known"] == round(sum(payload.get("cost_usd", 0.0) for payload in usage), 6)
    units = PolicySettings().units
    assert figures["normalized_cost_units"] == sum(
        units(route["candidates"][route["executed"]]["tier"]) for route in routes
    )
    assert report["interventions"]["approvals_requested"] == 0
    assert report["policy_violations"] == {"recommendation_rejected_by_policy": 0, "outside_write_scope": 0}
    assert report["autonomy"]["shadow_outcomes"] == len(decided)
    assert (report["legacy_skipped"], report["not_routed"], report["invalid"]) == (0, 0, [])

    text = run_cli("-C", root, "router", "replay")
    assert text.code == 0 and "coverage 100%" in text.out and "not a causal claim" in text.out

    # A preferences file that excludes the route that ran changes every recommendation of it.
    preferences = tmp_path / "no-strong.toml"
    preferences.write_text('[[exclude]]\nplatform = "scripted"\ntier = "strong"\n', encoding="utf-8")
    changed = json.loads(
        run_cli("-C", root, "router", "replay", "--preferences", str(preferences), "--json").out
    )
    recommended_strong = sum(
        route["candidates"][route["recommended"]]["tier"] == "strong" for route in routes
    )
    assert recommended_strong > 0 and changed["changed_recommendations"] == recommended_strong
    assert all(key.startswith("scripted/strong -> ") for key in changed["changes"])
    assert changed["shadow_alternatives"] > report["shadow_alternatives"]

    status = json.loads(run_cli("-C", root, "router", "status", "--json").out)
    assert (status["shadow_outcomes"], status["autonomous_allowed"]) == (len(decided), False)

    # Reading wrote nothing: the ledger's bytes, no lock file, no file added or touched.
    assert (state / "ledger.jsonl").read_bytes() == ledger_bytes
    assert not (state / "lock").exists() and not (state / "session.lock").exists()
    assert _tree(state) == before

    # Fewer than 20 shadow outcomes: autonomous is refused before anything is recorded.
    refused = run_cli("-C", root, "execute", *agents, env=AUTONOMOUS)
    assert refused.code == 2, refused.out + refused.err
    assert refused.err.startswith("error: ") and refused.err.count("\n") == 1
    assert f"{len(decided)} completed shadow outcome(s)" in refused.err and "router.mode" in refused.err
    assert (state / "ledger.jsonl").read_bytes() == ledger_bytes


def test_autonomous_without_shadow_outcomes_refuses_to_start_with_nothing_recorded(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    refused = run_cli("-C", str(demo.repo_root), "run", *agents, demo.intent, env=AUTONOMOUS)
    assert refused.code == 2, refused.out + refused.err
    assert refused.err.startswith("error: ") and refused.err.count("\n") == 1
    assert "0 completed shadow outcome(s)" in refused.err and "Traceback" not in refused.err
    assert not (demo.repo_root / ".autodev" / "ledger.jsonl").exists()


def test_a_bad_preferences_file_is_one_line_and_exit_2(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    preferences = tmp_path / "prefs.json"
    preferences.write_text('{"pins": [{"platform": "codex", "weight": 3}]}', encoding="utf-8")
    result = run_cli("-C", str(demo.repo_root), "router", "replay", "--preferences", str(preferences))
    assert result.code == 2 and result.err.startswith("error: ") and result.err.count("\n") == 1
    assert "pins.0.weight" in result.err
