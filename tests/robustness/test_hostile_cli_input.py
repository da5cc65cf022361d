"""Hostile input through the installed ``autodev`` executable: a clean one-line error, exit 2, nothing lost.

Every input a user (or whoever edits the repository) controls is fed to a real ``autodev`` subprocess: plan
markdown (also randomly mutated by Hypothesis), ``.autodev/config.toml``, ``[tool.autodev]``, ``AUTODEV_*``
variables, the ledger and ``plan.json``, evidence files, intents and task ``files`` lists. A rejected input
must give exit code 2, one stderr line starting with ``error: `` that names the file, field or line, no
traceback, and the ledger byte for byte as it was. Set-up that is not under test (saving a first plan,
moving a task along) goes through the library, which is quicker than another process.

Two cheap in-process property tests complement the subprocess ones: ``load_config`` on random config files
and random ``AUTODEV_*`` variables only ever raises ``ConfigError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import Run, assert_clean_error, autodev

from autodev.adapters.scripted import Script
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.config import AutodevConfig, load_config
from autodev.errors import ConfigError
from autodev.state.ledger import Ledger
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown
from autodev.state.schemas import ReviewEvidence
from autodev.state.snapshot import decode_snapshot, encode_snapshot

GOOD_PLAN = textwrap.dedent(
    """\
    # Plan: Demo plan

    ## Phase 1: Build
    ### Task 1.1: Write the module
    - Description: Create the module.
    - Files: src/mod.py
    - Acceptance:
      - [ ] it imports

    ### Task 1.2: Test the module
    - Files: tests/test_mod.py
    - Depends: 1.1
    """
)
# A message is one line for a person to read: a 1 MB input echoed back is not a message any more.
MAX_MESSAGE_CHARS = 2000
# Every gate off: these tests are about input and state, and a plan phase plus two tasks then take seconds.
NO_GATES = "".join(
    f"[qa_gates.{gate}]\nenabled = false\n" for gate in ("syntax", "lint", "build", "test", "secretscan")
)


# --- helpers ------------------------------------------------------------------------------------------------


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def save_plan(repo: Path, markdown: str = GOOD_PLAN, *, started: bool = False) -> None:
    """Save ``markdown`` as the current plan (with task 1.1 in progress when ``started``)."""
    with PlanManager(repo) as manager:
        manager.init_plan(parse_plan_markdown(markdown, "0" * 16), session_id="sess-setup")
        if started:
            manager.update_task_status("1.1", "in_progress")


def ledger_of(repo: Path) -> Path:
    return repo / ".autodev" / "ledger.jsonl"


def snapshot_of(repo: Path) -> Path:
    return repo / ".autodev" / "plan.json"


def ledger_entries(repo: Path) -> int:
    """The verified entries of the ledger, read as a bystander (read-only, nothing truncated)."""
    return Ledger(ledger_of(repo), readonly=True).open().seq


def status_json(repo: Path) -> dict[str, Any]:
    result = autodev(repo, "status", "--json")
    assert result.code == 0, result
    data: dict[str, Any] = json.loads(result.out)
    return data


def task_statuses(repo: Path) -> dict[str, str]:
    return {task["id"]: task["status"] for task in status_json(repo)["tasks"]}


# --- plan markdown ------------------------------------------------------------------------------------------

_GARBAGE_LINES = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=40).map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"\xff\xfe\xfd",  # never valid UTF-8
            b"\xc3\x28",  # a broken two-byte sequence
            b"\xed\xa0\x80",  # an encoded surrogate
            b"\x00" * 16,
            b"\x1b[31mred\x1b[0m\x07",
            "### Task 1.1: again".encode("utf-16"),
            b"## Phase 1: twice",
            b"### Task 9.9: ",
            b"- Depends: 1.2",
            b"- Depends: 9.9",
            b"- Files: ../escape.py",
            b"- Files: /etc/passwd",
            b"# Plan: second",
        ]
    ),
    st.just(b"x" * 1_000_000),
    st.just(b"### Task 9.9: " + b"y" * 1_000_000),
    st.just(b"- Description: " + "é".encode() * 500_000),
)
_MUTATION_KINDS = ("delete", "duplicate", "swap", "replace", "insert", "deeper", "shallower")
# (kind, line index, other line index, new bytes); an index is taken modulo the current number of lines.
Mutation = tuple[str, int, int, bytes]
_MUTATIONS = st.tuples(
    st.sampled_from(_MUTATION_KINDS), st.integers(0, 99), st.integers(0, 99), _GARBAGE_LINES
)


def _mutate(lines: list[bytes], mutation: Mutation) -> None:
    kind, index, other, payload = mutation
    if not lines:
        lines.append(b"")
    at, second = index % len(lines), other % len(lines)
    if kind == "delete":
        del lines[at]
    elif kind == "duplicate":
        lines.insert(at, lines[at])
    elif kind == "swap":
        lines[at], lines[second] = lines[second], lines[at]
    elif kind == "replace":
        lines[at] = payload
    elif kind == "insert":
        lines.insert(at, payload)
    elif kind == "deeper":
        lines[at] = b"#" + lines[at]
    else:
        lines[at] = lines[at][1:]


@st.composite
def _mutated_plans(draw: st.DrawFn) -> bytes:
    lines = GOOD_PLAN.encode().split(b"\n")
    for mutation in draw(st.lists(_MUTATIONS, min_size=1, max_size=4)):
        _mutate(lines, mutation)
    return b"\n".join(lines)


def test_a_randomly_mutated_plan_is_saved_whole_or_refused_cleanly(repo: Path) -> None:
    save_plan(repo)
    ledger, snapshot = ledger_of(repo), snapshot_of(repo)
    base_ledger, base_snapshot = ledger.read_bytes(), snapshot.read_bytes()
    target = repo / "mutated.md"

    # Each example starts from the same saved plan; the state is restored by hand, not by a fixture.
    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(_mutated_plans())
    def check(markdown: bytes) -> None:
        ledger.write_bytes(base_ledger)
        snapshot.write_bytes(base_snapshot)
        target.write_bytes(markdown)

        result = autodev(repo, "plan", "--from-markdown", target.name)

        assert "Traceback" not in result.err, result.err
        if result.code == 0:
            added = ledger.read_bytes().removeprefix(base_ledger)
            assert ledger.read_bytes().startswith(base_ledger)
            assert added.count(b"\n") == 1 and b'"op":"plan_init"' in added
            assert ledger_entries(repo) == 2
        else:
            assert_clean_error(result)
            assert target.name in result.err
            assert ledger.read_bytes() == base_ledger

    check()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (GOOD_PLAN.encode().replace(b"Build", b"Bu\xffild"), "UTF-8"),
        (GOOD_PLAN.encode("utf-16"), "UTF-8"),
        (b"", "empty plan markdown"),
        (b"\x00" * 4096, "Plan: <title>"),
        (GOOD_PLAN.encode().replace(b"# Plan: Demo plan", b"Demo plan"), "# Plan"),
        (GOOD_PLAN.replace("- Files: src/mod.py", "- Depends: 1.2").encode(), "1.1"),
    ],
    ids=["invalid-utf8", "utf16", "empty", "only-nul-bytes", "no-plan-heading", "dependency-cycle"],
)
def test_unreadable_or_malformed_plan_markdown_is_refused_and_the_plan_kept(
    repo: Path, data: bytes, expected: str
) -> None:
    save_plan(repo, started=True)
    before = ledger_of(repo).read_bytes()
    (repo / "bad.md").write_bytes(data)

    result = autodev(repo, "plan", "--from-markdown", "bad.md", "--replace")

    assert_clean_error(result)
    assert "bad.md" in result.err and expected in result.err, result.err
    assert ledger_of(repo).read_bytes() == before
    assert task_statuses(repo) == {"1.1": "in_progress", "1.2": "pending"}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("plan", "--from-markdown", "a-directory.md"), "a-directory.md"),
        (("plan", "--platform", "scripted", "--script", "missing.json", "Add a module"), "missing.json"),
        (("run", "--platform", "scripted", "--script", "a-directory.md", "Add a module"), "a-directory.md"),
    ],
    ids=["plan-file-is-a-directory", "script-missing", "script-is-a-directory"],
)
def test_a_file_option_naming_a_directory_or_nothing_is_a_one_line_error(
    repo: Path, args: tuple[str, ...], named: str
) -> None:
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    (repo / "a-directory.md").mkdir()

    result = autodev(repo, *args)

    assert_clean_error(result)
    assert named in result.err, result.err
    assert ledger_of(repo).read_bytes() == before


@pytest.mark.parametrize(
    "line",
    [
        "### Task " + "x" * 1_000_000,
        "### Task 1.3: " + "t" * 10 + "\n- Depends: " + "y" * 1_000_000,
        "### Task 1.3: t\n- Files: " + "../" * 300_000 + "escape.py",
    ],
    ids=["task-heading", "depends", "files"],
)
def test_an_error_about_a_1_mb_line_is_still_a_short_message(repo: Path, line: str) -> None:
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    (repo / "huge.md").write_text(GOOD_PLAN + "\n" + line + "\n", encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "huge.md")

    assert_clean_error(result)
    assert "huge.md" in result.err
    assert len(result.err) < MAX_MESSAGE_CHARS, f"a {len(result.err)}-character error message"
    assert ledger_of(repo).read_bytes() == before


# --- task files lists ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files_line", "bad_path"),
    [
        ("- Files: /etc/passwd", "/etc/passwd"),
        ("- Files: tests/test_mod.py, ../outside.py", "../outside.py"),
        ("- Files: tests/../../outside.py", "tests/../../outside.py"),
        ("- Files: C:/Windows/system.ini", "C:/Windows/system.ini"),
        ("- Files: ..\\..\\outside.py", "..\\..\\outside.py"),
        ("- Files: `../outside.py`", "../outside.py"),
        ("- Files:\n  - tests/test_mod.py\n  - ../outside.py", "../outside.py"),
        ("- Files: escape/secret.py", "escape/secret.py"),
        ("- Files: escape-file.py", "escape-file.py"),
    ],
    ids=[
        "absolute",
        "dotdot",
        "dotdot-inside",
        "drive-letter",
        "backslashes",
        "backticks",
        "bullet-list",
        "symlinked-dir",
        "symlinked-file",
    ],
)
def test_a_task_file_outside_the_repository_is_refused_naming_the_task_and_path(
    repo: Path, tmp_path: Path, files_line: str, bad_path: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n")
    (repo / "escape").symlink_to(outside)
    (repo / "escape-file.py").symlink_to(outside / "secret.py")
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    # The bad path sits on the second task, so naming "the task" cannot be a lucky guess.
    plan = GOOD_PLAN.replace("- Files: tests/test_mod.py", files_line)
    (repo / "escaping.md").write_text(plan, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "escaping.md")

    assert_clean_error(result)
    assert "escaping.md" in result.err and "task 1.2" in result.err, result.err
    assert repr(bad_path) in result.err or bad_path in result.err, result.err
    assert ledger_of(repo).read_bytes() == before


def test_a_symlink_that_stays_inside_the_repository_is_accepted(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "alias").symlink_to(repo / "src")
    plan = GOOD_PLAN.replace("- Files: tests/test_mod.py", "- Files: alias/mod_test.py")
    (repo / "inside.md").write_text(plan, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "inside.md")

    assert result.code == 0, result
    assert status_json(repo)["tasks"][1]["files"] == ["alias/mod_test.py"]


# --- configuration: .autodev/config.toml, [tool.autodev], AUTODEV_* -----------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"platform = \n", "line 1"),
        (b'qa_retry_limit = 3\nplatfrom = "inline"\n', "platfrom"),
        (b'qa_retry_limit = "three"\n', "qa_retry_limit"),
        (b"[guardrails]\nmax_tool_calls_per_task = -1\n", "guardrails.max_tool_calls_per_task"),
        (b"[guardrails]\nmax_tool_calls = 5\n", "max_tool_calls"),
        (b'platform = "inl\xffine"\n', "UTF-8"),
        (b'platform = "inline"\x00\n', "line 1"),
    ],
    ids=[
        "syntax",
        "unknown-key",
        "wrong-type",
        "out-of-range",
        "nested-unknown",
        "invalid-utf8",
        "nul-byte",
    ],
)
def test_a_bad_config_toml_is_refused_naming_file_and_key_before_anything_is_written(
    repo: Path, content: bytes, expected: str
) -> None:
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    (repo / ".autodev" / "config.toml").write_bytes(content)
    (repo / "plan.md").write_text(GOOD_PLAN.replace("Demo plan", "Other plan"), encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace")

    assert_clean_error(result)
    assert "config.toml" in result.err and expected in result.err, result.err
    assert ledger_of(repo).read_bytes() == before


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'[project\nname = "x"\n', "line 1"),
        (b'[tool.autodev]\nplatfrom = "inline"\n', "platfrom"),
        (b"[tool.autodev]\nlock_timeout_s = 0\n", "lock_timeout_s"),
        (b"[tool]\nautodev = 5\n", "tool.autodev"),
        (b'[project]\nname = "\xff"\n[tool.autodev]\n', "UTF-8"),
        (b"[tool.autodev.tournaments.plan]\nenabled = 'maybe'\n", "tournaments.plan.enabled"),
    ],
    ids=["syntax", "unknown-key", "out-of-range", "not-a-table", "invalid-utf8", "wrong-type"],
)
def test_a_bad_tool_autodev_section_is_refused_naming_pyproject_and_key(
    repo: Path, content: bytes, expected: str
) -> None:
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    (repo / "pyproject.toml").write_bytes(content)
    (repo / "plan.md").write_text(GOOD_PLAN, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace")

    assert_clean_error(result)
    assert "pyproject.toml" in result.err and expected in result.err, result.err
    assert ledger_of(repo).read_bytes() == before


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AUTODEV_BOGUS": "1"}, "AUTODEV_BOGUS"),
        ({"AUTODEV_QA_RETRY_LIMIT": "many"}, "AUTODEV_QA_RETRY_LIMIT"),
        ({"AUTODEV_GUARDRAILS": "5"}, "AUTODEV_GUARDRAILS"),
        ({"AUTODEV_GUARDRAILS__NOPE": "1"}, "AUTODEV_GUARDRAILS__NOPE"),
        ({"AUTODEV_": "1"}, "AUTODEV_"),
        ({"AUTODEV_QA_RETRY_LIMIT": "2", "autodev_qa_retry_limit": "3"}, "qa_retry_limit"),
    ],
    ids=[
        "unknown",
        "not-a-number",
        "scalar-for-table",
        "nested-unknown",
        "no-key",
        "set-twice",
    ],
)
def test_a_bad_autodev_environment_variable_is_refused_naming_it(
    repo: Path, env: dict[str, str], expected: str
) -> None:
    save_plan(repo)
    before = ledger_of(repo).read_bytes()
    (repo / "plan.md").write_text(GOOD_PLAN, encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace", env=env)

    assert_clean_error(result)
    assert expected in result.err, result.err
    assert ledger_of(repo).read_bytes() == before


def test_a_bad_config_stops_run_before_the_session_is_recorded(tmp_path: Path) -> None:
    setup = prepare_demo(tmp_path / "project")
    script = _save_script(setup, tmp_path)
    save_plan(setup.repo_root)
    before = ledger_of(setup.repo_root).read_bytes()
    (setup.repo_root / ".autodev" / "config.toml").write_text("qa_retry_limit = -3\n")

    result = autodev(setup.repo_root, "run", "--platform", "scripted", "--script", str(script), setup.intent)

    assert_clean_error(result)
    assert "config.toml" in result.err and "qa_retry_limit" in result.err
    assert ledger_of(setup.repo_root).read_bytes() == before


_CONFIG_KEYS = st.sampled_from(
    [
        "platform",
        "qa_retry_limit",
        "lock_timeout_s",
        "auto_commit",
        "require_plan_approval",
        "guardrails.max_tool_calls_per_task",
        "guardrails.nope",
        "qa_gates.test.command",
        "qa_gates.on_missing_tool",
        "tournaments.plan.enabled",
        "roles.developer.model",
        "roles.nobody.model",
        'price_table."gpt-x".input_per_mtok',
        "model_tiers",
        "nope",
        '"quoted key"',
    ]
)
_TOML_VALUES = st.one_of(
    st.sampled_from(["1", "-1", "0", "1.5", "nan", "inf", "true", "false", "[]", "{}", "1979-05-27"]),
    st.sampled_from(["''", "'x'", '"inline"', '"strong"', '["pytest"]', "{a = 1}", "[1, 'a']", '"""x"""']),
    st.just("9" * 40),
    st.text(max_size=12).map(json.dumps),
)
_CONFIG_LINES = st.one_of(
    st.builds("{} = {}".format, _CONFIG_KEYS, _TOML_VALUES),
    st.sampled_from(["[guardrails]", "[qa_gates.lint]", "[roles.reviewer]", "[[qa_gates]]", "[", "= 1"]),
    st.text(max_size=30),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_CONFIG_LINES, max_size=8), garbage=st.binary(max_size=8))
def test_any_config_file_gives_a_config_or_a_config_error_naming_it(
    repo: Path, lines: list[str], garbage: bytes
) -> None:
    config = repo / ".autodev" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + garbage)
    try:
        loaded = load_config(repo, env={})
    except ConfigError as exc:
        assert "config.toml" in exc.message and "\n" not in exc.message
    else:
        assert isinstance(loaded, AutodevConfig)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(
        st.builds("AUTODEV_{}".format, st.from_regex(r"[A-Za-z_]{0,30}", fullmatch=True)),
        st.one_of(_TOML_VALUES, st.text(max_size=20).filter(lambda text: "\x00" not in text)),
        max_size=4,
    )
)
def test_any_autodev_environment_gives_a_config_or_a_config_error_naming_a_variable(
    repo: Path, env: dict[str, str]
) -> None:
    try:
        loaded = load_config(repo, env=env)
    except ConfigError as exc:
        assert "environment variable AUTODEV_" in exc.message and "\n" not in exc.message
    else:
        assert isinstance(loaded, AutodevConfig)


# --- the ledger and plan.json -------------------------------------------------------------------------------


@pytest.fixture
def worked_repo(repo: Path) -> Path:
    """A git repository whose plan has 1.1 in progress; ledger: plan_init, task_status."""
    git_init(repo)
    save_plan(repo, started=True)
    (repo / "plan.md").write_text(GOOD_PLAN.replace("Demo plan", "Replacement"), encoding="utf-8")
    return repo


def _next_entry_bytes(repo: Path) -> bytes:
    """The line the next change would append, taken from a copy of the state (nothing here changes)."""
    ledger, snapshot = ledger_of(repo), snapshot_of(repo)
    saved_ledger, saved_snapshot = ledger.read_bytes(), snapshot.read_bytes()
    with PlanManager(repo) as manager:
        manager.update_task_status("1.1", "coded")
    line = ledger.read_bytes().removeprefix(saved_ledger)
    ledger.write_bytes(saved_ledger)
    snapshot.write_bytes(saved_snapshot)
    return line


@pytest.mark.parametrize("torn", ["half-an-entry", "zero-filled"])
def test_a_torn_final_line_is_read_past_by_status_and_cut_by_the_next_write(
    worked_repo: Path, torn: str
) -> None:
    repo = worked_repo
    good = ledger_of(repo).read_bytes()
    line = _next_entry_bytes(repo)
    # A crash mid-append leaves part of the line; a crash on some file systems leaves zeros instead.
    tail = line[: len(line) // 2] if torn == "half-an-entry" else b"\x00" * len(line)
    ledger_of(repo).write_bytes(good + tail)

    assert task_statuses(repo) == {"1.1": "in_progress", "1.2": "pending"}
    verify = autodev(repo, "ledger", "verify")
    assert verify.code == 0, verify
    assert "2 entries" in verify.out and "unfinished final entry" in verify.out
    assert ledger_of(repo).read_bytes() == good + tail  # reading never truncates

    approved = autodev(repo, "approve")

    assert approved.code == 0, approved
    after = ledger_of(repo).read_bytes()
    assert after.startswith(good) and b"\x00" not in after
    assert after.removeprefix(good).count(b"\n") == 1 and b'"op":"plan_approved"' in after
    assert autodev(repo, "ledger", "verify").code == 0


def _tamper_edit(lines: list[bytes]) -> None:
    lines[1] = lines[1].replace(b'"to":"in_progress"', b'"to":"complete"')


def _tamper_rehash(lines: list[bytes]) -> None:
    # The edited entry carries a correct hash of its own; only the chain to the next entry shows it.
    import hashlib

    body = lines[1].replace(b'"to":"in_progress"', b'"to":"complete"').rsplit(b',"hash":"', 1)[0] + b"}"
    lines[1] = body[:-1] + b',"hash":"' + hashlib.sha256(body).hexdigest().encode() + b'"}\n'


def _tamper_delete(lines: list[bytes]) -> None:
    del lines[1]


def _tamper_duplicate(lines: list[bytes]) -> None:
    lines.insert(1, lines[1])


@pytest.mark.parametrize(
    ("tamper", "line"),
    [(_tamper_edit, 2), (_tamper_rehash, 3), (_tamper_delete, 2), (_tamper_duplicate, 3)],
    ids=["edited", "rehashed", "deleted", "duplicated"],
)
def test_a_tampered_middle_entry_is_refused_naming_its_line(
    worked_repo: Path, tamper: Callable[[list[bytes]], None], line: int
) -> None:
    repo = worked_repo
    with PlanManager(repo) as manager:
        manager.update_task_status("1.1", "coded")
        manager.update_task_status("1.1", "auto_gated")
    lines = ledger_of(repo).read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    tamper(lines)
    ledger_of(repo).write_bytes(b"".join(lines))
    before = ledger_of(repo).read_bytes()

    for args in (("status", "--json"), ("ledger", "verify")):
        result = autodev(repo, *args)
        assert_clean_error(result)
        assert f"ledger.jsonl, line {line}:" in result.err, (args, result.err)
    assert ledger_of(repo).read_bytes() == before


def test_every_command_refuses_a_tampered_ledger_and_leaves_it_alone(worked_repo: Path) -> None:
    repo = worked_repo
    with PlanManager(repo) as manager:
        manager.update_task_status("1.1", "coded")
    lines = ledger_of(repo).read_bytes().splitlines(keepends=True)
    _tamper_edit(lines)
    ledger_of(repo).write_bytes(b"".join(lines))
    before = ledger_of(repo).read_bytes()
    agents = ("--platform", "inline")

    for args in (
        ("status",),
        ("plan", "--from-markdown", "plan.md", "--replace"),
        ("execute", *agents),
        ("resume", *agents),
        ("run", *agents, "Add a module"),
    ):
        result = autodev(repo, *args)
        assert_clean_error(result)
        assert "ledger.jsonl, line 2: hash mismatch" in result.err, (args, result.err)
    assert ledger_of(repo).read_bytes() == before


def test_a_ledger_cut_inside_an_entry_that_plan_json_recorded_is_refused_by_every_command(
    worked_repo: Path,
) -> None:
    # Not a crash (plan.json is written after the entry it reflects): the file lost a recorded entry.
    repo = worked_repo
    full = ledger_of(repo).read_bytes()
    cut = full[: len(full) - 40]
    ledger_of(repo).write_bytes(cut)

    for args in (("status", "--json"), ("ledger", "verify"), ("approve",)):
        result = autodev(repo, *args)
        assert_clean_error(result)
        assert "ledger.jsonl" in result.err and "entries were lost" in result.err, (args, result.err)
        # The message says "the ledger was not modified": the cut entry's bytes must still be there.
        assert ledger_of(repo).read_bytes() == cut, f"`autodev {' '.join(args)}` changed the ledger"


def test_an_empty_ledger_file_is_an_empty_history(repo: Path) -> None:
    (repo / ".autodev").mkdir()
    ledger_of(repo).write_bytes(b"")
    (repo / "plan.md").write_text(GOOD_PLAN, encoding="utf-8")

    assert status_json(repo)["plan"] is None
    assert autodev(repo, "plan", "--from-markdown", "plan.md").code == 0
    assert task_statuses(repo) == {"1.1": "pending", "1.2": "pending"}
    assert ledger_entries(repo) == 1


def test_a_ledger_emptied_under_plan_json_is_reported_by_status_too(worked_repo: Path) -> None:
    repo = worked_repo
    ledger_of(repo).write_bytes(b"")

    for args in (("ledger", "verify"), ("approve",), ("status", "--json")):
        result = autodev(repo, *args)
        assert_clean_error(result)
        assert "ledger.jsonl" in result.err and "entries were lost" in result.err, (args, result.err)
    assert ledger_of(repo).read_bytes() == b""


@pytest.mark.parametrize("newline", [False, True], ids=["no-newline", "newline"])
def test_a_ledger_of_nul_bytes(repo: Path, newline: bool) -> None:
    (repo / ".autodev").mkdir()
    nuls = b"\x00" * 4096 + (b"\n" if newline else b"")
    ledger_of(repo).write_bytes(nuls)
    (repo / "plan.md").write_text(GOOD_PLAN, encoding="utf-8")

    if not newline:
        # Zeros where a first append never finished: nothing was recorded, so there is nothing to lose.
        assert status_json(repo)["plan"] is None
        assert autodev(repo, "plan", "--from-markdown", "plan.md").code == 0
        assert ledger_entries(repo) == 1 and b"\x00" not in ledger_of(repo).read_bytes()
        return
    for args in (("status",), ("ledger", "verify"), ("plan", "--from-markdown", "plan.md")):
        result = autodev(repo, *args)
        assert_clean_error(result)
        assert "ledger.jsonl, line 1: not a ledger entry" in result.err, (args, result.err)
    assert ledger_of(repo).read_bytes() == nuls


GARBLED_SNAPSHOTS: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "nul-bytes": lambda data: b"\x00" * len(data),
    "garbage": lambda data: b"not json at all \xff",
    "null": lambda data: b"null",
    "empty-object": lambda data: b"{}",
    "cut-in-half": lambda data: data[: len(data) // 2],
}


def test_a_garbage_plan_json_is_rebuilt_from_the_ledger(worked_repo: Path) -> None:
    repo = worked_repo
    expected = status_json(repo)
    before = ledger_of(repo).read_bytes()
    snapshot = snapshot_of(repo)
    good = snapshot.read_bytes()

    for name, garble in GARBLED_SNAPSHOTS.items():
        snapshot.write_bytes(garble(good))
        assert status_json(repo) == expected, name
    verify = autodev(repo, "ledger", "verify")
    assert verify.code == 0, verify
    assert "plan.json" in verify.out and "rebuilt" in verify.out
    assert ledger_of(repo).read_bytes() == before

    approved = autodev(repo, "approve")

    assert approved.code == 0, approved
    assert decode_snapshot(snapshot.read_bytes()).ledger_seq == 3
    assert "up to date" in autodev(repo, "ledger", "verify").out


def test_a_forged_plan_json_with_a_recomputed_hash_fails_ledger_verify(worked_repo: Path) -> None:
    repo = worked_repo
    snapshot = snapshot_of(repo)
    decoded = decode_snapshot(snapshot.read_bytes())
    forged_state = decoded.state_bytes.replace(b'"status":"in_progress"', b'"status":"complete"')
    assert forged_state != decoded.state_bytes
    head = Ledger(ledger_of(repo), readonly=True).open()
    snapshot.write_bytes(encode_snapshot(head, forged_state))

    verify = autodev(repo, "ledger", "verify")

    assert verify.code == 1, verify
    assert "differs from the ledger replay" in verify.out


# --- evidence files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tamper", ["modified", "deleted", "emptied", "directory", "patch-modified"])
def test_tampered_evidence_fails_ledger_verify_naming_the_file(repo: Path, tamper: str) -> None:
    save_plan(repo, started=True)
    with PlanManager(repo) as manager:
        review = manager.record_evidence(
            ReviewEvidence(task_id="1.1", verdict="NEEDS_CHANGES", issues=["add a docstring"])
        )
        patch = manager.record_patch("1.1", "--- a/src/mod.py\n+++ b/src/mod.py\n@@ -0,0 +1 @@\n+X = 1\n")
    before = ledger_of(repo).read_bytes()
    target = patch if tamper == "patch-modified" else review
    if tamper == "modified":
        target.write_bytes(target.read_bytes().replace(b"NEEDS_CHANGES", b"APPROVED"))
    elif tamper == "patch-modified":
        target.write_bytes(target.read_bytes().replace(b"X = 1", b"X = 2"))
    elif tamper == "deleted":
        target.unlink()
    elif tamper == "emptied":
        target.write_bytes(b"")
    else:
        target.unlink()
        target.mkdir()

    verify = autodev(repo, "ledger", "verify")

    assert verify.code == 1, verify
    assert "Traceback" not in verify.err
    problems = [line for line in verify.out.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1, verify.out
    relative = target.relative_to(repo).as_posix()
    assert relative in problems[0] and "task 1.1" in problems[0], problems
    # Evidence is checked by verify only: the plan stays readable and the ledger untouched.
    assert task_statuses(repo) == {"1.1": "in_progress", "1.2": "pending"}
    assert ledger_of(repo).read_bytes() == before


# --- intents ------------------------------------------------------------------------------------------------


def _save_script(setup: DemoSetup, directory: Path) -> Path:
    path = directory / "script.json"
    path.write_text(Script.model_dump_json(setup.script, exclude_defaults=True), encoding="utf-8")
    return path


def _assert_no_plan_phase(root: Path) -> None:
    state = root / ".autodev"
    assert not (state / "spec.md").exists()
    assert not (state / "delegations").exists()
    evidence = state / "evidence"
    assert not evidence.exists() or not any(evidence.iterdir())
    ledger = ledger_of(root)
    # Compared last, so that everything above is checked even while this fails.
    assert not ledger.exists() or ledger.read_bytes() == b"", (
        f"a rejected intent appended to the ledger: {ledger.read_bytes()[:300]!r}"
    )


@pytest.mark.parametrize(
    "intent",
    ["", "   \n\t  ", "\x01\x02\x07\x1b\x1f\r", "\x7f\x9b\x85\x7f"],
    ids=["empty", "whitespace", "c0-controls-only", "del-and-c1-controls-only"],
)
def test_an_empty_intent_is_refused_before_any_agent_or_ledger_write(tmp_path: Path, intent: str) -> None:
    setup = prepare_demo(tmp_path / "project")
    script = _save_script(setup, tmp_path)
    # Should the intent be accepted after all, the run that follows must not take minutes.
    (setup.repo_root / ".autodev").mkdir()
    (setup.repo_root / ".autodev" / "config.toml").write_text(NO_GATES)

    result = autodev(setup.repo_root, "run", "--platform", "scripted", "--script", str(script), intent)

    assert_clean_error(result)
    assert "the intent is empty" in result.err
    _assert_no_plan_phase(setup.repo_root)


def test_a_1_mb_intent_is_refused_before_any_agent_or_ledger_write(tmp_path: Path) -> None:
    setup = prepare_demo(tmp_path / "project")
    script = _save_script(setup, tmp_path)
    intent_file = tmp_path / "intent.txt"
    intent_file.write_text("Add a slugify helper. " * 48_000, encoding="utf-8")
    # Linux refuses a single argv element over 128 KiB before autodev starts, so the console script's entry
    # point is called with the 1 MB intent from inside a process instead.
    code = (
        "import sys\nfrom autodev.cli.app import main\n"
        "intent = open(sys.argv[2], encoding='utf-8').read()\n"
        "main(['run', '--platform', 'scripted', '--script', sys.argv[1], intent])\n"
    )
    clean = {key: value for key, value in os.environ.items() if not key.upper().startswith("AUTODEV_")}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(script), str(intent_file)],
        cwd=setup.repo_root,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    result = Run(proc.returncode, proc.stdout, proc.stderr)

    assert_clean_error(result)
    assert "KiB" in result.err and len(result.err) < MAX_MESSAGE_CHARS
    _assert_no_plan_phase(setup.repo_root)


def test_control_characters_are_dropped_from_an_accepted_intent(tmp_path: Path) -> None:
    setup = prepare_demo(tmp_path / "project")
    script = _save_script(setup, tmp_path)
    (setup.repo_root / ".autodev").mkdir()
    (setup.repo_root / ".autodev" / "config.toml").write_text(NO_GATES)

    result = autodev(
        setup.repo_root,
        "run",
        "--confirm-plan",
        "--platform",
        "scripted",
        "--script",
        str(script),
        "\x1b[31mAdd a slugify\x07 helper\x1b[0m\r\n\tto textutils\x08",
    )

    assert result.code == 3, result
    assert "Traceback" not in result.err
    spec = (setup.repo_root / ".autodev" / "spec.md").read_text(encoding="utf-8")
    assert "Add a slugify helper" in spec and "to textutils" in spec
    assert not [char for char in spec if ord(char) < 32 and char not in "\n\t"], repr(spec)
    assert status_json(setup.repo_root)["plan"] is not None
