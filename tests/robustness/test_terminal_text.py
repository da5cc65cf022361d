"""What reaches a terminal is text: hostile titles and names through the installed ``autodev`` executable.

A plan an agent wrote, its agents' output and the file names they chose end up on the user's screen. Each test
feeds escape sequences (window title, clear screen, 8-bit CSI), control characters and rich markup to a real
``autodev`` subprocess and checks that they reach stdout and stderr as visible text or not at all, that markup
stays literal and breaks nothing, and that a reader leaving early (``| head -1``) is no failure.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from support.cli import AUTODEV, Run, autodev, clean_env

from autodev.adapters.scripted import Script
from autodev.cli.demo import prepare_demo
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown
from autodev.tournament import TournamentArtifacts

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x1b[5m\x08\x7f"
MARKUP = "[/bold] [link=file:///etc/passwd]x[/link] [bold]"
# Every gate off: a run here is about what it prints, and takes a second this way.
NO_GATES = "".join(
    f"[qa_gates.{gate}]\nenabled = false\n" for gate in ("syntax", "lint", "build", "test", "secretscan")
)


def assert_text_only(output: str) -> None:
    """No escape sequence or control character in ``output``, which went to a pipe (so rich adds none)."""
    bad = [char for char in output if (ord(char) < 32 and char not in "\n") or 0x7F <= ord(char) <= 0x9F]
    assert not bad, repr(output)
    assert "pwned" not in output


def plan_markdown(title: str, task_title: str, tasks: int = 1) -> str:
    body = "".join(
        f"### Task 1.{n}: {task_title}\n- Description: Parse it.\n- Files: src/mod{n}.py\n- Acceptance:\n"
        "  - [ ] it parses\n\n"
        for n in range(1, tasks + 1)
    )
    return f"# Plan: {title}\n\n## Phase 1: Build\n\n{body}"


def save_plan(repo: Path, markdown: str) -> None:
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    with PlanManager(repo) as manager:
        manager.init_plan(parse_plan_markdown(markdown, "0" * 16), session_id="sess-setup")


def run_with_reader_gone(cwd: Path, *args: str, unbuffered: bool) -> Run:
    """Run with stdout a pipe whose reader has already left, as ``| head -1`` leaves it after one line."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {key: value for key, value in clean_env().items() if key != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        proc = subprocess.run(
            [str(AUTODEV), *args],
            cwd=cwd,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(write_end)
    return Run(proc.returncode, "", proc.stderr)


def write_tournament(repo: Path) -> None:
    names = {"A": 3, f"B{ESCAPES}": 5, MARKUP: 1}
    history = {
        "tournament_id": "impl-1.1-abc",
        "kind": "impl",
        "seed": 1,
        "winner": f"B{ESCAPES}",
        "converged": True,
        "stop_reason": f"converged\n{ESCAPES}winner: forged",
        "passes": [
            {
                "pass_no": 1,
                "status": "decided",
                "scores": names,
                "winner": f"B{ESCAPES}",
                "margin": 2,
                "quorum": 1,
                "reason": f"B leads {MARKUP}",
                "disqualified": {MARKUP: f"no change {ESCAPES}"},
                "judges": [
                    {"judge_no": 1, "valid": True, "ranking_candidates": [f"B{ESCAPES}", "A"]},
                    {"judge_no": 2, "valid": False, "reason": f"said {ESCAPES}{MARKUP}"},
                ],
            }
        ],
    }
    TournamentArtifacts(repo / ".autodev" / "tournaments", "impl-1.1-abc").write_history(history)


# --- autodev status -----------------------------------------------------------------------------------------


def test_status_prints_escape_sequences_in_titles_as_nothing(repo: Path) -> None:
    save_plan(repo, plan_markdown(f"Release{ESCAPES} one", f"Parse{ESCAPES} the input"))

    result = autodev(repo, "status")

    assert result.code == 0, result
    assert result.err == ""
    assert_text_only(result.out)
    assert "Release one" in result.out and "Parse the input" in result.out


def test_status_shows_markup_in_titles_as_written(repo: Path) -> None:
    save_plan(repo, plan_markdown(f"Release {MARKUP}", f"Parse {MARKUP}"))

    result = autodev(repo, "status")

    assert result.code == 0, result
    assert result.err == "", result.err  # no "internal error (MarkupError ...)"
    assert f"Release {MARKUP}  (plan-" in result.out
    assert f"Parse {MARKUP}" in result.out


# Buffered, the broken pipe shows when the output is flushed; unbuffered, at the first write.
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "args",
    [("status",), ("status", "--json"), ("tournament", "show", "impl")],
    ids=["text", "json", "tournament"],
)
def test_a_reader_that_left_is_no_failure(repo: Path, args: tuple[str, ...], unbuffered: bool) -> None:
    save_plan(repo, plan_markdown("Release", "Parse the input", tasks=3))
    write_tournament(repo)

    result = run_with_reader_gone(repo, *args, unbuffered=unbuffered)

    assert (result.code, result.err) == (0, "")


def test_status_piped_into_head_exits_0(repo: Path) -> None:
    # More than a pipe holds, so autodev is still writing when head has its line and leaves. (The JSON is a
    # single line: head reads all of it; a closed pipe tests that case above.)
    save_plan(repo, plan_markdown("Release", "Parse the input " * 4, tasks=600))
    command = f"set -o pipefail; {shlex.quote(str(AUTODEV))} status | head -1"

    proc = subprocess.run(
        ["bash", "-c", command], cwd=repo, env=clean_env(), capture_output=True, text=True, timeout=120
    )

    assert (proc.returncode, proc.stderr) == (0, "")
    assert len(proc.stdout.splitlines()) == 1


# --- tournament show, errors, a whole run -------------------------------------------------------------------


def test_tournament_show_prints_candidate_names_and_reasons_as_text(repo: Path) -> None:
    save_plan(repo, plan_markdown("Release", "Parse the input"))
    write_tournament(repo)

    result = autodev(repo, "tournament", "show", "impl-1.1")

    assert result.code == 0, result
    assert_text_only(result.out)
    # A newline in a reason does not make a line of its own.
    assert "stopped: converged winner: forged" in result.out
    assert "winner: B   converged: yes" in result.out
    assert f"{MARKUP} disqualified: no change" in result.out


def test_an_error_quoting_a_hostile_file_name_prints_it_as_text(repo: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)

    result = autodev(repo, "plan", "--from-markdown", f"plan{ESCAPES}.md")

    assert result.code == 2, result
    assert result.err == "error: plan.md: file not found\n"


def test_a_run_of_a_plan_with_hostile_titles_and_agent_output_succeeds_and_prints_text(
    tmp_path: Path,
) -> None:
    setup = prepare_demo(tmp_path / "project")
    entries = []
    for entry in setup.script.entries:
        data = entry.model_dump(exclude_defaults=True)
        if entry.role == "architect":
            data["text"] = data["text"].replace(
                "### Task 1.1: Implement slugify", f"### Task 1.1: Implement slugify{ESCAPES} {MARKUP}"
            )
        elif entry.role == "reviewer" and entry.task_id == "1.1":
            first = data["responses"][0]
            first["text"] = first["text"].replace(
                "has no module docstring", f"has no{ESCAPES} {MARKUP} docstring"
            )
        entries.append(data)
    script = tmp_path / "script.json"
    script.write_text(Script.model_validate({"entries": entries}).model_dump_json(exclude_defaults=True))
    (setup.repo_root / ".autodev").mkdir()
    (setup.repo_root / ".autodev" / "config.toml").write_text(NO_GATES)

    result = autodev(setup.repo_root, "run", "--platform", "scripted", "--script", str(script), setup.intent)

    assert result.code == 0, result
    assert "internal error" not in result.err
    assert_text_only(result.out)
    assert f"started Implement slugify {MARKUP}" in result.out
    assert f"has no {MARKUP} docstring" in result.out
    assert "2 complete, 0 blocked" in result.out
