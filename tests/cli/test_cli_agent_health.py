"""Before the plan phase is paid for, the chosen agent CLI makes one real call: a refused key stops the run
with the CLI's own words, exit 2, and nothing recorded. The agent is the fake ``cursor-agent`` on PATH,
found and run as the real CLIs are."""

from __future__ import annotations

import os
from pathlib import Path

from support.cli import assert_clean_error, autodev
from support.fake_cursor import fake_cursor_env, install_fake_cursor, logged_calls
from support.model_server import Scenario
from support.parallel import git_repo


def _env(tmp_path: Path, scenario: Scenario) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    install_fake_cursor(bin_dir)
    log = tmp_path / "cursor.log"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **fake_cursor_env(log, scenario)}
    return env, log


def test_a_refused_key_stops_the_plan_phase_before_it_starts_with_the_clis_words(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    env, log = _env(tmp_path, Scenario(refusal="auth_failed"))

    result = autodev(repo, "plan", "--platform", "cursor", "add a --json flag", env=env)

    assert_clean_error(result, 2)
    assert "cursor" in result.err and "auth_failed" in result.err and "invalid x-api-key" in result.err
    assert "--platform" in result.err
    # One call: the probe. The explorer was never asked, and nothing was recorded.
    calls = logged_calls(log)
    assert len(calls) == 1 and "--mode" in calls[0]["argv"]
    assert not (repo / ".autodev" / "ledger.jsonl").exists()


def test_a_healthy_agent_is_probed_once_and_the_run_goes_on(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    env, log = _env(tmp_path, Scenario(text="OK"))

    result = autodev(repo, "plan", "--platform", "cursor", "add a --json flag", env=env)

    # The fake answers "OK" to every role, so the architect's plan does not parse: the plan phase ran.
    assert result.code != 0
    assert "architect" in result.err, result.err
    calls = logged_calls(log)
    assert len(calls) >= 4  # the probe, the explorer, the domain expert, the architect (and its retry)


def test_doctor_probes_each_installed_agent_and_no_probe_skips_the_paid_call(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    env, log = _env(tmp_path, Scenario(refusal="auth_failed"))

    probed = autodev(repo, "doctor", env=env)
    versions_only = autodev(repo, "doctor", "--no-probe", env=env)

    assert probed.code == 0, probed.err
    flat = " ".join(probed.out.split())
    assert "Agent health (one real call each)" in flat
    assert "auth_failed" in flat and "invalid x-api-key" in flat
    assert versions_only.code == 0, versions_only.err
    assert "--no-probe: versions only" in " ".join(versions_only.out.split())
    assert len(logged_calls(log)) == 1  # the probe of the first doctor only


def test_a_dirty_tree_is_refused_before_the_paid_probe(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "README.md").write_text("edited by the user\n")
    env, log = _env(tmp_path, Scenario(refusal="auth_failed"))

    result = autodev(repo, "run", "--platform", "cursor", "add a --json flag", env=env)

    assert_clean_error(result, 2)
    assert "README.md" in result.err and "auth_failed" not in result.err
    assert not log.exists()  # the agent was never called


def test_a_pinned_platform_without_a_read_only_sandbox_stops_before_any_call_naming_the_alternatives(
    tmp_path: Path,
) -> None:
    repo = git_repo(tmp_path / "repo")
    env, log = _env(tmp_path, Scenario(text="OK"))

    result = autodev(repo, "plan", "--platform", "opencode", "add a --json flag", env=env)

    assert_clean_error(result, 2)
    flat = " ".join(result.err.split())
    assert "opencode cannot start the " in flat and "in a read-only sandbox" in flat
    assert "cursor (on PATH)" in flat and "AUTODEV_READ_ONLY_PLATFORM" in flat
    assert not log.exists()
    assert not (repo / ".autodev" / "ledger.jsonl").exists()


def test_read_only_platform_names_the_cli_the_reading_roles_run_on(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    env, log = _env(tmp_path, Scenario(text="OK"))
    env["AUTODEV_READ_ONLY_PLATFORM"] = "cursor"

    result = autodev(repo, "run", "--platform", "opencode", "add a --json flag", env=env)

    assert "platform: opencode (configured)" in result.out
    assert "read-only roles: cursor (configured)" in result.out
    # This repository has nothing the gates could check, so the preflight stops the run before any call.
    assert_clean_error(result, 2)
    assert "preflight" in result.err and "cannot start" not in result.err
    assert not log.exists()
