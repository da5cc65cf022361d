"""The config.toml template: valid TOML as written, and the defaults once its settings are uncommented."""

from __future__ import annotations

import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from autodev.config import (
    AGENT_CLIS,
    PLATFORMS,
    ROLE_NAMES,
    AutodevConfig,
    explain_config,
    load_config,
    render_config_template,
)
from autodev.config.template import format_toml_key, format_toml_value

SETTING_LINE = re.compile(r"# (\[.+\]|[A-Za-z0-9_]+ = .+)")
UNSET_LINE = re.compile(r"# [A-Za-z0-9_]+: unset by default; example: ([A-Za-z0-9_]+ = .+)")
EXAMPLE_LINE = re.compile(r"#     (\[.+\]|[A-Za-z0-9_]+ = .+)")


def uncomment_settings(template: str) -> str:
    """Uncomment every `# key = value` and `# [table]` line, exactly as a user would."""
    lines = []
    for line in template.split("\n"):
        match = SETTING_LINE.fullmatch(line)
        lines.append(match.group(1) if match else line)
    return "\n".join(lines)


def uncomment_examples(template: str) -> str:
    """Also turn every `unset by default` line and every indented example into a setting."""
    lines = []
    for line in uncomment_settings(template).split("\n"):
        match = UNSET_LINE.fullmatch(line) or EXAMPLE_LINE.fullmatch(line)
        lines.append(match.group(1) if match else line)
    return "\n".join(lines)


def load_from_config_file(root: Path, text: str) -> AutodevConfig:
    path = root / ".autodev" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return load_config(root, env={})


def test_template_as_written_is_valid_toml_that_sets_nothing(tmp_path: Path) -> None:
    template = render_config_template()

    assert tomllib.loads(template) == {}
    assert load_from_config_file(tmp_path, template) == AutodevConfig()


def test_uncommented_template_loads_to_the_defaults(tmp_path: Path) -> None:
    assert load_from_config_file(tmp_path, uncomment_settings(render_config_template())) == (AutodevConfig())


def test_uncommented_template_sets_every_value_that_is_not_unset(tmp_path: Path) -> None:
    load_from_config_file(tmp_path, uncomment_settings(render_config_template()))
    config_file = str(tmp_path / ".autodev" / "config.toml")

    for entry in explain_config(tmp_path, env={}):
        if entry.value is None or entry.value == {}:
            assert entry.source == "default", entry
        else:
            assert entry.source == config_file, entry


def test_every_example_in_the_template_is_a_valid_setting(tmp_path: Path) -> None:
    config = load_from_config_file(tmp_path, uncomment_examples(render_config_template()))

    assert config.guardrails.cost_budget_usd_per_plan == 5.0
    assert config.qa_gates.lint.command == ["ruff", "check", "."]
    assert config.roles["developer"].model == "strong"
    assert config.price_table["my-model"].input_per_mtok == 3.0
    assert config.model_tiers["cursor"].fast == "model-name"


def test_each_setting_is_preceded_by_its_description() -> None:
    template = render_config_template()

    assert (
        "# Attempts a task gets (developer, QA gates, review, tests) before it is escalated and "
        "blocked.\n# qa_retry_limit = 3\n" in template
    )
    assert "# [tournaments.plan]" in template
    assert "# [qa_gates.secretscan]" in template
    assert '# [model_tiers.claude_code]\n# fast = "haiku"' in template
    assert "# [inline]\n\n# Largest answer file, in bytes," in template
    assert "# max_answer_bytes = 4194304\n" in template
    assert "# cost_budget_usd_per_plan: unset by default; example: cost_budget_usd_per_plan = 5.0" in (
        template
    )


def test_header_explains_the_precedence() -> None:
    header = render_config_template().split("\n\n")[0]

    assert "pyproject.toml" in header
    assert "AUTODEV_" in header
    assert "command-line" in header


def test_no_line_is_wider_than_one_hundred_characters() -> None:
    assert max(len(line) for line in render_config_template().split("\n")) <= 100


toml_scalars = st.one_of(
    st.text(),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
)


@given(st.one_of(toml_scalars, st.lists(st.text())))
def test_toml_values_round_trip(value: Any) -> None:
    assert tomllib.loads(f"key = {format_toml_value(value)}")["key"] == value


@given(st.lists(st.text(min_size=1), min_size=1, max_size=3))
def test_toml_keys_round_trip(parts: list[str]) -> None:
    value: Any = tomllib.loads(f"{format_toml_key(parts)} = 1")
    for part in parts:
        value = value[part]
    assert value == 1


# Control characters other than a tab are refused when the configuration loads.
model_names = st.text(
    st.characters(exclude_categories=("Cs", "Cc"), include_characters="\t"), min_size=1
).filter(lambda text: text.strip())
role_settings = st.fixed_dictionaries(
    {},
    optional={"model": model_names, "max_turns": st.integers(min_value=1, max_value=1000)},
)
prices = st.fixed_dictionaries(
    {
        "input_per_mtok": st.floats(min_value=0, max_value=1e6),
        "output_per_mtok": st.floats(min_value=0, max_value=1e6),
    }
)
overrides_strategy = st.fixed_dictionaries(
    {},
    optional={
        "platform": st.sampled_from(PLATFORMS),
        "qa_retry_limit": st.integers(min_value=1, max_value=10**9),
        "auto_commit": st.booleans(),
        "lock_timeout_s": st.floats(min_value=1e-3, max_value=1e9),
        "tournaments.seed": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "tournaments.auto_disable_for_models": st.lists(model_names, max_size=3),
        "tournaments.impl.model": model_names,
        "guardrails.cost_budget_usd_per_plan": st.floats(min_value=0.01, max_value=1e6),
        "qa_gates.test.command": st.lists(model_names, min_size=1, max_size=4),
        "qa_gates.on_missing_tool": st.sampled_from(["error", "skip"]),
        "roles": st.dictionaries(st.sampled_from(ROLE_NAMES), role_settings, max_size=3),
        "model_tiers": st.dictionaries(
            st.sampled_from(AGENT_CLIS),
            st.fixed_dictionaries({}, optional={"fast": model_names, "strong": model_names}),
            max_size=2,
        ),
        "price_table": st.dictionaries(model_names, prices, max_size=2),
    },
)


@settings(max_examples=60, deadline=None)
@given(overrides_strategy)
def test_template_of_any_loaded_config_round_trips(overrides: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        config = load_config(Path(first), env={}, overrides=overrides)

        template = render_config_template(config)

        assert tomllib.loads(template) == {}
        assert load_from_config_file(Path(second), uncomment_settings(template)) == config
