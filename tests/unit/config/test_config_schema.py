"""AutodevConfig: the seed's defaults, the bounds of each knob, and the checks on nested tables."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from autodev.config import (
    AGENT_CLIS,
    ROLE_NAMES,
    AutodevConfig,
    GateSettings,
    InlineSettings,
    ModelPrice,
    RoleSettings,
    TierModels,
    TournamentSettings,
)


def test_defaults_match_the_seed_configuration_table() -> None:
    config = AutodevConfig()

    assert config.platform == "auto"
    assert config.qa_retry_limit == 3
    assert config.auto_commit is True
    assert config.require_plan_approval is False
    assert config.lock_timeout_s == 10.0
    assert config.worktree_pool_enabled is True
    assert config.cross_phase_parallelism_enabled is False
    assert config.speculative_execution_enabled is False


def test_tournament_defaults() -> None:
    tournaments = AutodevConfig().tournaments

    # Both are opt-in: every round costs several agent calls.
    assert tournaments.plan.enabled is False
    assert tournaments.impl.enabled is False
    for kind in (tournaments.plan, tournaments.impl):
        assert (kind.num_judges, kind.convergence_k, kind.max_rounds) == (3, 2, 5)
        assert (kind.min_margin, kind.quorum, kind.model) == (0, None, None)
    assert tournaments.max_parallel_subprocesses == 3
    assert tournaments.auto_disable_for_models == ["opus"]
    assert tournaments.execute_max_parallel_tasks is None
    assert tournaments.seed == 0


def test_guardrail_and_gate_defaults() -> None:
    config = AutodevConfig()

    assert config.guardrails.max_tool_calls_per_task == 60
    assert config.guardrails.max_duration_s_per_task == 900
    assert config.guardrails.max_diff_bytes == 5 * 1024 * 1024
    assert config.guardrails.cost_budget_usd_per_plan is None
    assert config.guardrails.loop_detection_threshold == 3
    assert config.qa_gates.on_missing_tool == "error"
    for gate in ("syntax", "lint", "build", "test", "secretscan"):
        assert getattr(config.qa_gates, gate) == GateSettings(enabled=True, command=None, timeout_s=300)


def test_role_tier_and_price_defaults() -> None:
    config = AutodevConfig()

    assert config.roles == {}
    assert config.price_table == {}
    assert set(config.model_tiers) == set(AGENT_CLIS)
    assert config.model_tiers["claude_code"] == TierModels(fast="haiku", standard="sonnet", strong="opus")
    assert config.model_tiers["codex"] == TierModels(fast="gpt-5.5", standard="gpt-5.5", strong="gpt-5.5")
    assert config.model_tiers["gemini"] == TierModels(
        fast="gemini-2.5-flash", standard="gemini-2.5-flash", strong="gemini-2.5-pro"
    )
    assert config.model_tiers["cursor"] == TierModels()
    assert config.model_tiers["opencode"] == TierModels()


def _all_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for info in model.model_fields.values():
        for candidate in (info.annotation, *getattr(info.annotation, "__args__", ())):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                found |= _all_models(candidate)
    return found


def test_every_setting_is_described_and_every_model_forbids_unknown_keys() -> None:
    models = _all_models(AutodevConfig)

    assert {RoleSettings, TierModels, ModelPrice, GateSettings, TournamentSettings} <= models
    for model in models:
        assert model.model_config.get("extra") == "forbid", model
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"platform": "claud"}, "'claude_code'"),
        ({"qa_retry_limit": 0}, "greater than or equal to 1"),
        ({"lock_timeout_s": 0}, "greater than 0"),
        ({"guardrails": {"loop_detection_threshold": 1}}, "greater than or equal to 2"),
        ({"guardrails": {"cost_budget_usd_per_plan": 0}}, "greater than 0"),
        ({"tournaments": {"plan": {"min_margin": -1}}}, "greater than or equal to 0"),
        ({"tournaments": {"execute_max_parallel_tasks": 0}}, "greater than or equal to 1"),
        ({"tournaments": {"auto_disable_for_models": [""]}}, "empty"),
        ({"qa_gates": {"on_missing_tool": "ignore"}}, "'error' or 'skip'"),
        ({"qa_gates": {"lint": {"timeout_s": -1}}}, "greater than 0"),
        ({"price_table": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}, "greater than"),
        ({"price_table": {"m": {"input_per_mtok": 1}}}, "Field required"),
        ({"guardrails": {"max_tool_calls": 5}}, "Extra inputs"),
    ],
)
def test_out_of_range_values_are_rejected(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        AutodevConfig.model_validate(data)


def test_unknown_role_name_is_rejected_with_the_role_names() -> None:
    with pytest.raises(ValidationError) as caught:
        AutodevConfig.model_validate({"roles": {"coder": {"model": "strong"}}})

    message = str(caught.value)
    for role in ROLE_NAMES:
        assert f"'{role}'" in message


def test_known_role_overrides_are_accepted() -> None:
    config = AutodevConfig.model_validate(
        {"roles": {"developer": {"model": "strong", "max_turns": 40}, "judge": {}}}
    )

    assert config.roles["developer"] == RoleSettings(model="strong", max_turns=40)
    assert config.roles["judge"] == RoleSettings()


def test_unknown_model_tier_platform_is_rejected() -> None:
    with pytest.raises(ValidationError, match="'claude_code'"):
        AutodevConfig.model_validate({"model_tiers": {"inline": {"fast": "x"}}})


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("pytest -q", "not a shell string"),
        ([], "empty list"),
        (["pytest", ""], "empty"),
        (["  "], "empty"),
        ([1, 2], "valid string"),
    ],
)
def test_gate_command_must_be_a_non_empty_argv_list(command: object, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        GateSettings.model_validate({"command": command})


def test_gate_command_argv_is_kept_verbatim() -> None:
    gate = GateSettings(command=["pytest", "-q", "-k", "not slow"])

    assert gate.command == ["pytest", "-q", "-k", "not slow"]


def test_inline_answers_are_limited_to_4_mib_by_default() -> None:
    assert AutodevConfig().inline.max_answer_bytes == 4 * 1024 * 1024
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        InlineSettings(max_answer_bytes=0)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"qa_gates": {"test": {"command": ["pytest", "-q\x00"]}}}, r"item 2 contains a NUL byte \(\\x00\)"),
        ({"roles": {"developer": {"model": "strong\x1b[0m"}}}, r"control character \\x1b \(U\+001B\)"),
        ({"environment": {"python": "python\n3"}}, r"control character \\n \(U\+000A\)"),
        (
            {"tournaments": {"auto_disable_for_models": ["op\x85us"]}},
            r"item 1 contains the control character",
        ),
        ({"price_table": {"m\x00": {"input_per_mtok": 1, "output_per_mtok": 1}}}, r"key 'm\\x00' contains"),
        ({"worktree_setup": {"copy_ignored": ["a\rb"]}}, r"control character \\r"),
    ],
    ids=["nul-in-gate-command", "escape-in-model", "newline-in-path", "c1-control", "key", "carriage-return"],
)
def test_a_control_character_in_any_text_setting_is_rejected(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        AutodevConfig.model_validate(data)


def test_a_command_argument_may_hold_tabs_and_newlines() -> None:
    program = "import sys\n\tsys.exit(0)"

    config = AutodevConfig.model_validate(
        {
            "qa_gates": {"test": {"command": ["python", "-c", program]}},
            "worktree_setup": {"command": ["python", "-c", program]},
            "environment": {"python": "python\t3"},
        }
    )

    assert config.qa_gates.test.command == ["python", "-c", program]
    assert config.worktree_setup.command == ["python", "-c", program]


def test_quorum_defaults_to_a_majority_and_cannot_exceed_the_judges() -> None:
    assert TournamentSettings(num_judges=3).effective_quorum == 2
    assert TournamentSettings(num_judges=4).effective_quorum == 3
    assert TournamentSettings(num_judges=5, quorum=5).effective_quorum == 5
    with pytest.raises(ValidationError, match=r"quorum \(4\) cannot exceed num_judges \(3\)"):
        TournamentSettings(num_judges=3, quorum=4)


def test_resolve_model_maps_tiers_through_the_platform_table() -> None:
    config = AutodevConfig()

    assert config.resolve_model("claude_code", "strong") == "opus"
    assert config.resolve_model("gemini", "fast") == "gemini-2.5-flash"
    assert config.resolve_model("codex", "gpt-5.5-custom") == "gpt-5.5-custom"
    assert config.resolve_model("cursor", "standard") is None
    assert config.resolve_model("inline", "strong") is None
    assert config.resolve_model("claude_code", None) is None
