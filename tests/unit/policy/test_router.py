"""The learning router as a pure function: priors, history, exclusions by reason, recommendation, pins."""

from __future__ import annotations

from typing import Any

import pytest

from autodev.config.schema import PolicySettings
from autodev.policy.decisions import ActiveWorker
from autodev.policy.router import (
    Candidate,
    OutcomeStats,
    Platform,
    Preferences,
    RouteInputs,
    RouteRecord,
    predict,
    recommend,
    route,
)

ALL = ("full", "read_only", "workspace_write")
POLICY = PolicySettings()


def _platform(name: str = "claude_code", **changes: Any) -> Platform:
    return Platform(name=name, modes=changes.pop("modes", ALL), models=("haiku", "sonnet", "opus"), **changes)


def _inputs(**changes: Any) -> RouteInputs:
    base: dict[str, Any] = {
        "family": "developer:repository",
        "role": "developer",
        "writes": True,
        "platforms": (_platform(),),
        "baseline_platform": "claude_code",
        "baseline_tier": "strong",
        "task_id": "1.1",
    }
    return RouteInputs(**(base | changes))


def _route(
    inputs: RouteInputs, history: dict[tuple[str, str, str], OutcomeStats] | None = None, **kw: Any
) -> RouteRecord:
    return route(
        inputs,
        mode=kw.pop("mode", "shadow"),
        policy=kw.pop("policy", POLICY),
        history=history or {},
        k=kw.pop("k", 4.0),
    )


def _by_key(record: RouteRecord) -> dict[str, Candidate]:
    return {candidate.key: candidate for candidate in record.candidates}


def test_priors_alone_predict_each_tier_at_its_prior_with_full_weight_and_keep_the_baseline() -> None:
    record = _route(_inputs())
    found = _by_key(record)
    assert [c.key for c in record.candidates] == [
        "claude_code/fast",
        "claude_code/standard",
        "claude_code/strong",
    ]
    assert [c.model for c in record.candidates] == ["haiku", "sonnet", "opus"]
    assert (found["claude_code/fast"].pass_p, found["claude_code/strong"].pass_p) == (0.6, 0.85)
    assert all(c.n == 0 and c.prior_w == 1.0 for c in record.candidates)
    # Normalized cost: capability units per expected pass.
    assert found["claude_code/strong"].cost == round(4 / 0.85, 3)
    # Nothing cheaper is predicted to pass as often as the baseline: the recommendation is today's route.
    assert record.recommended == record.baseline == record.executed == 2


def test_recorded_outcomes_move_the_prediction_and_the_prior_weight_says_how_much() -> None:
    history = {
        ("developer:repository", "claude_code", "fast"): OutcomeStats(
            n=20, passed=20, latency_total_s=600, latency_n=20
        )
    }
    record = _route(_inputs(), history)
    fast = _by_key(record)["claude_code/fast"]
    assert fast.pass_p == round((4 * 0.6 + 20) / 24, 3)
    assert fast.prior_w == round(4 / 24, 3) and fast.n == 20
    assert fast.latency_s == round((4 * 60 + 600) / 24, 1)
    assert record.candidates[record.recommended or 0].key == "claude_code/fast"
    # Shadow mode records the recommendation and runs the baseline.
    assert record.executed == record.baseline != record.recommended


def test_sparse_history_stays_mostly_prior() -> None:
    pass_p, _, _, _, n, prior_w = predict("fast", OutcomeStats(n=1, passed=1), units=1, k=4.0)
    assert (n, prior_w) == (1, 0.8) and pass_p == round((2.4 + 1) / 5, 3)
    history = {("developer:repository", "claude_code", "fast"): OutcomeStats(n=1, passed=1)}
    record = _route(_inputs(), history)
    assert record.recommended == record.baseline


def test_failures_lower_a_prediction_but_never_exclude_a_candidate() -> None:
    history = {("developer:repository", "claude_code", "strong"): OutcomeStats(n=10, passed=0, retried=10)}
    strong = _by_key(_route(_inputs(), history))["claude_code/strong"]
    assert strong.excluded is None
    assert strong.pass_p == round(4 * 0.85 / 14, 3) and strong.retry_p == round((4 * 0.15 + 10) / 14, 3)


@pytest.mark.parametrize(
    ("changes", "key", "reason"),
    [
        ({"platforms": (_platform(cli_present=False),)}, "claude_code/strong", "availability:cli_missing"),
        (
            {
                "role": "reviewer",
                "writes": False,
                "platforms": (_platform(), _platform("opencode", modes=("full", "workspace_write"))),
            },
            "opencode/strong",
            "permissions:read_only",
        ),
        ({"platforms": (_platform(refusing=True),)}, "claude_code/fast", "quota:provider_refusing"),
        (
            {"active_workers": (ActiveWorker(task_id="2.1", tier="strong", write_mode="isolated"),)},
            "claude_code/strong",
            "budget:strong_workers",
        ),
        ({"retry": True}, "claude_code/standard", "risk:tier_downgrade"),
        (
            {"platform_bound": True, "platforms": (_platform(), _platform("codex"))},
            "codex/fast",
            "risk:platform_bound",
        ),
    ],
)
def test_every_exclusion_has_its_reason_code(changes: dict[str, Any], key: str, reason: str) -> None:
    assert _by_key(_route(_inputs(**changes)))[key].excluded == reason


def test_a_writer_bigger_than_the_capability_budget_is_excluded_for_budget() -> None:
    tight = PolicySettings(capability_units=3)
    found = _by_key(_route(_inputs(), policy=tight))
    assert found["claude_code/strong"].excluded == "budget:capability_units"
    assert found["claude_code/standard"].excluded is None
    # Read-only calls hold no worker: no budget applies.
    reader = _by_key(_route(_inputs(role="reviewer", writes=False), policy=tight))
    assert reader["claude_code/strong"].excluded is None


def test_escalation_only_goes_up_and_ends_at_strong() -> None:
    cheap = {
        ("developer:repository", "claude_code", tier): OutcomeStats(n=50, passed=50)
        for tier in ("fast", "standard")
    }
    at_strong = _route(_inputs(retry=True), cheap)
    assert [c.key for c in at_strong.candidates if c.excluded is None] == ["claude_code/strong"]
    assert at_strong.recommended == at_strong.baseline
    at_standard = _route(_inputs(retry=True, baseline_tier="standard"), cheap)
    eligible = [c.tier for c in at_standard.candidates if c.excluded is None]
    assert eligible == ["standard", "strong"]


def test_autonomous_runs_the_recommendation_and_a_pin_holds_its_dimension_as_a_manual_selection() -> None:
    history = {("developer:repository", "claude_code", "fast"): OutcomeStats(n=40, passed=40)}
    free = _route(_inputs(), history, mode="autonomous")
    assert free.executed == free.recommended != free.baseline and free.manual == ()
    pinned = _route(_inputs(pinned=("task_model",)), history, mode="autonomous")
    assert pinned.executed == pinned.baseline and pinned.manual == ("task_model",)
    shadow = _route(_inputs(pinned=("task_model", "platform")), history)
    assert shadow.executed == shadow.baseline and shadow.manual == ("task_model",)
    # A pin the router agrees with is no manual selection.
    assert _route(_inputs(pinned=("task_model",))).manual == ()


def test_pins_and_exclusions_never_revive_an_excluded_candidate() -> None:
    record = _route(_inputs(platforms=(_platform(), _platform("codex", refusing=True))))
    pin = Preferences.model_validate({"pins": [{"platform": "codex", "tier": "strong"}]})
    chosen, refused = recommend(record.candidates, record.baseline, "developer:repository", pin)
    assert refused == "quota:provider_refusing"
    assert record.candidates[chosen or 0].platform == "claude_code"
    elsewhere = Preferences.model_validate({"pins": [{"platform": "gemini"}]})
    assert recommend(record.candidates, record.baseline, "developer:repository", elsewhere)[1] == (
        "availability:not_in_run"
    )


def test_preferences_exclude_pin_and_set_quality_floors_per_family() -> None:
    record = _route(_inputs())
    family = "developer:repository"
    no_strong = Preferences.model_validate({"exclude": [{"tier": "strong"}]})
    chosen, _ = recommend(record.candidates, record.baseline, family, no_strong)
    # Nothing left passes as often as the baseline: the likeliest to pass of the rest.
    assert record.candidates[chosen or 0].key == "claude_code/standard"
    floor = Preferences.model_validate({"floors": [{"family": "developer:*", "min_pass": 0.5}]})
    assert (
        record.candidates[recommend(record.candidates, record.baseline, family, floor)[0] or 0].tier == "fast"
    )
    too_high = Preferences.model_validate({"floors": [{"min_pass": 0.99}]})
    assert recommend(record.candidates, record.baseline, family, too_high)[0] is None
    pin = Preferences.model_validate(
        {"pins": [{"family": "reviewer:*", "platform": "claude_code", "tier": "fast"}]}
    )
    assert recommend(record.candidates, record.baseline, family, pin)[0] == record.baseline
