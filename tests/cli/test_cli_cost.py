"""``autodev cost`` and the cost column of ``autodev status``, through the installed executable.

The demo run's agents report what real CLIs report: some a cost of their own, some only token counts for a
model nobody priced (unknown cost), some token counts for a model the price table does not list while the
plan guesses at a fallback price (an estimate). The figures ``autodev cost`` prints must be the ledger's
records summed, whichever way they are grouped, and an unknown cost must never read as $0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import RunCli

from autodev.adapters.scripted import Script
from autodev.cli.demo import DemoSetup, prepare_demo

pytestmark = pytest.mark.slow

# What each role's calls report: the CLI's own cost, or only tokens (and the model they ran on).
REPORTS: dict[str, dict[str, Any]] = {
    "explorer": {"cost_usd": 0.0125},
    "domain_expert": {"cost_usd": 0.0075},
    "architect": {"cost_usd": 0.03},
    "developer": {"cost_usd": None, "tokens_in": 12_000, "tokens_out": 800, "model": "house-model"},
    "reviewer": {"cost_usd": 0.02},
}


def _reporting(script: Script) -> Script:
    entries = []
    for entry in script.entries:
        data = entry.model_dump(exclude_defaults=True)
        report = REPORTS.get(entry.role, {"cost_usd": 0.001})
        if "responses" in data:
            data["responses"] = [{**response, **report} for response in data["responses"]]
        else:
            data.update(report)
        entries.append(data)
    return Script.model_validate({"entries": entries})


def _ledger_calls(root: Path) -> list[dict[str, Any]]:
    """The current plan's ``usage_recorded`` payloads, read straight from the ledger file."""
    lines = [json.loads(line) for line in (root / ".autodev" / "ledger.jsonl").read_text().splitlines()]
    start = max((n for n, line in enumerate(lines) if line["op"] == "plan_phase_started"), default=0)
    return [line["payload"] for line in lines[start:] if line["op"] == "usage_recorded"]


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


def _run(run_cli: RunCli, demo: DemoSetup, tmp_path: Path, env: dict[str, str] | None = None) -> None:
    script = tmp_path / "script.json"
    script.write_text(_reporting(demo.script).model_dump_json(exclude_defaults=True), encoding="utf-8")
    root = str(demo.repo_root)
    result = run_cli(
        "-C", root, "run", "--platform", "scripted", "--script", str(script), demo.intent, env=env
    )
    assert result.code == 0, result.out + result.err


def test_cost_json_totals_are_the_ledgers_records_summed_by_every_grouping(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    _run(run_cli, demo, tmp_path)
    root = demo.repo_root
    calls = _ledger_calls(root)
    known = [call["cost_usd"] for call in calls if "cost_usd" in call]
    unknown = [call for call in calls if "cost_usd" not in call]

    reports = {}
    for by in ("task", "role", "model", "phase"):
        result = run_cli("-C", str(root), "cost", "--json", "--by", by)
        assert result.code == 0, result.err
        reports[by] = json.loads(result.out)

    # The developers' calls reported tokens for a model nobody priced: unknown, counted apart.
    assert unknown and all(call["role"] == "developer" for call in unknown)
    for by, report in reports.items():
        total = report["total"]
        assert total["calls"] == len(calls)
        assert total["cost_usd"] == pytest.approx(sum(known))
        assert total["unknown_calls"] == len(unknown)
        assert total["tokens_in"] == sum(call.get("tokens_in", 0) for call in calls)
        assert sum(row["calls"] for row in report["rows"]) == len(calls), by
        assert sum(row["cost_usd"] or 0 for row in report["rows"]) == pytest.approx(sum(known)), by
    by_role = {row["key"]: row for row in reports["role"]["rows"]}
    assert by_role["developer"]["cost_usd"] is None
    assert by_role["developer"]["unknown_calls"] == len(unknown)
    assert by_role["architect"]["cost_usd"] == pytest.approx(0.03)
    by_phase = {row["key"]: row for row in reports["phase"]["rows"]}
    assert by_phase["plan"]["cost_usd"] == pytest.approx(0.0125 + 0.0075 + 0.03)
    by_model = {row["key"]: row for row in reports["model"]["rows"]}
    assert by_model["house-model"]["unknown_calls"] == len(unknown)
    by_task = {row["key"] for row in reports["task"]["rows"]}
    assert by_task == {"plan", "1.1", "1.2"}

    text = run_cli("-C", str(root), "cost", "--by", "role")
    assert text.code == 0, text.err
    assert "developer" in text.out and "unknown" in text.out
    assert f"{len(unknown)} call(s) of unknown cost" in text.out


def test_status_shows_each_tasks_cost_and_never_an_unknown_one_as_zero(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    _run(run_cli, demo, tmp_path)
    root = str(demo.repo_root)
    calls = _ledger_calls(demo.repo_root)

    status = json.loads(run_cli("-C", root, "status", "--json").out)

    for task in status["tasks"]:
        mine = [call for call in calls if call["task_id"] == task["id"]]
        known = [call["cost_usd"] for call in mine if "cost_usd" in call]
        assert task["cost"]["usd"] == pytest.approx(sum(known))
        assert task["cost"]["unknown_calls"] == sum("cost_usd" not in call for call in mine)
        assert task["cost"]["unknown_calls"] > 0
    assert status["cost"]["usd"] == pytest.approx(sum(c["cost_usd"] for c in calls if "cost_usd" in c))
    shown = run_cli("-C", root, "status", "--all").out
    assert "unknown" in shown
    assert "cost so far:" in shown


def test_with_estimate_the_unpriced_tokens_are_priced_at_the_fallback_and_marked(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    env = {
        "AUTODEV_GUARDRAILS__UNKNOWN_COST": "estimate",
        "AUTODEV_GUARDRAILS__COST_BUDGET_USD_PER_PLAN": "100",
    }
    _run(run_cli, demo, tmp_path, env=env)
    root = str(demo.repo_root)
    calls = _ledger_calls(demo.repo_root)
    developers = [call for call in calls if call["role"] == "developer"]

    report = json.loads(run_cli("-C", root, "cost", "--json", "--by", "role").out)

    # The default fallback: $15 in, $75 out per million tokens.
    each = (12_000 * 15.0 + 800 * 75.0) / 1_000_000
    assert all(call["cost_estimated"] and call["cost_usd"] == pytest.approx(each) for call in developers)
    assert report["total"]["unknown_calls"] == 0
    assert report["total"]["estimated_usd"] == pytest.approx(each * len(developers))
    assert "~$" in run_cli("-C", root, "cost", "--by", "role").out


def test_a_budget_with_an_unknown_cost_stops_the_run_resumably_naming_the_model(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(_reporting(demo.script).model_dump_json(exclude_defaults=True), encoding="utf-8")
    root = str(demo.repo_root)
    env = {"AUTODEV_GUARDRAILS__COST_BUDGET_USD_PER_PLAN": "100"}
    agents = ["--platform", "scripted", "--script", str(script)]

    stopped = run_cli("-C", root, "run", *agents, demo.intent, env=env)

    assert stopped.code == 3, stopped.out + stopped.err
    assert "Traceback" not in stopped.err
    assert "house-model" in stopped.err and "guardrails.unknown_cost" in stopped.err
    before = _ledger_calls(demo.repo_root)
    # The developer's call was kept and the next call refused: the last call is the unknown one.
    assert "cost_usd" not in before[-1] and before[-1]["role"] == "developer"
    # Told to warn instead, the resumed run finishes, and the developer's call is not made again.
    resumed = run_cli("-C", root, "resume", *agents, env={**env, "AUTODEV_GUARDRAILS__UNKNOWN_COST": "warn"})
    assert resumed.code == 0, resumed.out + resumed.err
    after = _ledger_calls(demo.repo_root)
    assert after[len(before)]["role"] != "developer" or after[len(before)]["task_id"] != before[-1]["task_id"]


def test_cost_by_lane_model_and_effort_gives_one_row_per_combination(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    _run(run_cli, demo, tmp_path)
    root = str(demo.repo_root)
    calls = _ledger_calls(demo.repo_root)

    result = run_cli("-C", root, "cost", "--json", "--by", "lane,model,effort")

    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["by"] == "lane,model,effort"
    rows = {row["key"]: row for row in report["rows"]}
    # The demo's tasks have no Effort line: the fast lane; the plan phase's calls belong to no task.
    assert rows["fast · house-model · -"]["unknown_calls"] == sum("cost_usd" not in call for call in calls)
    assert sum(row["calls"] for row in report["rows"]) == report["total"]["calls"] == len(calls)
    bad = run_cli("-C", root, "cost", "--by", "lane,colour")
    assert bad.code == 2 and "colour is not a grouping" in bad.err
