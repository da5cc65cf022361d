"""Outcomes derived from the ledger, the autonomous gate's counts, the report, and preferences files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autodev.config.schema import AutodevConfig, PolicySettings, ProviderSettings, RouterMode
from autodev.errors import ConfigError
from autodev.orchestrator.provider_guard import ProviderGuard
from autodev.orchestrator.run_router import check_autonomy, history_of, load_preferences
from autodev.policy.replay import LoggedDecision
from autodev.policy.router import PinKind, Platform, Preferences, RouteInputs, route
from autodev.policy.router_replay import autonomy, derive, report

POLICY = PolicySettings()


def _route(*, pinned: tuple[PinKind, ...] = (), mode: RouterMode = "shadow") -> dict[str, Any]:
    inputs = RouteInputs(
        family="developer:repository",
        role="developer",
        writes=True,
        platforms=(Platform(name="scripted", modes=("full", "read_only", "workspace_write")),),
        baseline_platform="scripted",
        baseline_tier="standard",
        pinned=pinned,
    )
    record = route(inputs, mode=mode, policy=POLICY, history={}, k=4.0)
    if pinned:
        # A pin that held the call off a recommendation of another tier.
        record = record.model_copy(update={"recommended": 0, "manual": pinned})
    return {"version": record.version, **record.model_dump(mode="json", exclude_defaults=True)}


class _Ledger:
    def __init__(self) -> None:
        self.entries: list[LoggedDecision] = []

    def add(self, op: str, payload: dict[str, Any]) -> None:
        self.entries.append(LoggedDecision(seq=len(self.entries) + 1, op=op, payload=payload))

    def call(
        self, task_id: str, *, route: dict[str, Any] | None = None, decision: str = "spawn", **usage: Any
    ) -> None:
        payload: dict[str, Any] = {
            "inputs": {"task_id": task_id, "role": "developer", "family": "developer:repository"},
            "decision": {"route": decision, "reason": "within_budget"},
        }
        if route is not None:
            payload["route"] = route
        self.add("delegation_decided", payload)
        if decision in ("spawn", "execute"):
            self.add("usage_recorded", {"task_id": task_id, "role": "developer", "call_s": 2.0, **usage})


def _completed(count: int, manual: int = 0) -> list[LoggedDecision]:
    ledger = _Ledger()
    for n in range(count):
        ledger.call(f"{n}.1", route=_route(pinned=("task_model",) if n < manual else ()), cost_usd=0.5)
        ledger.add("task_status", {"task_id": f"{n}.1", "from": "tournamented", "to": "complete"})
    return ledger.entries


def test_an_attempts_end_labels_its_calls_and_the_usage_gives_their_seconds_and_cost() -> None:
    ledger = _Ledger()
    ledger.call("1.1", route=_route(), cost_usd=0.25)
    ledger.add("task_retry", {"task_id": "1.1", "retry_count": 1})
    ledger.call("1.1", route=_route())
    ledger.add("task_status", {"task_id": "1.1", "to": "complete"})
    ledger.call("1.2", route=_route())
    ledger.add(
        "task_status", {"task_id": "1.2", "to": "blocked", "reason": "policy: outside_write_scope: ..."}
    )
    ledger.call("1.3", route=_route())
    ledger.call("1.4", route=_route(), decision="queue")
    derived = derive(ledger.entries)
    assert [(call.task_id, call.outcome) for call in derived.calls] == [
        ("1.1", "retried"),
        ("1.1", "passed"),
        ("1.2", "blocked"),
        ("1.3", None),
        ("1.4", None),
    ]
    assert derived.calls[0].cost_usd == 0.25 and derived.calls[0].call_s == 2.0
    assert derived.calls[1].cost_usd is None and derived.calls[1].used
    assert derived.retries == 1 and derived.outside_write_scope == 1
    found = report(derived, POLICY)
    assert (found.routes, found.calls, found.recommended) == (5, 4, 5)
    assert (found.figures.passed, found.figures.retried, found.figures.blocked, found.figures.open) == (
        1,
        1,
        1,
        1,
    )
    assert found.figures.pass_rate == round(1 / 3, 3)
    assert found.figures.cost_usd_known == 0.25 and found.figures.calls_cost_unknown == 3
    assert found.figures.latency_s_total == 8.0 and found.figures.normalized_cost_units == 4 * 2
    assert found.policy_violations["outside_write_scope"] == 1
    history = history_of(derived.calls)
    assert history[("developer:repository", "scripted", "standard")].n == 3


def test_records_before_routing_are_legacy_and_broken_ones_are_listed_apart() -> None:
    ledger = _Ledger()
    ledger.add("usage_recorded", {"task_id": "plan:explorer", "role": "explorer"})  # before any decision log
    ledger.call("1.1")  # a decision from before routing
    ledger.call("1.2", route=_route())
    ledger.call("1.3", route={**_route(), "version": 99})
    ledger.call("1.4", route={**_route(), "baseline": 7})
    ledger.call("1.5")  # routing was off for this one
    derived = derive(ledger.entries)
    assert derived.legacy_skipped == 2 and derived.not_routed == 1
    assert [invalid.seq for invalid in derived.invalid] == [6, 8]
    assert "version 99" in derived.invalid[0].problem
    assert len(derived.calls) == 1


@pytest.mark.parametrize(
    ("count", "manual", "allowed"), [(19, 0, False), (20, 0, True), (20, 1, False), (21, 1, True)]
)
def test_the_autonomous_gate_needs_20_shadow_outcomes_with_under_5_percent_manual(
    count: int, manual: int, allowed: bool
) -> None:
    found = autonomy(derive(_completed(count, manual)))
    assert (found.shadow_outcomes, found.manual_selections, found.allowed) == (count, manual, allowed)


def test_outcomes_of_autonomous_or_unfinished_calls_do_not_count_toward_the_gate() -> None:
    ledger = _Ledger()
    for n in range(25):
        ledger.call(f"{n}.1", route=_route(mode="autonomous"))
        ledger.add("task_status", {"task_id": f"{n}.1", "to": "complete"})
    for n in range(25):
        ledger.call(f"{n}.2", route=_route())
    assert autonomy(derive(ledger.entries)).shadow_outcomes == 0


def test_autonomous_mode_is_refused_with_the_counts_until_the_gate_opens(tmp_path: Path) -> None:
    config = AutodevConfig.model_validate({"router": {"mode": "autonomous"}})
    with pytest.raises(ConfigError) as raised:
        check_autonomy(config, tmp_path)
    assert raised.value.exit_code == 2
    assert "0 completed shadow outcome(s)" in raised.value.message and "20" in raised.value.message
    check_autonomy(AutodevConfig(), tmp_path)  # shadow: nothing to check


def test_a_preferences_file_in_toml_or_json(tmp_path: Path) -> None:
    toml = tmp_path / "prefs.toml"
    toml.write_text(
        '[[pins]]\nfamily = "reviewer:*"\nplatform = "codex"\n\n'
        '[[exclude]]\nplatform = "scripted"\ntier = "strong"\n\n'
        "[[floors]]\nmin_pass = 0.7\n",
        encoding="utf-8",
    )
    parsed = load_preferences(toml)
    assert parsed.pins[0].platform == "codex" and parsed.exclude[0].tier == "strong"
    assert parsed.floors[0].min_pass == 0.7 and parsed.floors[0].family == "*"
    as_json = tmp_path / "prefs.json"
    as_json.write_text('{"exclude": [{"platform": "codex"}]}', encoding="utf-8")
    assert load_preferences(as_json) == Preferences.model_validate({"exclude": [{"platform": "codex"}]})


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("p.json", '{"pins": [{"platform": "codex", "colour": "red"}]}', "pins.0.colour: Extra inputs"),
        ("p.json", '{"floors": [{"min_pass": 2}]}', "floors.0.min_pass"),
        ("p.json", '{"exclude": [{"tier": "huge"}]}', "exclude.0.tier"),
        ("p.toml", "pins = [", "not valid TOML"),
        ("p.json", "{", "not valid JSON"),
    ],
)
def test_a_bad_preferences_file_is_one_line_config_error(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_preferences(path)
    assert problem in raised.value.message and "\n" not in raised.value.message


def test_only_the_live_runs_refusals_keep_the_router_off_a_platform() -> None:
    now = [100.0]
    guard = ProviderGuard(ProviderSettings(), clock=lambda: now[0])
    assert not guard.refusing("codex")
    guard.refused_by("codex", "rate_limited")
    assert guard.refusing("codex") and not guard.refusing("claude_code")
    now[0] += guard.settings.breaker_window_s + 1
    assert not guard.refusing("codex")
    guard.refused_by("codex", "usage_limit")
    now[0] += 10_000
    assert guard.refusing("codex")
    # A new run's guard knows nothing of an earlier session's limit.
    assert not ProviderGuard(ProviderSettings()).refusing("codex")
