"""load_config and explain_config: precedence, deep merge, environment parsing and error messages."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from autodev.config import (
    ROLE_NAMES,
    AutodevConfig,
    ConfigEntry,
    ModelPrice,
    explain_config,
    load_config,
)
from autodev.errors import ConfigError

TOP_LEVEL_KEYS = sorted(AutodevConfig.model_fields)


def write_pyproject(root: Path, body: str) -> Path:
    path = root / "pyproject.toml"
    path.write_text('[project]\nname = "demo"\n\n' + body, encoding="utf-8")
    return path


def write_config(root: Path, body: str) -> Path:
    path = root / ".autodev" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def config_error(
    root: Path, *, env: dict[str, str] | None = None, overrides: dict[str, Any] | None = None
) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(root, env={} if env is None else env, overrides=overrides)
    message = caught.value.message
    assert "\n" not in message
    assert "pydantic" not in message
    assert "Traceback" not in message
    return caught.value


# Precedence ------------------------------------------------------------------------------------


def test_no_sources_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path, env={}) == AutodevConfig()


def test_pyproject_overrides_defaults(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.autodev]\nqa_retry_limit = 5\n")

    assert load_config(tmp_path, env={}).qa_retry_limit == 5


def test_pyproject_without_an_autodev_table_is_ignored(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.ruff]\nline-length = 100\n")

    assert load_config(tmp_path, env={}) == AutodevConfig()


def test_config_file_overrides_pyproject(tmp_path: Path) -> None:
    write_pyproject(tmp_path, '[tool.autodev]\nqa_retry_limit = 5\nplatform = "codex"\n')
    write_config(tmp_path, "qa_retry_limit = 7\n")

    config = load_config(tmp_path, env={})

    assert config.qa_retry_limit == 7
    assert config.platform == "codex"


def test_env_overrides_config_file(tmp_path: Path) -> None:
    write_config(tmp_path, 'qa_retry_limit = 7\nplatform = "gemini"\n')

    config = load_config(tmp_path, env={"AUTODEV_QA_RETRY_LIMIT": "9"})

    assert config.qa_retry_limit == 9
    assert config.platform == "gemini"


def test_overrides_override_env(tmp_path: Path) -> None:
    env = {"AUTODEV_QA_RETRY_LIMIT": "9", "AUTODEV_AUTO_COMMIT": "false"}

    config = load_config(tmp_path, env=env, overrides={"qa_retry_limit": 11})

    assert config.qa_retry_limit == 11
    assert config.auto_commit is False


def test_env_defaults_to_the_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTODEV_QA_RETRY_LIMIT", "6")

    assert load_config(tmp_path).qa_retry_limit == 6


# Deep merge ------------------------------------------------------------------------------------


def test_tables_merge_key_by_key_across_sources(tmp_path: Path) -> None:
    write_pyproject(
        tmp_path,
        "[tool.autodev.guardrails]\nmax_tool_calls_per_task = 10\nmax_diff_bytes = 100\n",
    )
    write_config(tmp_path, "[guardrails]\nmax_diff_bytes = 200\n")

    config = load_config(
        tmp_path,
        env={"AUTODEV_GUARDRAILS__LOOP_DETECTION_THRESHOLD": "4"},
        overrides={"guardrails": {"cost_budget_usd_per_plan": 2.5}},
    )

    assert config.guardrails.max_tool_calls_per_task == 10
    assert config.guardrails.max_diff_bytes == 200
    assert config.guardrails.loop_detection_threshold == 4
    assert config.guardrails.cost_budget_usd_per_plan == 2.5
    assert config.guardrails.max_duration_s_per_task == 900


def test_lists_replace_rather_than_extend(tmp_path: Path) -> None:
    write_pyproject(tmp_path, '[tool.autodev.tournaments]\nauto_disable_for_models = ["a", "b"]\n')
    write_config(tmp_path, '[tournaments]\nauto_disable_for_models = ["c"]\n')

    assert load_config(tmp_path, env={}).tournaments.auto_disable_for_models == ["c"]


def test_one_tier_overridden_keeps_the_other_default_tiers(tmp_path: Path) -> None:
    write_config(tmp_path, '[model_tiers.codex]\nfast = "gpt-5.5-mini"\n')

    tiers = load_config(tmp_path, env={}).model_tiers

    assert tiers["codex"].fast == "gpt-5.5-mini"
    assert tiers["codex"].strong == "gpt-5.5"
    assert tiers["claude_code"].strong == "opus"


def test_roles_and_price_table_merge_across_sources(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        '[roles.developer]\nmodel = "strong"\n'
        '[price_table."gpt-5.5"]\ninput_per_mtok = 1.0\noutput_per_mtok = 8.0\n',
    )

    config = load_config(tmp_path, env={}, overrides={"roles.developer.max_turns": 30})

    assert config.roles["developer"].model == "strong"
    assert config.roles["developer"].max_turns == 30
    assert config.price_table == {"gpt-5.5": ModelPrice(input_per_mtok=1.0, output_per_mtok=8.0)}


# Environment -----------------------------------------------------------------------------------


def test_env_values_are_read_as_toml_values(tmp_path: Path) -> None:
    env = {
        "AUTODEV_QA_RETRY_LIMIT": "5",
        "AUTODEV_AUTO_COMMIT": "false",
        "AUTODEV_LOCK_TIMEOUT_S": "1.5",
        "AUTODEV_TOURNAMENTS__AUTO_DISABLE_FOR_MODELS": '["opus", "o3"]',
        "AUTODEV_ROLES__DEVELOPER__MODEL": '"strong"',
        "AUTODEV_PLATFORM": "codex",
    }

    config = load_config(tmp_path, env=env)

    assert config.qa_retry_limit == 5
    assert config.auto_commit is False
    assert config.lock_timeout_s == 1.5
    assert config.tournaments.auto_disable_for_models == ["opus", "o3"]
    assert config.roles["developer"].model == "strong"
    assert config.platform == "codex"


def test_env_nesting_uses_double_underscores(tmp_path: Path) -> None:
    env = {
        "AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK": "10",
        "AUTODEV_TOURNAMENTS__PLAN__ENABLED": "false",
        "AUTODEV_QA_GATES__TEST__COMMAND": '["pytest", "-x"]',
    }

    config = load_config(tmp_path, env=env)

    assert config.guardrails.max_tool_calls_per_task == 10
    assert config.tournaments.plan.enabled is False
    assert config.qa_gates.test.command == ["pytest", "-x"]


def test_env_names_are_case_insensitive(tmp_path: Path) -> None:
    env = {"autodev_qa_retry_limit": "4", "Autodev_Tournaments__Impl__Enabled": "true"}

    config = load_config(tmp_path, env=env)

    assert config.qa_retry_limit == 4
    assert config.tournaments.impl.enabled is True


def test_env_inline_table_sets_a_whole_table(tmp_path: Path) -> None:
    env = {
        "AUTODEV_PRICE_TABLE": '{"gpt-5.5" = {input_per_mtok = 1.25, output_per_mtok = 10.0}}',
        "AUTODEV_GUARDRAILS": "{max_tool_calls_per_task = 7, max_diff_bytes = 10}",
        "AUTODEV_GUARDRAILS__MAX_DIFF_BYTES": "20",
    }

    config = load_config(tmp_path, env=env)

    assert config.price_table["gpt-5.5"].output_per_mtok == 10.0
    assert config.guardrails.max_tool_calls_per_task == 7
    # The variable naming a single key wins over the one naming its whole table.
    assert config.guardrails.max_diff_bytes == 20


def test_env_mapping_is_not_mutated(tmp_path: Path) -> None:
    env = {"AUTODEV_QA_RETRY_LIMIT": "5", "AUTODEV_LOG_LEVEL": "debug", "HOME": "/root"}
    snapshot = dict(env)

    load_config(tmp_path, env=MappingProxyType(env))

    assert env == snapshot


def test_log_level_and_unrelated_variables_are_ignored(tmp_path: Path) -> None:
    env = {"AUTODEV_LOG_LEVEL": "debug", "PATH": "/usr/bin", "MY_AUTODEV_THING": "x"}

    assert load_config(tmp_path, env=env) == AutodevConfig()


def test_unknown_env_variable_names_the_variable_and_lists_top_level_keys(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_RETRY_LIMIT": "3"})

    assert error.message.startswith("environment variable AUTODEV_RETRY_LIMIT: retry_limit:")
    assert "did you mean 'qa_retry_limit'?" in error.message
    assert "allowed keys at the top level: " + ", ".join(TOP_LEVEL_KEYS) in error.message


def test_env_with_a_single_underscore_for_nesting_is_unknown(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_GUARDRAILS_MAX_TOOL_CALLS_PER_TASK": "3"})

    assert "AUTODEV_GUARDRAILS_MAX_TOOL_CALLS_PER_TASK" in error.message
    assert "AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK" in error.message


def test_env_variable_with_an_empty_key_part_is_rejected(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_GUARDRAILS____X": "3"})

    assert error.source == "environment variable AUTODEV_GUARDRAILS____X"


def test_two_env_variables_for_one_key_are_rejected(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_QA_RETRY_LIMIT": "3", "autodev_qa_retry_limit": "4"})

    assert "qa_retry_limit" in error.message
    assert "AUTODEV_QA_RETRY_LIMIT" in error.message
    assert "autodev_qa_retry_limit" in error.message


# Unknown keys ----------------------------------------------------------------------------------


def test_unknown_key_in_pyproject_names_the_table_and_allowed_keys(tmp_path: Path) -> None:
    pyproject = write_pyproject(tmp_path, "[tool.autodev]\nretries = 3\n")

    error = config_error(tmp_path)

    assert error.source == f"[tool.autodev] in {pyproject}"
    assert error.key == "retries"
    assert ", ".join(TOP_LEVEL_KEYS) in error.message


def test_unknown_nested_key_in_config_file_lists_the_keys_of_its_table(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, "[guardrails]\nmax_tool_calls = 5\n")

    error = config_error(tmp_path)

    assert error.message.startswith(f"{config_file}: guardrails.max_tool_calls: unknown key")
    assert "did you mean 'max_tool_calls_per_task'?" in error.message
    assert (
        "allowed keys in [guardrails]: cost_budget_usd_per_plan, loop_detection_threshold, "
        "max_diff_bytes, max_duration_s_per_task, max_file_bytes, max_tool_calls_per_task" in error.message
    )


def test_unknown_role_lists_the_role_names(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, '[roles.coder]\nmodel = "fast"\n')

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert error.key == "roles.coder"
    assert "allowed keys in [roles]: " + ", ".join(sorted(ROLE_NAMES)) in error.message


def test_unknown_key_in_env_value_table_names_the_variable(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_GUARDRAILS": "{max_calls = 1}"})

    assert error.source == "environment variable AUTODEV_GUARDRAILS"
    assert error.key == "guardrails.max_calls"


def test_unknown_key_on_the_command_line(tmp_path: Path) -> None:
    error = config_error(tmp_path, overrides={"tournaments.plan.judges": 5})

    assert error.message.startswith("command line: tournaments.plan.judges: unknown key")
    assert "allowed keys in [tournaments.plan]: convergence_k, enabled," in error.message


def test_unknown_key_inside_a_nested_override_mapping(tmp_path: Path) -> None:
    error = config_error(tmp_path, overrides={"qa_gates": {"lint": {"cmd": ["ruff"]}}})

    assert error.source == "command line"
    assert error.key == "qa_gates.lint.cmd"
    assert "allowed keys in [qa_gates.lint]: command, enabled, timeout_s" in error.message


def test_malformed_dotted_override_key_is_rejected(tmp_path: Path) -> None:
    error = config_error(tmp_path, overrides={"guardrails..max_diff_bytes": 1})

    assert error.source == "command line"
    assert "guardrails..max_diff_bytes" in error.message


def test_quoted_dotted_override_key_reaches_a_model_name_with_dots(tmp_path: Path) -> None:
    overrides = {
        'price_table."gpt-5.5".input_per_mtok': 1.0,
        'price_table."gpt-5.5".output_per_mtok': 2.0,
    }

    config = load_config(tmp_path, env={}, overrides=overrides)

    assert config.price_table["gpt-5.5"] == ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)


# Bad values ------------------------------------------------------------------------------------


def test_bad_literal_names_file_key_value_and_allowed_values(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, 'platform = "claud"\n')

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert error.key == "platform"
    assert error.message == (
        f"{config_file}: platform: Input should be 'auto', 'claude_code', 'codex', 'cursor', "
        "'opencode', 'gemini', 'inline' or 'scripted' (got 'claud')"
    )


def test_bad_value_is_blamed_on_the_highest_layer_that_set_it(tmp_path: Path) -> None:
    write_config(tmp_path, "[tournaments.plan]\nnum_judges = 0\n")

    load_config(tmp_path, env={"AUTODEV_TOURNAMENTS__PLAN__NUM_JUDGES": "5"})
    error = config_error(tmp_path, overrides={"tournaments.plan.num_judges": -2})

    assert error.source == "command line"
    assert error.key == "tournaments.plan.num_judges"
    assert "greater than or equal to 1 (got -2)" in error.message


def test_bad_value_from_pyproject_names_the_tool_table(tmp_path: Path) -> None:
    pyproject = write_pyproject(tmp_path, "[tool.autodev.guardrails]\nmax_diff_bytes = 0\n")

    error = config_error(tmp_path)

    assert error.source == f"[tool.autodev] in {pyproject}"
    assert error.key == "guardrails.max_diff_bytes"


def test_bad_value_from_env_names_the_variable(tmp_path: Path) -> None:
    error = config_error(tmp_path, env={"AUTODEV_QA_RETRY_LIMIT": "many"})

    assert error.source == "environment variable AUTODEV_QA_RETRY_LIMIT"
    assert "valid integer" in error.message
    assert "(got 'many')" in error.message


def test_cross_field_error_is_blamed_on_the_layer_that_set_a_field_of_the_table(
    tmp_path: Path,
) -> None:
    config_file = write_config(tmp_path, "[tournaments.impl]\nquorum = 4\n")

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert error.key == "tournaments.impl"
    assert "quorum (4) cannot exceed num_judges (3)" in error.message


def test_shell_string_gate_command_is_rejected(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, '[qa_gates.test]\ncommand = "pytest -q"\n')

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert error.key == "qa_gates.test.command"
    assert "argv list" in error.message


def test_empty_gate_command_is_rejected(tmp_path: Path) -> None:
    error = config_error(tmp_path, overrides={"qa_gates.lint.command": []})

    assert error.key == "qa_gates.lint.command"
    assert "empty list" in error.message


def test_blank_argv_element_is_rejected_with_its_position(tmp_path: Path) -> None:
    error = config_error(tmp_path, overrides={"qa_gates.lint.command": ["ruff", ""]})

    assert error.key == "qa_gates.lint.command[1]"


def test_every_bad_value_is_reported_on_one_line(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, "qa_retry_limit = 0\n")

    error = config_error(tmp_path, env={"AUTODEV_LOCK_TIMEOUT_S": "-1"})

    assert error.message.startswith(f"{config_file}: qa_retry_limit:")
    assert "; also environment variable AUTODEV_LOCK_TIMEOUT_S: lock_timeout_s:" in error.message


# Broken files ----------------------------------------------------------------------------------


def test_toml_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, "qa_retry_limit = 3\n[guardrails\n")

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert error.message.startswith(f"{config_file}: invalid TOML at line 2, column 12:")


def test_toml_syntax_error_in_pyproject_names_pyproject(tmp_path: Path) -> None:
    pyproject = write_pyproject(tmp_path, "[tool.autodev]\nqa_retry_limit = = 3\n")

    error = config_error(tmp_path)

    assert error.source == str(pyproject)
    assert "invalid TOML at line 5" in error.message


def test_autodev_tool_entry_that_is_not_a_table_is_rejected(tmp_path: Path) -> None:
    pyproject = write_pyproject(tmp_path, "[tool]\nautodev = 3\n")

    error = config_error(tmp_path)

    assert error.source == str(pyproject)
    assert "must be a table" in error.message


def test_config_file_that_is_not_utf8_is_rejected(tmp_path: Path) -> None:
    config_file = write_config(tmp_path, "")
    config_file.write_bytes(b"platform = '\xff'\n")

    error = config_error(tmp_path)

    assert error.source == str(config_file)
    assert "UTF-8" in error.message


# explain_config --------------------------------------------------------------------------------


def test_explain_config_names_the_source_of_each_value(tmp_path: Path) -> None:
    pyproject = write_pyproject(tmp_path, '[tool.autodev]\nplatform = "codex"\nqa_retry_limit = 4\n')
    config_file = write_config(tmp_path, "qa_retry_limit = 5\n[guardrails]\nmax_diff_bytes = 9\n")
    env = {"AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK": "10", "AUTODEV_AUTO_COMMIT": "false"}
    overrides = {"auto_commit": True, "roles.developer.model": "strong"}

    entries = {e.key: e for e in explain_config(tmp_path, env=env, overrides=overrides)}

    assert entries["platform"] == ConfigEntry("platform", "codex", str(pyproject))
    assert entries["qa_retry_limit"] == ConfigEntry("qa_retry_limit", 5, str(config_file))
    assert entries["guardrails.max_diff_bytes"].source == str(config_file)
    assert entries["guardrails.max_tool_calls_per_task"] == ConfigEntry(
        "guardrails.max_tool_calls_per_task", 10, "env AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK"
    )
    assert entries["auto_commit"] == ConfigEntry("auto_commit", True, "command line")
    assert entries["roles.developer.model"].source == "command line"
    assert entries["roles.developer.max_turns"] == ConfigEntry("roles.developer.max_turns", None, "default")
    assert entries["guardrails.max_duration_s_per_task"].source == "default"


def test_explain_config_lists_every_leaf_once_sorted_by_key(tmp_path: Path) -> None:
    entries = explain_config(tmp_path, env={})
    keys = [entry.key for entry in entries]

    assert keys == sorted(keys)
    assert len(keys) == len(set(keys))
    assert {entry.source for entry in entries} == {"default"}
    by_key = {entry.key: entry.value for entry in entries}
    assert by_key["roles"] == {}
    assert by_key["price_table"] == {}
    assert by_key["tournaments.auto_disable_for_models"] == ["opus"]
    assert by_key["model_tiers.claude_code.strong"] == "opus"
    assert "tournaments.plan.num_judges" in by_key
    assert "qa_gates.secretscan.timeout_s" in by_key


def test_explain_config_quotes_keys_that_are_not_bare(tmp_path: Path) -> None:
    write_config(tmp_path, '[price_table."gpt-5.5"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n')

    keys = {entry.key for entry in explain_config(tmp_path, env={})}

    assert 'price_table."gpt-5.5".input_per_mtok' in keys


def test_explain_config_raises_the_same_errors_as_load_config(tmp_path: Path) -> None:
    write_config(tmp_path, 'platform = "claud"\n')

    with pytest.raises(ConfigError, match="'claud'"):
        explain_config(tmp_path, env={})
