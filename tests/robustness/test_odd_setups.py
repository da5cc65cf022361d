"""Odd but legal set-ups: each works, or is refused with one line that names the real cause and its fix.

``.autodev`` as a link to a directory elsewhere, a repository another user owns, uncommitted changes
(untracked files among them), a detached HEAD, and a reviewer whose reply gives two different verdicts.
Refusals come before any agent call and leave the ledger as it was. The runs use the installed
``autodev`` executable with scripted agents; git, the gates and the tests are real.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_error, autodev
from support.orchestration import orchestrator, run
from support.projects import PLAN, git, mini_project, one_task_script

from autodev.errors import DetachedHeadError
from autodev.state.ledger import Ledger
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown

INTENT = "Add triple to mini"
SCRIPTED = ("--platform", "scripted", "--script")
# A uid no account on a test machine has: the repository then belongs to "another user".
STRANGER = 12345


def _script(directory: Path, **changes: Any) -> Path:
    path = directory / "script.json"
    path.write_text(one_task_script(**changes).model_dump_json(exclude_defaults=True), encoding="utf-8")
    return path


def _save_plan(root: Path) -> bytes:
    """Save the one-task plan through the library (quicker than a process); the ledger's bytes after it."""
    with PlanManager(root) as manager:
        manager.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-setup")
    return (root / ".autodev" / "ledger.jsonl").read_bytes()


def _command(name: str, script: Path) -> tuple[str, ...]:
    return (name, *SCRIPTED, str(script), *((INTENT,) if name == "run" else ()))


def _task_statuses(root: Path) -> dict[str, str]:
    result = autodev(root, "status", "--json")
    assert result.code == 0, result
    return {task["id"]: task["status"] for task in json.loads(result.out)["tasks"]}


# --- .autodev as a link -------------------------------------------------------------------------------------


def test_a_state_directory_linked_to_elsewhere_runs_a_task_to_its_commit(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    elsewhere = tmp_path / "state-elsewhere"
    elsewhere.mkdir()
    (root / ".autodev").symlink_to(elsewhere, target_is_directory=True)
    script = _script(tmp_path)

    result = autodev(root, "run", *SCRIPTED, str(script), INTENT)

    assert result.code == 0, result
    assert _task_statuses(root) == {"1.1": "complete"}
    assert git(root, "log", "-1", "--format=%s").strip() == "autodev: 1.1 Add triple"
    committed = git(root, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(committed) == ["mini/core.py", "tests/test_triple.py"]
    # The state went through the link, and the ledger it wrote is whole.
    assert (elsewhere / "ledger.jsonl").is_file()
    verify = autodev(root, "ledger", "verify")
    assert verify.code == 0, verify


# --- a repository another user owns -------------------------------------------------------------------------


def _give_away(root: Path) -> None:
    for directory, subdirectories, files in os.walk(root):
        for name in (directory, *(os.path.join(directory, entry) for entry in subdirectories + files)):
            os.chown(name, STRANGER, STRANGER, follow_symlinks=False)


def test_a_repository_owned_by_another_user_names_safe_directory(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini").resolve()
    script = _script(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    # No global or system configuration that may already trust every directory.
    env = {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        _give_away(root)
    except PermissionError:
        pytest.skip("giving the repository to another user needs root")
    probe = subprocess.run(
        ["git", "rev-parse", "--git-dir"],
        cwd=root,
        env={**os.environ, **env, "LC_ALL": "C"},
        capture_output=True,
        text=True,
    )
    if "dubious ownership" not in probe.stderr:
        pytest.skip(f"this git does not refuse another user's repository: {probe.stderr.strip()!r}")

    result = autodev(root, "run", *SCRIPTED, str(script), INTENT, env=env)

    assert_clean_error(result)
    assert "owned by another user" in result.err, result.err
    assert f"`git config --global --add safe.directory {root}`" in result.err, result.err
    assert "git init" not in result.err
    assert not (root / ".autodev" / "ledger.jsonl").exists()


# --- uncommitted changes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "execute", "resume"])
def test_uncommitted_changes_are_refused_naming_them_and_a_stash_that_takes_untracked_files(
    tmp_path: Path, command: str
) -> None:
    root = mini_project(tmp_path / "mini")
    script = _script(tmp_path)
    before = _save_plan(root)
    (root / "mini" / "core.py").write_text("# edited by the user\n")
    for number in range(6):
        (root / "notes").mkdir(exist_ok=True)
        (root / "notes" / f"n{number}.txt").write_text("draft\n")

    result = autodev(root, *_command(command, script))

    assert_clean_error(result)
    assert "uncommitted changes (mini/core.py, notes/n0.txt," in result.err, result.err
    assert "+2 more)" in result.err, result.err
    assert "`git stash -u`" in result.err, result.err
    assert (root / ".autodev" / "ledger.jsonl").read_bytes() == before


# --- a detached HEAD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "execute", "resume"])
def test_a_detached_head_is_refused_naming_the_commit_and_the_fix(tmp_path: Path, command: str) -> None:
    root = mini_project(tmp_path / "mini")
    script = _script(tmp_path)
    before = _save_plan(root)
    git(root, "checkout", "-q", "--detach")
    short = git(root, "rev-parse", "--short", "HEAD").strip()

    result = autodev(root, *_command(command, script))

    assert_clean_error(result)
    expected = (
        f"HEAD is detached at {short}; check out a branch (`git switch -c <name>`) or pass --allow-detached"
    )
    assert expected in result.err, result.err
    assert (root / ".autodev" / "ledger.jsonl").read_bytes() == before
    assert Ledger(root / ".autodev" / "ledger.jsonl", readonly=True).open().seq > 0


def test_allow_detached_runs_on_the_detached_head_and_warns_once(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    script = _script(tmp_path)
    git(root, "checkout", "-q", "--detach")
    start = git(root, "rev-parse", "HEAD").strip()

    result = autodev(root, "run", "--allow-detached", *SCRIPTED, str(script), INTENT)

    assert result.code == 0, result
    assert (result.out + result.err).count("HEAD is detached at") == 1, result
    assert _task_statuses(root) == {"1.1": "complete"}
    assert git(root, "rev-parse", "HEAD^").strip() == start
    detached = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=root, capture_output=True)
    assert detached.returncode == 1  # the commit went where HEAD was: still no branch


def test_the_python_api_refuses_a_detached_head_with_a_typed_error(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    git(root, "checkout", "-q", "--detach")
    orch, adapter = orchestrator(root, one_task_script())

    with pytest.raises(DetachedHeadError, match="--allow-detached"):
        run(orch, INTENT)

    assert adapter.calls == []


# --- a reviewer that gives two verdicts ---------------------------------------------------------------------

CONFLICTING_REVIEW = (
    "VERDICT: NEEDS_CHANGES\nISSUES:\n- mini/core.py: triple has no docstring - add one\n\n"
    "On second thought the change is small.\nVERDICT: APPROVED\n"
)


def test_a_reply_with_two_different_verdicts_gets_a_repair_turn_not_an_approval(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    script = one_task_script(reviewer=(CONFLICTING_REVIEW, "VERDICT: APPROVED\nISSUES:\n"))
    orch, adapter = orchestrator(root, script, **{"qa_gates.build.enabled": False})

    outcome = run(orch, INTENT)

    assert [(task.status, task.retry_count) for task in outcome.tasks] == [("complete", 0)]
    reviews = [call.prompt for call in adapter.calls if call.role == "reviewer"]
    assert len(reviews) == 2, "the conflicting reply was taken as a verdict"
    assert "YOUR PREVIOUS REPLY COULD NOT BE USED" in reviews[1]
    assert "triple has no docstring" in reviews[1]  # the repair turn sees what it wrote
    evidence = json.loads((root / ".autodev" / "evidence" / "1.1-review-1.json").read_text())
    assert evidence["repair_of"] is not None
    assert evidence["previous_output"] == CONFLICTING_REVIEW
    assert evidence["verdict"] == "APPROVED"
