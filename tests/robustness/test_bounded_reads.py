"""Every file AutoDev reads is bounded: a FIFO, an endless device or a huge file is one line of error.

A state file (the ledger, ``plan.json``, ``knowledge.json``, ``inline-state.json``, an evidence record),
an inline answer, an agent script, a plan markdown file or the configuration replaced by a FIFO or by a
link to ``/dev/zero`` or ``/dev/urandom`` must not make ``autodev`` wait forever or read without end. Each
case runs the installed executable in a subprocess with a 30 s timeout and a 1 GiB address-space limit, so
a regression fails instead of hanging or eating the machine's memory, and checks that the error is one
line naming the file and that the ledger is byte for byte as it was. The other checks made when a file is
read are here too: a byte-order mark in front of plan markdown, TOML or a script is accepted, a NUL byte or
another control character in a configuration string is not.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cli import WHOLE_REPOSITORY_SCOPE, Run, with_write_scope

from autodev.adapters.inline import InlineAdapter, InvalidResponseError
from autodev.adapters.registry import create_adapter
from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.config import load_config
from autodev.errors import ConfigError, EvidenceError, PlanParseError, StateError
from autodev.state.evidence import read_evidence
from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown, read_plan_markdown
from autodev.state.schemas import ReviewEvidence

AUTODEV = Path(sys.executable).with_name("autodev")
TIMEOUT_S = 30
MEMORY_LIMIT_BYTES = 1024**3
ENDLESS_DEVICES = ["/dev/zero", "/dev/urandom"]
MIB = 1024 * 1024

PLAN = textwrap.dedent(
    """\
    # Plan: Bounded plan

    ## Phase 1: Build
    ### Task 1.1: Write the module
    - Files: src/mod.py

    ### Task 1.2: Test the module
    - Files: tests/test_mod.py
    - Depends: 1.1
    """
)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def autodev(cwd: Path, *args: str) -> Run:
    clean = {key: value for key, value in os.environ.items() if not key.upper().startswith("AUTODEV_")}
    proc = subprocess.run(
        [str(AUTODEV), *with_write_scope(args, WHOLE_REPOSITORY_SCOPE)],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limit_memory,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(result: Run, *fragments: str, code: int = 2) -> None:
    assert "Traceback" not in result.err, result.err
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_plan(repo: Path) -> Path:
    """Save ``PLAN`` with task 1.1 in progress; returns the ledger."""
    with PlanManager(repo) as manager:
        manager.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-setup")
        manager.update_task_status("1.1", "in_progress")
    return repo / ".autodev" / "ledger.jsonl"


def replace_with_fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def replace_with_link(path: Path, target: str) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(target)


def save_script(setup: DemoSetup, directory: Path) -> Path:
    path = directory / "script.json"
    path.write_text(Script.model_dump_json(setup.script, exclude_defaults=True), encoding="utf-8")
    return path


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


# --- state files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("replacement", ["/dev/zero", "/dev/urandom", "fifo"])
def test_status_refuses_a_plan_json_that_is_a_device_or_a_fifo(repo: Path, replacement: str) -> None:
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    snapshot = repo / ".autodev" / "plan.json"
    if replacement == "fifo":
        replace_with_fifo(snapshot)
    else:
        replace_with_link(snapshot, replacement)

    result = autodev(repo, "status")

    kind = "FIFO" if replacement == "fifo" else "symbolic link"
    assert_one_line_error(result, "plan.json", kind, "rebuilds it from the ledger")
    assert sha256_of(ledger) == before


@pytest.mark.parametrize("args", [("status",), ("ledger", "verify"), ("approve",)])
def test_a_ledger_that_is_a_fifo_is_refused_by_every_command(repo: Path, args: tuple[str, ...]) -> None:
    ledger = save_plan(repo)
    replace_with_fifo(ledger)

    result = autodev(repo, *args)

    assert_one_line_error(result, "ledger.jsonl", "FIFO (named pipe), not a regular file")
    assert ledger.is_fifo()


@pytest.mark.parametrize("device", ENDLESS_DEVICES)
def test_a_ledger_linked_to_an_endless_device_is_refused(repo: Path, device: str) -> None:
    ledger = save_plan(repo)
    replace_with_link(ledger, device)

    result = autodev(repo, "status", "--json")

    assert_one_line_error(result, "ledger.jsonl", "symbolic link")
    assert os.readlink(ledger) == device


def test_a_ledger_entry_longer_than_the_line_limit_is_refused_as_corrupt(repo: Path) -> None:
    ledger = save_plan(repo)
    with ledger.open("ab") as handle:
        handle.write(b"x" * (65 * MIB) + b"\n")
    before = sha256_of(ledger)

    result = autodev(repo, "status")

    assert_one_line_error(result, "ledger.jsonl, line 3", "longer than 64 MiB", "the ledger was not modified")
    assert sha256_of(ledger) == before


def test_a_knowledge_store_linked_to_dev_urandom_stops_the_run_before_anything_is_recorded(
    demo: DemoSetup, tmp_path: Path
) -> None:
    repo = demo.repo_root
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    replace_with_link(repo / ".autodev" / "knowledge.json", "/dev/urandom")
    script = save_script(demo, tmp_path)

    result = autodev(repo, "execute", "--platform", "scripted", "--script", str(script))

    assert_one_line_error(result, "knowledge.json", "symbolic link")
    assert sha256_of(ledger) == before


def test_an_inline_state_that_is_a_fifo_is_refused_by_resume(demo: DemoSetup) -> None:
    repo = demo.repo_root
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    replace_with_fifo(repo / ".autodev" / "inline-state.json")

    result = autodev(repo, "resume", "--platform", "inline")

    assert_one_line_error(result, "inline-state.json", "FIFO")
    assert sha256_of(ledger) == before


def test_an_evidence_file_replaced_by_a_fifo_is_a_problem_for_ledger_verify(repo: Path) -> None:
    save_plan(repo)
    with PlanManager(repo) as manager:
        review = manager.record_evidence(ReviewEvidence(task_id="1.1", verdict="APPROVED"))
    replace_with_fifo(review)

    result = autodev(repo, "ledger", "verify")

    assert result.code == 1, result
    problems = [line for line in result.out.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1 and "task 1.1" in problems[0] and "FIFO" in problems[0], result.out


@pytest.mark.parametrize("device", ENDLESS_DEVICES)
def test_an_evidence_record_linked_to_a_device_is_an_evidence_error(repo: Path, device: str) -> None:
    save_plan(repo)
    with PlanManager(repo) as manager:
        review = manager.record_evidence(ReviewEvidence(task_id="1.1", verdict="APPROVED"))
    replace_with_link(review, device)

    with pytest.raises(EvidenceError, match="symbolic link"):
        read_evidence(review)


def test_the_knowledge_store_refuses_a_fifo(repo: Path) -> None:
    paths = AutodevPaths(repo)
    paths.state_dir.mkdir()
    replace_with_fifo(paths.state_dir / "knowledge.json")

    with pytest.raises(StateError, match=r"knowledge\.json: the knowledge store is a FIFO"):
        KnowledgeStore(paths)


# --- inline answers -------------------------------------------------------------------------------------


def _suspend_on_the_explorer(demo: DemoSetup) -> Path:
    """Run the demo on the inline platform until it waits for its first answer; returns the answer's path."""
    suspended = autodev(demo.repo_root, "run", "--platform", "inline", demo.intent)
    assert suspended.code == 3, suspended
    responses = demo.repo_root / ".autodev" / "responses"
    return responses / "plan-explorer.json"


def test_an_inline_answer_over_4_mib_is_refused_and_left_in_place_until_the_limit_is_raised(
    demo: DemoSetup,
) -> None:
    response = _suspend_on_the_explorer(demo)
    ledger = demo.repo_root / ".autodev" / "ledger.jsonl"
    before = sha256_of(ledger)
    response.write_text(json.dumps({"text": "x" * (5 * MIB)}), encoding="utf-8")

    refused = autodev(demo.repo_root, "resume")

    assert_one_line_error(
        refused, str(response), "larger than 4 MiB (limit inline.max_answer_bytes)", "autodev resume"
    )
    assert len(refused.err) < 2000
    assert response.stat().st_size > 5 * MIB
    assert sha256_of(ledger) == before

    (demo.repo_root / ".autodev" / "config.toml").write_text(f"[inline]\nmax_answer_bytes = {8 * MIB}\n")
    accepted = autodev(demo.repo_root, "resume")

    assert accepted.code == 3, accepted  # the answer was taken; the run waits for the next one
    assert not response.exists()


def test_an_inline_answer_written_as_a_link_is_refused(demo: DemoSetup, tmp_path: Path) -> None:
    response = _suspend_on_the_explorer(demo)
    ledger = demo.repo_root / ".autodev" / "ledger.jsonl"
    before = sha256_of(ledger)
    elsewhere = tmp_path / "answer.json"
    elsewhere.write_text(json.dumps({"text": "The findings."}), encoding="utf-8")
    response.symlink_to(elsewhere)

    result = autodev(demo.repo_root, "resume")

    assert_one_line_error(result, str(response), "symbolic link, not a regular file")
    assert response.is_symlink()
    assert sha256_of(ledger) == before


@pytest.mark.parametrize("replacement", ["/dev/zero", "/dev/urandom", "fifo"])
def test_the_inline_adapter_refuses_an_answer_that_is_a_device_or_a_fifo(
    repo: Path, replacement: str
) -> None:
    adapter = InlineAdapter(repo_root=repo)
    response = adapter.paths.response_file("1.1", "developer")
    response.parent.mkdir(parents=True)
    if replacement == "fifo":
        replace_with_fifo(response)
    else:
        replace_with_link(response, replacement)

    with pytest.raises(InvalidResponseError) as raised:
        adapter.check_response("1.1", "developer")

    kind = "a FIFO (named pipe)" if replacement == "fifo" else "a symbolic link"
    assert raised.value.message.startswith(f"{response}: the answer is {kind}, not a regular file")
    assert "\n" not in raised.value.message


def test_the_inline_answer_limit_is_the_configured_one(repo: Path) -> None:
    config = repo / ".autodev" / "config.toml"
    config.parent.mkdir()
    config.write_text("[inline]\nmax_answer_bytes = 100\n", encoding="utf-8")
    adapter = create_adapter("inline", repo_root=repo, config=load_config(repo, env={}))
    assert isinstance(adapter, InlineAdapter)
    response = adapter.paths.response_file("1.1", "developer")
    response.parent.mkdir(parents=True)
    response.write_text(json.dumps({"text": "x" * 100}), encoding="utf-8")

    with pytest.raises(
        InvalidResponseError, match=r"larger than 100 bytes \(limit inline\.max_answer_bytes\)"
    ):
        adapter.check_response("1.1", "developer")


# --- files a user names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("replacement", ["/dev/zero", "/dev/urandom", "fifo"])
def test_plan_from_markdown_refuses_a_fifo_or_a_device(repo: Path, replacement: str) -> None:
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    markdown = repo / "plan.md"
    if replacement == "fifo":
        replace_with_fifo(markdown)
    else:
        replace_with_link(markdown, replacement)

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace")

    kind = "FIFO" if replacement == "fifo" else "character device"
    assert_one_line_error(result, "plan.md", kind)
    assert sha256_of(ledger) == before


def test_plan_from_markdown_refuses_a_file_over_16_mib(repo: Path) -> None:
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    (repo / "huge.md").write_bytes(PLAN.encode() + b"x" * (16 * MIB))

    result = autodev(repo, "plan", "--from-markdown", "huge.md", "--replace")

    assert_one_line_error(result, "huge.md", "larger than 16 MiB")
    assert sha256_of(ledger) == before


@pytest.mark.parametrize("replacement", ["/dev/zero", "/dev/urandom", "fifo"])
def test_read_plan_markdown_refuses_a_fifo_or_a_device(tmp_path: Path, replacement: str) -> None:
    markdown = tmp_path / "plan.md"
    if replacement == "fifo":
        replace_with_fifo(markdown)
    else:
        replace_with_link(markdown, replacement)

    with pytest.raises(PlanParseError) as raised:
        read_plan_markdown(markdown)

    kind = "a FIFO (named pipe)" if replacement == "fifo" else "a character device"
    assert raised.value.message.startswith(f"{markdown}: the plan markdown is {kind}, not a regular file")


def test_read_plan_markdown_refuses_a_file_over_16_mib_and_drops_a_byte_order_mark(tmp_path: Path) -> None:
    huge, bom = tmp_path / "huge.md", tmp_path / "bom.md"
    huge.write_bytes(PLAN.encode() + b"x" * (16 * MIB))
    bom.write_bytes(b"\xef\xbb\xbf" + PLAN.encode())

    with pytest.raises(PlanParseError, match="the plan markdown is larger than 16 MiB"):
        read_plan_markdown(huge)
    assert read_plan_markdown(bom) == PLAN


def test_plan_markdown_starting_with_a_byte_order_mark_is_saved(repo: Path) -> None:
    (repo / "bom.md").write_bytes(b"\xef\xbb\xbf" + PLAN.encode())

    result = autodev(repo, "plan", "--from-markdown", "bom.md")

    assert result.code == 0, result
    status = json.loads(autodev(repo, "status", "--json").out)
    assert status["plan"]["title"] == "Bounded plan"


@pytest.mark.parametrize("replacement", ["/dev/zero", "/dev/urandom", "fifo"])
def test_a_script_that_is_a_fifo_or_a_device_is_refused_before_anything_runs(
    demo: DemoSetup, tmp_path: Path, replacement: str
) -> None:
    script = tmp_path / "script.json"
    if replacement == "fifo":
        replace_with_fifo(script)
    else:
        replace_with_link(script, replacement)

    result = autodev(demo.repo_root, "run", "--platform", "scripted", "--script", str(script), demo.intent)

    kind = "FIFO" if replacement == "fifo" else "character device"
    assert_one_line_error(result, "script.json", kind)
    assert not (demo.repo_root / ".autodev" / "ledger.jsonl").exists()


def test_a_script_with_a_byte_order_mark_loads(demo: DemoSetup, tmp_path: Path) -> None:
    script = save_script(demo, tmp_path)
    script.write_bytes(b"\xef\xbb\xbf" + script.read_bytes())

    assert ScriptedAdapter.from_file(script).script == demo.script


@pytest.mark.parametrize("replacement", ["/dev/zero", "fifo"])
def test_a_config_file_that_is_a_fifo_or_a_device_is_refused(repo: Path, replacement: str) -> None:
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    config = repo / ".autodev" / "config.toml"
    if replacement == "fifo":
        replace_with_fifo(config)
    else:
        replace_with_link(config, replacement)
    (repo / "plan.md").write_text(PLAN, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace")

    kind = "FIFO" if replacement == "fifo" else "character device"
    assert_one_line_error(result, "config.toml", kind)
    assert sha256_of(ledger) == before


def test_a_config_file_with_a_byte_order_mark_loads(repo: Path) -> None:
    config = repo / ".autodev" / "config.toml"
    config.parent.mkdir()
    config.write_bytes(b"\xef\xbb\xbfqa_retry_limit = 7\n")

    assert load_config(repo, env={}).qa_retry_limit == 7


# --- configuration strings -------------------------------------------------------------------------------


def test_a_nul_byte_in_a_gate_command_is_a_config_error_at_load(repo: Path) -> None:
    config = repo / ".autodev" / "config.toml"
    config.parent.mkdir()
    config.write_text('[qa_gates.test]\ncommand = ["pytest", "-q\\u0000"]\n', encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        load_config(repo, env={})

    assert raised.value.source == str(config)
    assert raised.value.key == "qa_gates.test.command"
    assert "item 2 contains a NUL byte (\\x00); remove it" in raised.value.message


def test_a_nul_byte_in_a_gate_command_stops_the_cli_before_the_plan_is_touched(repo: Path) -> None:
    ledger = save_plan(repo)
    before = sha256_of(ledger)
    (repo / ".autodev" / "config.toml").write_text(
        '[qa_gates.lint]\ncommand = ["ruff\\u0000", "check"]\n', encoding="utf-8"
    )
    (repo / "plan.md").write_text(PLAN, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace")

    assert_one_line_error(result, "config.toml", "qa_gates.lint.command", "NUL byte")
    assert sha256_of(ledger) == before


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[roles.developer]\nmodel = "strong\\u001b[31m"\n', "roles.developer.model"),
        ('[environment]\npython = "python\\n3"\n', "environment.python"),
        ('[tournaments]\nauto_disable_for_models = ["op\\u0085us"]\n', "tournaments.auto_disable_for_models"),
    ],
    ids=["escape", "newline", "c1-control"],
)
def test_a_control_character_in_a_config_string_is_a_config_error(repo: Path, toml: str, key: str) -> None:
    config = repo / ".autodev" / "config.toml"
    config.parent.mkdir()
    config.write_text(toml, encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        load_config(repo, env={})

    assert raised.value.key == key
    assert "contains the control character" in raised.value.message
