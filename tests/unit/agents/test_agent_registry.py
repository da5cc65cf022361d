"""The built-in roles: their prompts, the tools they are offered and the model each one runs with."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from autodev.agents import (
    WRITE_TOOLS,
    AgentSpec,
    EffectiveRoleSettings,
    build_registry,
    get_spec,
    parse_confidence,
    parse_critic_verdict,
    parse_ranking,
    parse_review_verdict,
    parse_test_results,
)
from autodev.agents.spec import shifted_tier
from autodev.config.schema import (
    ROLE_NAMES,
    AutodevConfig,
    CapabilityTier,
    Platform,
    RoleSettings,
    TierModels,
)
from autodev.errors import AutodevError
from autodev.state.plan_markdown import parse_plan_markdown

REGISTRY = build_registry()

WRITERS = {"developer", "test_engineer"}
TOURNAMENT_ROLES = {"critic_t", "architect_b", "synthesizer", "judge"}

# The text each role's output contract must show the agent.
CONTRACT_MARKERS: dict[str, tuple[str, ...]] = {
    "explorer": ("FILES:", "LESSON:"),
    "domain_expert": ("TOPIC:", "CONFIDENCE: HIGH|MEDIUM|LOW"),
    "architect": ("# Plan:", "## Phase", "### Task", "- Files:", "- Depends:", "- Acceptance:", "- [ ]"),
    "developer": ("working directory", "LESSON:", "Fix prior failures first"),
    "reviewer": ("VERDICT: APPROVED|NEEDS_CHANGES|REJECTED", "ISSUES:", "LESSON:"),
    "test_engineer": ("RESULTS: passed=N failed=M total=T", "re-runs the tests itself"),
    "critic_sounding_board": (
        "VERDICT: APPROVED|NEEDS_REVISION|REJECTED",
        "ISSUES:",
        "RECOMMENDATION:",
        "LESSON:",
    ),
    "critic_t": ("ISSUES:", "Do not rewrite A"),
    "architect_b": ("# Plan:", "DIRECTION:"),
    "synthesizer": ("# Plan:", "DIRECTION:", "neutral labels"),
    "judge": ("RANKING:", "each label exactly once", "neutral labels"),
}


def test_every_role_has_a_spec_under_its_own_name() -> None:
    assert list(REGISTRY) == list(ROLE_NAMES)
    assert len(REGISTRY) == 11
    for role, spec in REGISTRY.items():
        assert spec.role == role


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_prompt_is_short_and_ends_with_its_output_contract(role: str) -> None:
    prompt = REGISTRY[role].prompt

    assert prompt.strip()
    assert len(prompt.encode("utf-8")) < 8 * 1024
    assert 20 <= len(prompt.splitlines()) <= 70
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    assert headings[-1] == "## Output contract"
    contract = prompt.split("## Output contract", 1)[1]
    for marker in CONTRACT_MARKERS[role]:
        assert marker in prompt, marker
    assert any(marker in contract for marker in CONTRACT_MARKERS[role])


@pytest.mark.parametrize("role", sorted(set(ROLE_NAMES) - WRITERS))
def test_reporting_roles_cannot_change_files(role: str) -> None:
    spec = REGISTRY[role]

    assert not WRITE_TOOLS & set(spec.tools)
    assert not spec.can_write


@pytest.mark.parametrize("role", sorted(WRITERS))
def test_developer_and_test_engineer_can_edit_and_run_commands(role: str) -> None:
    spec = REGISTRY[role]

    assert {"read", "search", "write", "edit", "bash"} <= set(spec.tools)
    assert spec.can_write


@pytest.mark.parametrize("role", sorted(TOURNAMENT_ROLES))
def test_tournament_roles_get_no_tools(role: str) -> None:
    assert REGISTRY[role].tools == ()


def test_no_role_is_offered_the_web() -> None:
    assert all("web" not in spec.tools for spec in REGISTRY.values())


def test_actions_follow_the_seed_flows() -> None:
    actions = {role: spec.action for role, spec in REGISTRY.items()}

    assert actions["explorer"] == "explore"
    assert actions["domain_expert"] == "consult"
    assert actions["architect"] == "document"
    assert actions["developer"] == "implement"
    assert actions["reviewer"] == "review"
    assert actions["test_engineer"] == "test"
    assert actions["critic_sounding_board"] == "critique"


def test_every_role_has_a_one_line_output_contract() -> None:
    for spec in REGISTRY.values():
        assert spec.output_contract.strip()
        assert "\n" not in spec.output_contract


def test_architect_example_plan_parses() -> None:
    prompt = REGISTRY["architect"].prompt
    example = re.search(r"```markdown\n(.*?)```", prompt, re.DOTALL)
    assert example is not None

    plan = parse_plan_markdown(example.group(1), "0" * 64)

    tasks = {task.id: task for phase in plan.phases for task in phase.tasks}
    assert plan.title == "Add email validation to User"
    assert list(tasks) == ["1.1", "1.2"]
    assert tasks["1.2"].depends_on == ["1.1"]
    assert tasks["1.1"].files == ["src/app/validation.py", "tests/test_validation.py"]
    assert all(task.acceptance for task in tasks.values())


def test_an_agent_that_echoes_its_contract_does_not_pass() -> None:
    assert parse_review_verdict(REGISTRY["reviewer"].prompt) is None
    assert parse_critic_verdict(REGISTRY["critic_sounding_board"].prompt) is None
    assert parse_test_results(REGISTRY["test_engineer"].prompt) is None
    assert parse_confidence(REGISTRY["domain_expert"].prompt) is None
    assert parse_ranking(REGISTRY["judge"].prompt, ["X", "Y", "Z"]) is None


def test_each_build_reads_the_prompts_afresh_into_equal_specs() -> None:
    again = build_registry()

    assert again == REGISTRY
    assert again is not REGISTRY


# --- lookup -----------------------------------------------------------------------------------------


def test_get_spec_returns_the_role() -> None:
    assert get_spec(REGISTRY, "judge") is REGISTRY["judge"]


def test_get_spec_names_the_known_roles_for_an_unknown_one() -> None:
    with pytest.raises(
        AutodevError, match=r"role 'planner' not in registry; known roles: architect, "
    ) as info:
        get_spec(REGISTRY, "planner")

    assert "test_engineer" in info.value.message


# --- model and turns ----------------------------------------------------------------------------------


def test_defaults_resolve_the_role_tier_for_the_platform() -> None:
    config = AutodevConfig()

    assert REGISTRY["explorer"].effective(config, "claude_code") == EffectiveRoleSettings("haiku", 30)
    assert REGISTRY["architect"].effective(config, "claude_code").model == "opus"
    assert REGISTRY["developer"].effective(config, "claude_code").model == "sonnet"
    assert REGISTRY["architect"].effective(config, "gemini").model == "gemini-2.5-pro"
    assert REGISTRY["explorer"].effective(config, "gemini").model == "gemini-2.5-flash"


@pytest.mark.parametrize("platform", ["inline", "scripted", "auto", "cursor"])
def test_platforms_without_a_model_for_the_tier_let_the_cli_choose(platform: Platform) -> None:
    settings = REGISTRY["developer"].effective(AutodevConfig(), platform)

    assert settings == EffectiveRoleSettings(model=None, max_turns=REGISTRY["developer"].max_turns)


def test_configured_tier_table_is_used() -> None:
    config = AutodevConfig(model_tiers={"opencode": TierModels(standard="my-standard")})

    assert REGISTRY["reviewer"].effective(config, "opencode").model == "my-standard"
    assert REGISTRY["architect"].effective(config, "opencode").model is None


def test_role_override_beats_the_built_in_tier_and_turns() -> None:
    config = AutodevConfig(roles={"reviewer": RoleSettings(model="strong", max_turns=5)})

    assert REGISTRY["reviewer"].effective(config, "claude_code") == EffectiveRoleSettings("opus", 5)
    assert REGISTRY["developer"].effective(config, "claude_code").model == "sonnet"


def test_role_override_with_a_model_name_passes_it_through() -> None:
    config = AutodevConfig(roles={"judge": RoleSettings(model="claude-sonnet-4-5")})

    assert REGISTRY["judge"].effective(config, "claude_code").model == "claude-sonnet-4-5"
    assert REGISTRY["judge"].effective(config, "inline").model == "claude-sonnet-4-5"


def test_role_override_applies_field_by_field() -> None:
    only_turns = AutodevConfig(roles={"developer": RoleSettings(max_turns=9)})
    only_model = AutodevConfig(roles={"developer": RoleSettings(model="fast")})

    assert REGISTRY["developer"].effective(only_turns, "claude_code") == EffectiveRoleSettings("sonnet", 9)
    assert REGISTRY["developer"].effective(only_model, "claude_code") == EffectiveRoleSettings(
        "haiku", REGISTRY["developer"].max_turns
    )


# --- the spec model -----------------------------------------------------------------------------------


def _spec(**changes: object) -> AgentSpec:
    fields: dict[str, object] = {
        "role": "reviewer",
        "prompt": "Review the change.",
        "tools": ("read",),
        "model_tier": "standard",
        "max_turns": 3,
        "action": "review",
        "output_contract": "A VERDICT line.",
    }
    fields.update(changes)
    return AgentSpec.model_validate(fields)


@pytest.mark.parametrize(
    "changes",
    [
        {"prompt": "  \n"},
        {"tools": ("read", "read")},
        {"tools": ("read", "shell")},
        {"role": "planner"},
        {"model_tier": "huge"},
        {"max_turns": 0},
        {"action": "deploy"},
        {"output_contract": "two\nlines"},
        {"extra": True},
    ],
)
def test_spec_rejects_invalid_fields(changes: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        _spec(**changes)


def test_spec_is_frozen() -> None:
    spec = _spec()

    with pytest.raises(ValidationError):
        spec.tools = ("read", "write")  # type: ignore[misc]


def test_a_tasks_tier_replaces_the_roles_default_and_an_offset_moves_it_within_the_tiers() -> None:
    offsets = {"reviewer": {"tier_offset": 1}, "judge": {"tier_offset": -2}}
    config = AutodevConfig.model_validate({"roles": offsets})

    assert REGISTRY["developer"].effective(config, "claude_code", task_tier="fast").model == "haiku"
    assert REGISTRY["reviewer"].effective(config, "claude_code", task_tier="fast").model == "sonnet"
    assert REGISTRY["reviewer"].effective(config, "claude_code", task_tier="strong").model == "opus"
    assert REGISTRY["judge"].effective(config, "claude_code", task_tier="standard").model == "haiku"
    # Without a task (the plan phase) the role keeps its own default.
    assert REGISTRY["developer"].effective(config, "claude_code").model == "sonnet"


def test_a_model_set_for_the_role_wins_over_the_tasks_tier() -> None:
    pinned = {"developer": {"model": "claude-sonnet-4-5", "tier_offset": 1}}
    config = AutodevConfig.model_validate({"roles": pinned})

    assert (
        REGISTRY["developer"].effective(config, "claude_code", task_tier="fast").model == "claude-sonnet-4-5"
    )


@pytest.mark.parametrize(
    ("tier", "offset", "expected"),
    [
        ("fast", 0, "fast"),
        ("fast", 1, "standard"),
        ("fast", 5, "strong"),
        ("strong", -1, "standard"),
        ("standard", -9, "fast"),
    ],
)
def test_shifted_tier_stays_within_fast_and_strong(tier: CapabilityTier, offset: int, expected: str) -> None:
    assert shifted_tier(tier, offset) == expected
