"""``autodev run`` and its companions through the installed executable, with scripted agents and real tools.

The repository is the demo project of ``autodev demo`` and the agents answer from its script, saved to a
JSON file and handed over with ``--platform scripted --script FILE``, as a user would. Everything else is
real: git, the QA gates, the ledger, the run lock and signal handling.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli import STATUS_KEYS, Run, RunCli
from support.orchestration import git_log, script_with
from support.parallel import commit_everything

from autodev.adapters.scripted import Script
from autodev.cli.demo import DemoSetup, prepare_demo

pytestmark = pytest.mark.slow

INITIAL_COMMIT = "textutils: initial version"
TASK_COMMITS = ["autodev: 1.2 Export slugify from the package", "autodev: 1.1 Implement slugify"]
TASK_STATUSES = {
    "pending",
    "in_progress",
    "coded",
    "auto_gated",
    "reviewed",
    "tested",
    "tournamented",
    "complete",
    "blocked",
    "skipped",
}
ALWAYS_REJECT = "VERDICT: NEEDS_CHANGES\nISSUES:\n- slugify must keep the digits of the input\n"


def save_script(script: Script, path: Path) -> Path:
    # Only the fields a script author would write: a dump with every default would give an entry with
    # `responses` the single-response fields too (see test_a_script_saved_with_model_dump_json_is_accepted).
    path.write_text(script.model_dump_json(exclude_defaults=True), encoding="utf-8")
    return path


def with_latency(setup: DemoSetup, task_id: str, seconds: float) -> Script:
    """The demo script with the developer of ``task_id`` taking ``seconds`` on every attempt."""
    entries = []
    for entry in setup.script.entries:
        data = entry.model_dump(exclude_defaults=True)
        if entry.role == "developer" and entry.task_id == task_id:
            data["latency_s"] = seconds
        entries.append(data)
    return Script.model_validate({"entries": entries})


def run_with_a_slow_developer(setup: DemoSetup, task_id: str, workdir: Path) -> list[str]:
    """The arguments of an ``autodev run`` of the demo whose developer of ``task_id`` takes a minute on
    every attempt: the run is still there when the test stops it."""
    slow = save_script(with_latency(setup, task_id, 60.0), workdir / "slow.json")
    return ["-C", str(setup.repo_root), "run", "--platform", "scripted", "--script", str(slow), setup.intent]


def status_json(run_cli: RunCli, root: Path) -> dict[str, Any]:
    result = run_cli("-C", str(root), "status", "--json")
    assert result.code == 0, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def statuses(run_cli: RunCli, root: Path) -> dict[str, str]:
    return {task["id"]: task["status"] for task in status_json(run_cli, root)["tasks"]}


def assert_one_line_error(result: Run, code: int) -> None:
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "Traceback" not in result.err


def live_group_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (nothing in a container reaps orphans)."""
    return [pid for pid, _ in _live_processes() if _pgrp(pid) == pgid]


def processes_working_in(root: Path) -> list[tuple[int, str]]:
    """Live processes whose working directory is ``root`` or below it, with their command lines."""
    found = []
    for pid, cmdline in _live_processes():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(root) or cwd.startswith(f"{root}/"):
            found.append((pid, cmdline))
    return found


def gate_pytest_working_in(directory: Path) -> bool:
    """Whether AutoDev's pytest (the one writing a JUnit report) works in ``directory`` or below it."""
    return any("--junitxml" in cmd for _, cmd in processes_working_in(directory))


def _live_processes() -> Iterator[tuple[int, str]]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
        if stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X"):
            yield int(entry.name), cmdline


def _pgrp(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[2])


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.05)


def _as_from_a_terminal() -> None:
    """The stop signals' dispositions of a command started from a terminal, whatever the test runner
    inherited (``nohup`` ignores SIGHUP, a job started with ``&`` ignores SIGINT): a test that wants one
    ignored says so."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


class Background:
    """An ``autodev`` process running in its own session (as a terminal's foreground job), output to files."""

    def __init__(
        self, exe: Path, args: list[str], workdir: Path, *, ignoring: tuple[signal.Signals, ...] = ()
    ) -> None:
        self.stdout_path = workdir / "background.out"
        self.stderr_path = workdir / "background.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}

        def set_dispositions() -> None:  # `ignoring`: as a non-interactive shell does for a job run with `&`
            _as_from_a_terminal()
            for number in ignoring:
                signal.signal(number, signal.SIG_IGN)

        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(exe), *args],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=set_dispositions,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def out(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_output(self, needle: str, timeout_s: float = 25.0) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and needle not in self.out:
                raise AssertionError(
                    f"autodev exited {self.proc.returncode} before printing {needle!r}:\n"
                    f"{self.out}\n{self.err}"
                )
            return needle in self.out

        wait_until(seen, timeout_s, f"{needle!r} in the output of autodev")

    def interrupt(self) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group; the exit code."""
        os.killpg(self.pid, signal.SIGINT)
        return self.proc.wait(timeout=20)

    def stop(self, how: str, root: Path) -> int:
        """``ctrl-c`` (see interrupt); a signal's name, sent to AutoDev's process alone, as `kill` or
        `timeout` sends it; or ``SIGTERM-all``: SIGTERM to AutoDev and, at once, to every process working in
        ``root`` (its agents and QA tools), as systemd stops a service's whole control group; the exit
        code."""
        if how == "ctrl-c":
            return self.interrupt()
        if how == "SIGTERM-all":
            for pid in [self.pid, *(pid for pid, _ in processes_working_in(root))]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        else:
            os.kill(self.pid, signal.Signals[how])
        return self.proc.wait(timeout=20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


@pytest.fixture
def script_file(demo: DemoSetup, tmp_path: Path) -> Path:
    return save_script(demo.script, tmp_path / "script.json")


def test_run_carries_the_intent_to_committed_tasks_and_prints_a_summary(
    run_cli: RunCli, demo: DemoSetup, script_file: Path
) -> None:
    root = demo.repo_root
    result = run_cli(
        "-C", str(root), "run", "--platform", "scripted", "--script", str(script_file), demo.intent
    )

    assert result.code == 0, result.out + result.err
    assert "platform: scripted" in result.out
    assert "Run summary" in result.out
    assert "2 complete, 0 blocked, 1 retries" in result.out
    assert git_log(root) == [*TASK_COMMITS, INITIAL_COMMIT]
    assert (root / "textutils" / "slug.py").read_text().startswith('"""Turning arbitrary text')
    assert statuses(run_cli, root) == {"1.1": "complete", "1.2": "complete"}
    verify = run_cli("-C", str(root), "ledger", "verify")
    assert verify.code == 0, verify.out + verify.err


def test_confirm_plan_waits_for_approval_then_execute_completes_and_status_json_has_the_seed_shape(
    run_cli: RunCli, demo: DemoSetup, script_file: Path
) -> None:
    root = demo.repo_root
    agents = ["--platform", "scripted", "--script", str(script_file)]

    planned = run_cli("-C", str(root), "run", "--confirm-plan", *agents, demo.intent)
    assert planned.code == 3, planned.out + planned.err
    assert "Implement slugify" in planned.out and "Export slugify from the package" in planned.out
    assert "waits for your approval" in planned.out and "autodev approve" in planned.out

    refused = run_cli("-C", str(root), "execute", *agents)
    assert_one_line_error(refused, 3)
    assert "autodev approve" in refused.err
    assert statuses(run_cli, root) == {"1.1": "pending", "1.2": "pending"}
    assert git_log(root) == [INITIAL_COMMIT]

    approved = run_cli("-C", str(root), "approve")
    assert approved.code == 0, approved.err
    assert "Approved plan" in approved.out

    executed = run_cli("-C", str(root), "execute", *agents)
    assert executed.code == 0, executed.out + executed.err
    assert git_log(root) == [*TASK_COMMITS, INITIAL_COMMIT]

    # The status object of seed 001, section 11.3.
    data = status_json(run_cli, root)
    assert set(data) == STATUS_KEYS
    plan = data["plan"]
    assert set(plan) == {"plan_id", "spec_hash", "phases", "title", "created_at", "updated_at"}
    assert plan["plan_id"].startswith("plan-") and plan["phases"] == 1
    assert plan["title"] == "Add a slugify helper to textutils"
    assert len(plan["spec_hash"]) == 16 and int(plan["spec_hash"], 16) >= 0
    assert datetime.fromisoformat(plan["created_at"]) <= datetime.fromisoformat(plan["updated_at"])
    assert data["session_id"].startswith("sess-")
    assert [(t["id"], t["phase_id"], t["title"], t["status"]) for t in data["tasks"]] == [
        ("1.1", "1", "Implement slugify", "complete"),
        ("1.2", "1", "Export slugify from the package", "complete"),
    ]
    commits = [t["commit"] for t in data["tasks"]]
    assert commits == [git_sha(root, "HEAD~1"), git_sha(root, "HEAD")]
    assert set(data["totals"]) == TASK_STATUSES | {"total", "in_flight"}
    assert data["totals"]["complete"] == data["totals"]["total"] == 2
    assert sum(data["totals"][name] for name in TASK_STATUSES) == 2


def test_require_plan_approval_in_config_keeps_execute_and_resume_from_running_the_plan(
    run_cli: RunCli, demo: DemoSetup, script_file: Path
) -> None:
    root = demo.repo_root
    agents = ["--platform", "scripted", "--script", str(script_file)]
    (root / ".autodev").mkdir()
    (root / ".autodev" / "config.toml").write_text("require_plan_approval = true\n")

    planned = run_cli("-C", str(root), "run", *agents, demo.intent)
    assert planned.code == 3, planned.out + planned.err
    assert "waits for your approval" in planned.out and "Implement slugify" in planned.out

    for command in ("execute", "resume"):
        refused = run_cli("-C", str(root), command, *agents)
        assert_one_line_error(refused, 3)
        assert "autodev approve" in refused.err
    assert statuses(run_cli, root) == {"1.1": "pending", "1.2": "pending"}
    assert git_log(root) == [INITIAL_COMMIT]
    assert not (root / "textutils" / "slug.py").exists()


def test_a_task_whose_review_never_passes_is_blocked_with_exit_1_and_the_reason(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    root = demo.repo_root
    rejecting = save_script(
        script_with(demo, {"role": "reviewer", "task_id": "1.1", "text": ALWAYS_REJECT}),
        tmp_path / "rejecting.json",
    )

    result = run_cli(
        "-C",
        str(root),
        "run",
        "--platform",
        "scripted",
        "--script",
        str(rejecting),
        demo.intent,
        env={"AUTODEV_QA_RETRY_LIMIT": "1"},
    )

    assert result.code == 1, result.out + result.err
    assert (
        "blocked: retries exhausted after 1 attempt(s): reviewer (NEEDS_CHANGES): slugify must keep the "
        "digits of the input" in result.out
    )
    assert "critic: re-plan the task with smaller steps" in result.out
    assert "[1.2/blocked] blocked: depends on 1.1" in result.out
    assert "0 complete, 2 blocked" in result.out
    assert statuses(run_cli, root) == {"1.1": "blocked", "1.2": "blocked"}
    assert git_log(root) == [INITIAL_COMMIT]


@pytest.mark.parametrize(
    ("moment", "how", "ignoring"),
    [
        ("developer-working", "ctrl-c", ()),
        ("gate-running", "ctrl-c", ()),
        # A service manager, `timeout` or a cancelled CI job: the gate's pytest, in a process group of its
        # own, never sees the signal, so only AutoDev's orderly stop ends it.
        ("developer-working", "SIGTERM", ()),
        ("gate-running", "SIGTERM", ()),
        ("gate-running", "SIGTERM", (signal.SIGINT,)),
        # systemd stopping a service: the gate's pytest gets SIGTERM too, and its death is no failed attempt.
        ("gate-running", "SIGTERM-all", ()),
        # The terminal closed.
        ("gate-running", "SIGHUP", ()),
    ],
    ids=[
        "ctrl-c-developer",
        "ctrl-c-gate",
        "sigterm-developer",
        "sigterm-gate",
        "sigterm-no-sigint",
        "sigterm-all",
        "sighup",
    ],
)
def test_ctrl_c_or_termination_stops_cleanly_and_resume_finishes_every_task_once(
    run_cli: RunCli,
    autodev_exe: Path,
    demo: DemoSetup,
    script_file: Path,
    tmp_path: Path,
    moment: str,
    how: str,
    ignoring: tuple[signal.Signals, ...],
) -> None:
    root = demo.repo_root
    # A slow developer on 1.2 holds the run there (after 1.1 is committed) until the interrupt arrives.
    run = Background(
        autodev_exe, run_with_a_slow_developer(demo, "1.2", tmp_path), tmp_path, ignoring=ignoring
    )
    try:
        if moment == "developer-working":
            run.wait_for_output("[1.2/develop] developer working")
        else:
            # Interrupt while a gate's pytest runs: a child of the run, in a process group of its own.
            run.wait_for_output("[1.1/gates] QA gates running")
            wait_until(
                lambda: any("pytest" in cmd for _, cmd in processes_working_in(root)),
                20,
                "the test gate's pytest to start",
            )
        code = run.stop(how, root)
    finally:
        run.kill()

    stopped_by = signal.SIGINT if how == "ctrl-c" else signal.Signals[how.removesuffix("-all")]
    assert code == 128 + stopped_by, run.out + run.err
    assert "autodev resume" in run.err
    assert ("interrupted" if how == "ctrl-c" else f"stopped by {stopped_by.name}") in run.err
    assert "Traceback" not in run.err
    wait_until(lambda: not live_group_members(run.pid), 5, "the interrupted run's process group to empty")
    assert_stopped_in_order_and_resumed_once(run_cli, root, script_file)


def assert_stopped_in_order_and_resumed_once(run_cli: RunCli, root: Path, script_file: Path) -> None:
    """Nothing of the stopped run still works in the repository, its ledger verifies, and ``resume`` (the
    developer quick now: the same script without the delay) finishes both tasks, each once."""
    wait_until(lambda: not processes_working_in(root), 5, "no process left working in the repository")
    verify = run_cli("-C", str(root), "ledger", "verify")
    assert verify.code == 0, verify.out + verify.err
    resumed = run_cli("-C", str(root), "resume", "--platform", "scripted", "--script", str(script_file))
    assert resumed.code == 0, resumed.out + resumed.err
    tasks = status_json(run_cli, root)["tasks"]
    assert {t["id"]: t["status"] for t in tasks} == {"1.1": "complete", "1.2": "complete"}
    # The interrupted step cost no attempt: 1.1 has only the retry of the demo's review rejection.
    assert {t["id"]: t["retry_count"] for t in tasks} == {"1.1": 1, "1.2": 0}
    assert git_log(root) == [*TASK_COMMITS, INITIAL_COMMIT]


def test_a_run_stopped_before_planning_says_to_run_again_not_to_resume(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, script_file: Path, tmp_path: Path
) -> None:
    # The check of the project's tests before planning can take minutes on a real project; a test that
    # sleeps stands for that. Nothing of the run is recorded before it ends, so `autodev resume` would have
    # no intent to continue (or would carry on with an older plan).
    root = demo.repo_root
    (root / "tests" / "test_slow_suite.py").write_text(
        "import time\n\n\ndef test_slow():\n    time.sleep(60)\n"
    )
    commit_everything(root, "a slow suite")
    run = Background(
        autodev_exe,
        ["-C", str(root), "run", "--platform", "scripted", "--script", str(script_file), demo.intent],
        tmp_path,
    )
    try:
        wait_until(lambda: gate_pytest_working_in(root), 20, "the check of the project's tests")
        code = run.interrupt()
    finally:
        run.kill()

    assert code == 130, run.out + run.err
    assert "nothing of this run was recorded yet" in run.err and "`autodev run` again" in run.err
    assert "autodev resume" not in run.err
    wait_until(lambda: not processes_working_in(root), 5, "no process left working in the repository")
    assert status_json(run_cli, root)["plan"] is None


@pytest.mark.parametrize("intent", ["", "  \n\t "])
def test_an_empty_intent_is_a_one_line_usage_error(run_cli: RunCli, demo: DemoSetup, intent: str) -> None:
    result = run_cli("-C", str(demo.repo_root), "run", "--platform", "inline", intent)

    assert_one_line_error(result, 2)
    assert "the intent is empty" in result.err
    assert status_json(run_cli, demo.repo_root)["plan"] is None
    assert not (demo.repo_root / ".autodev" / "delegations").exists()


class OnTerminal:
    """An ``autodev`` process on a pseudo-terminal of its own, as in an SSH session: the session's leader,
    with the terminal as its controlling terminal, so that closing the terminal hangs it up for real."""

    def __init__(self, exe: Path, args: list[str], workdir: Path) -> None:
        self.master, replica = os.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}

        def take_the_terminal() -> None:
            _as_from_a_terminal()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            self.proc = subprocess.Popen(
                [str(exe), *args],
                cwd=workdir,
                env={**env, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"},
                stdin=replica,
                stdout=replica,
                stderr=replica,
                start_new_session=True,
                preexec_fn=take_the_terminal,
            )
        finally:
            os.close(replica)
        self.shown = b""

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait for ``condition``, reading what the terminal is shown meanwhile (a full terminal would
        stop the run)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"gave up waiting for {what}; the terminal last showed:\n{self.shown[-600:]!r}"
                )
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                self.shown += os.read(self.master, 65536)

    def hang_up(self) -> int:
        """Close the terminal (the kernel sends SIGHUP to its session's leader); the exit code."""
        os.close(self.master)
        return self.proc.wait(timeout=20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def test_a_terminal_that_hangs_up_stops_the_run_in_order_and_resume_finishes_it(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, script_file: Path, tmp_path: Path
) -> None:
    # Writes to a hung-up terminal fail: the live display and the closing message must not turn the
    # orderly stop into an I/O error half way through.
    root = demo.repo_root
    run = OnTerminal(autodev_exe, run_with_a_slow_developer(demo, "1.2", tmp_path), tmp_path)
    try:
        # A task's test gate (not the baseline run before planning, which works in the main checkout).
        worktrees = root / ".autodev" / "task-worktrees"
        run.wait_until(lambda: gate_pytest_working_in(worktrees), 40, "a task's test gate to start")
        code = run.hang_up()
    finally:
        run.kill()

    assert code == 128 + signal.SIGHUP
    assert_stopped_in_order_and_resumed_once(run_cli, root, script_file)


def test_a_second_run_is_refused_at_once_naming_the_first_while_status_keeps_working(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, tmp_path: Path
) -> None:
    root = demo.repo_root
    slow = save_script(with_latency(demo, "1.1", 60.0), tmp_path / "slow.json")
    first = Background(
        autodev_exe,
        ["-C", str(root), "run", "--platform", "scripted", "--script", str(slow), demo.intent],
        tmp_path,
    )
    try:
        first.wait_for_output("[1.1/develop] developer working")
        plan_before = status_json(run_cli, root)["plan"]

        started = time.monotonic()
        second = run_cli(
            "-C", str(root), "run", "--platform", "scripted", "--script", str(slow), "Something else"
        )
        assert time.monotonic() - started < 15  # refused, not queued behind the first run
        assert_one_line_error(second, 2)
        assert f"another autodev run (process {first.pid})" in second.err

        during = status_json(run_cli, root)
        assert during["plan"]["plan_id"] == plan_before["plan_id"]
        assert {t["id"]: t["status"] for t in during["tasks"]} == {"1.1": "in_progress", "1.2": "pending"}
        assert (root / ".autodev" / "spec.md").read_text().strip() == demo.intent
        assert first.proc.poll() is None  # the first run is unaffected
        assert first.interrupt() == 130
    finally:
        first.kill()


def test_a_script_saved_with_model_dump_json_is_accepted(
    run_cli: RunCli, demo: DemoSetup, tmp_path: Path
) -> None:
    # Building a script in Python and saving it with pydantic's own dump is the obvious way to write one.
    saved = tmp_path / "dumped.json"
    saved.write_text(demo.script.model_dump_json(), encoding="utf-8")

    result = run_cli(
        "-C", str(demo.repo_root), "plan", "--platform", "scripted", "--script", str(saved), demo.intent
    )

    assert result.code == 0, result.err
    assert status_json(run_cli, demo.repo_root)["plan"]["title"] == "Add a slugify helper to textutils"


def git_sha(root: Path, rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", rev], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
