"""Faults around the state: a full or read-only disk during an append, a second run, simultaneous writers.

(a) A full disk is simulated two ways. In-process, ``os`` as ``autodev.state.ledger`` sees it fails one call
(``write``, a short ``write``, ``fdatasync``, ``ftruncate``): as root, permissions cannot make a file
unwritable. Through the executable, ``RLIMIT_FSIZE`` makes the kernel refuse file growth (``EFBIG``), which a
process meets exactly where a full disk would stop it. (b) A second ``autodev run|execute|resume`` while one
works is refused at once naming the first one's pid, ``status`` keeps working, and after a SIGKILL the lock
is recovered. (c) Simultaneous ``plan --from-markdown --replace`` commands all finish or are refused
cleanly, and the ledger verifies.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import cli
from support.cli import (
    AUTODEV,
    Run,
)
from support.orchestration import git_log

import autodev.state.ledger as ledger_module
import autodev.state.plan_manager as plan_manager_module
from autodev.adapters.scripted import Script
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.errors import SnapshotError, StateError
from autodev.state.ledger import Ledger
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown

PLAN = textwrap.dedent(
    """\
    # Plan: Demo plan

    ## Phase 1: Build
    ### Task 1.1: Write the module
    - Files: src/mod.py

    ### Task 1.2: Test the module
    - Files: tests/test_mod.py
    - Depends: 1.1
    """
)
# Every gate off: these tests are about locks and state, and a whole run then takes a couple of seconds.
NO_GATES = "".join(
    f"[qa_gates.{gate}]\nenabled = false\n" for gate in ("syntax", "lint", "build", "test", "secretscan")
)
TASK_COMMITS = ["autodev: 1.2 Export slugify from the package", "autodev: 1.1 Implement slugify"]


# --- helpers ------------------------------------------------------------------------------------------------


def autodev(cwd: Path, *args: str, file_size_limit: int | None = None) -> Run:
    """Run the installed executable on the repository ``cwd``."""
    return cli.autodev(cwd, "-C", str(cwd), *args, file_size_limit=file_size_limit)


def assert_clean_error(result: Run, code: int = 2) -> None:
    assert "Traceback" not in result.err, result.err[-3000:]
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err


def statuses(root: Path) -> dict[str, str]:
    result = autodev(root, "status", "--json")
    assert result.code == 0, result
    return {task["id"]: task["status"] for task in json.loads(result.out)["tasks"]}


def verified_entries(root: Path) -> int:
    return Ledger(root / ".autodev" / "ledger.jsonl", readonly=True).open().seq


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.05)


# --- (a) a full or read-only disk during an append ----------------------------------------------------------


class FaultyOs:
    """``os`` for the ledger module: each call named in ``faults`` fails once, then behaves normally."""

    def __init__(self, faults: dict[str, Callable[..., Any]]) -> None:
        self.faults = dict(faults)
        self.fired: list[str] = []

    def __getattr__(self, name: str) -> Any:
        fault = self.faults.pop(name, None)
        if fault is None:
            return getattr(os, name)
        self.fired.append(name)
        return fault


def _raise(code: int) -> Callable[..., Any]:
    def fail(*args: object) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


def _short_write(fd: int, data: bytes) -> int:
    # Half the line reaches the file, as when the disk fills up in the middle of it.
    return os.write(fd, data[: len(data) // 2])


@pytest.fixture
def manager(repo: Path) -> Iterator[PlanManager]:
    with PlanManager(repo) as opened:
        opened.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-faults")
        opened.update_task_status("1.1", "in_progress")
        yield opened


@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        ({"write": _raise(errno.ENOSPC)}, "No space left on device"),
        ({"write": _raise(errno.EROFS)}, "Read-only file system"),
        ({"write": _short_write}, "short write"),
        ({"fdatasync": _raise(errno.EIO)}, "Input/output error"),
        ({"write": _short_write, "ftruncate": _raise(errno.EROFS)}, "short write"),
    ],
    ids=["enospc", "erofs", "short-write", "fdatasync-eio", "short-write-uncuttable"],
)
def test_a_failed_append_is_a_state_error_and_the_next_one_works(
    repo: Path,
    manager: PlanManager,
    monkeypatch: pytest.MonkeyPatch,
    faults: dict[str, Callable[..., Any]],
    reason: str,
) -> None:
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    faulty = FaultyOs(faults)
    monkeypatch.setattr(ledger_module, "os", faulty)

    with pytest.raises(StateError) as raised:
        manager.update_task_status("1.1", "coded")

    assert sorted(faulty.fired) == sorted(faults)
    message = raised.value.message
    assert str(ledger) in message and reason in message and "\n" not in message, message
    if "ftruncate" not in faults:
        assert "the ledger is unchanged" in message
        assert ledger.read_bytes() == before
    # Whatever the failed append left behind, a reader sees exactly the entries before it.
    assert Ledger(ledger, readonly=True).open().seq == 2
    assert PlanManager.open(repo, readonly=True).get_task("1.1").status == "in_progress"
    assert manager.get_task("1.1").status == "in_progress"

    manager.update_task_status("1.1", "coded")

    after = ledger.read_bytes()
    assert after.startswith(before) and after.removeprefix(before).count(b"\n") == 1
    assert Ledger(ledger).open().seq == 3
    assert PlanManager.open(repo, readonly=True).get_task("1.1").status == "coded"


def test_a_snapshot_that_cannot_be_written_leaves_a_valid_ledger(
    repo: Path, manager: PlanManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(plan_manager_module, "atomic_write_bytes", disk_full)

    with pytest.raises(SnapshotError) as raised:
        manager.checkpoint()

    assert "plan.json" in raised.value.message and "No space left on device" in raised.value.message
    monkeypatch.undo()
    assert Ledger(repo / ".autodev" / "ledger.jsonl").open().seq == 2
    assert PlanManager.open(repo, readonly=True).get_task("1.1").status == "in_progress"


def test_autodev_refuses_cleanly_when_the_ledger_cannot_grow(repo: Path) -> None:
    with PlanManager(repo) as opened:
        opened.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-faults")
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    (repo / "plan.md").write_text(PLAN.replace("Demo plan", "Other plan"), encoding="utf-8")

    # Room for part of the next entry only (a short write), then for none of it.
    for limit in (len(before) + 40, len(before)):
        for args in (("approve",), ("plan", "--from-markdown", "plan.md", "--replace")):
            result = autodev(repo, *args, file_size_limit=limit)
            assert_clean_error(result, code=3)  # the machine's fault: resumable once there is room
            assert str(ledger) in result.err and "the ledger is unchanged" in result.err, result.err
            assert ledger.read_bytes() == before


def test_a_log_file_that_cannot_grow_does_not_fail_the_command(repo: Path) -> None:
    # On a full disk the log, written on every event, is the first file to hit the wall.
    with PlanManager(repo) as opened:
        opened.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-faults")
    log = repo / ".autodev" / "logs" / "autodev.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"{}\n" * 30_000)
    (repo / "plan.md").write_text(PLAN.replace("Demo plan", "Other plan"), encoding="utf-8")

    result = autodev(repo, "plan", "--from-markdown", "plan.md", "--replace", file_size_limit=32 * 1024)

    assert "Traceback" not in result.err, result.err[-3000:]
    assert result.code == 0, result.err[-500:]
    assert json.loads(autodev(repo, "status", "--json").out)["plan"]["title"] == "Other plan"


@pytest.mark.parametrize(
    "args",
    [("approve",), ("plan", "--from-markdown", "plan.md", "--replace")],
    ids=["approve", "plan-from-markdown"],
)
def test_autodev_refuses_cleanly_when_nothing_in_autodev_can_be_written(
    repo: Path, args: tuple[str, ...]
) -> None:
    # A full disk or a read-only .autodev/: not even the lock owner's pid can be written.
    with PlanManager(repo) as opened:
        opened.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-faults")
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    (repo / "plan.md").write_text(PLAN.replace("Demo plan", "Other plan"), encoding="utf-8")

    result = autodev(repo, *args, file_size_limit=0)

    assert_clean_error(result, code=3)  # the machine's fault: resumable once there is room
    assert ".autodev" in result.err, result.err
    assert ledger.read_bytes() == before
    # Reading needs no room at all.
    assert autodev(repo, "status", "--json", file_size_limit=0).code == 0


# --- runs on the demo project -------------------------------------------------------------------------------


def restartable_script(setup: DemoSetup, *, slow_task: str | None = None) -> Script:
    """The demo script, with answers that do not depend on how many processes the run took.

    A ``responses`` sequence starts over in every new process, so a resumed run would hear the reviewer's
    first answer again; keyed by attempt, each attempt gets its own answer whichever process asks.
    """
    entries: list[dict[str, Any]] = []
    for entry in setup.script.entries:
        data = entry.model_dump(exclude_defaults=True)
        if "responses" in data:
            responses = data.pop("responses")
            entries += [{**data, **response, "attempt": n} for n, response in enumerate(responses, start=1)]
            continue
        if entry.role == "developer" and entry.task_id == slow_task:
            data["latency_s"] = 120.0
        entries.append(data)
    return Script.model_validate({"entries": entries})


def save_script(script: Script, path: Path) -> Path:
    path.write_text(script.model_dump_json(exclude_defaults=True), encoding="utf-8")
    return path


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    setup = prepare_demo(tmp_path / "project")
    (setup.repo_root / ".autodev").mkdir()
    (setup.repo_root / ".autodev" / "config.toml").write_text(NO_GATES)
    return setup


@pytest.fixture
def fast_script(demo: DemoSetup, tmp_path: Path) -> Path:
    return save_script(restartable_script(demo), tmp_path / "fast.json")


@pytest.fixture
def slow_script(demo: DemoSetup, tmp_path: Path) -> Path:
    return save_script(restartable_script(demo, slow_task="1.1"), tmp_path / "slow.json")


class Background:
    """An ``autodev`` process in a session of its own (as a terminal job), its output going to files."""

    def __init__(self, args: list[str], workdir: Path) -> None:
        self.stdout_path = workdir / "background.out"
        self.stderr_path = workdir / "background.err"
        env = {key: value for key, value in os.environ.items() if not key.upper().startswith("AUTODEV_")}
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(AUTODEV), *args],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def out(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def wait_for_output(self, needle: str, timeout_s: float = 30.0) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and needle not in self.out:
                raise AssertionError(
                    f"autodev exited {self.proc.returncode} before printing {needle!r}:\n{self.out}"
                )
            return needle in self.out

        wait_until(seen, timeout_s, f"{needle!r} in the output of autodev")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def first_run(demo: DemoSetup, slow_script: Path, tmp_path: Path) -> Iterator[Background]:
    """A run whose developer takes two minutes on task 1.1; it is working there when the test starts."""
    run = Background(
        [
            "-C",
            str(demo.repo_root),
            "run",
            "--platform",
            "scripted",
            "--script",
            str(slow_script),
            demo.intent,
        ],
        tmp_path,
    )
    try:
        run.wait_for_output("[1.1/develop] developer working")
        yield run
    finally:
        run.kill()


# --- (a) continued: a full disk in the middle of a run ------------------------------------------------------


def test_a_run_that_fills_the_disk_stops_cleanly_and_resume_finishes_it(
    demo: DemoSetup, fast_script: Path
) -> None:
    root = demo.repo_root
    agents = ("--platform", "scripted", "--script", str(fast_script))

    # The ledger of the whole run is about twice this size: it fills up after task 1.1's first review.
    stopped = autodev(root, "run", *agents, demo.intent, file_size_limit=8000)

    assert_clean_error(stopped, code=3)
    assert "free disk space" in stopped.err or "No space" in stopped.err or "too large" in stopped.err
    entries = verified_entries(root)
    assert entries > 0
    verify = autodev(root, "ledger", "verify")
    assert verify.code == 0, verify

    resumed = autodev(root, "resume", *agents)

    assert resumed.code == 0, resumed.out[-2000:] + resumed.err
    assert statuses(root) == {"1.1": "complete", "1.2": "complete"}
    assert git_log(root)[:2] == TASK_COMMITS
    assert verified_entries(root) > entries
    assert autodev(root, "ledger", "verify").code == 0


# --- (b) a second run while one works -----------------------------------------------------------------------


def test_a_second_run_is_refused_naming_the_first_and_a_killed_run_frees_the_lock(
    demo: DemoSetup, first_run: Background, fast_script: Path
) -> None:
    root = demo.repo_root
    agents = ("--platform", "scripted", "--script", str(fast_script))
    ledger = root / ".autodev" / "ledger.jsonl"

    for args in (("run", *agents, "Something else"), ("execute", *agents), ("resume", *agents)):
        refused = autodev(root, *args)
        assert_clean_error(refused)
        # The run lock is never waited for: the message is the "another run" one, not a lock timeout.
        assert f"another autodev run (process {first_run.pid})" in refused.err, (args, refused.err)

    before = ledger.read_bytes()
    assert statuses(root) == {"1.1": "in_progress", "1.2": "pending"}
    assert ledger.read_bytes() == before  # status only reads
    assert first_run.proc.poll() is None  # the first run is unaffected

    first_run.kill()
    resumed = autodev(root, "resume", *agents)

    assert resumed.code == 0, resumed.out[-2000:] + resumed.err
    assert statuses(root) == {"1.1": "complete", "1.2": "complete"}
    assert git_log(root)[:2] == TASK_COMMITS
    assert autodev(root, "ledger", "verify").code == 0


def test_a_plan_saved_from_markdown_while_a_run_works_is_refused(
    demo: DemoSetup, first_run: Background
) -> None:
    root = demo.repo_root
    (root / "other.md").write_text(PLAN.replace("Demo plan", "Replacement plan"), encoding="utf-8")
    ledger = root / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()

    result = autodev(root, "plan", "--from-markdown", "other.md", "--replace")

    # Replacing the plan under a live run would leave it executing tasks of a plan that no longer exists.
    assert_clean_error(result)
    assert f"process {first_run.pid}" in result.err, result.err
    assert ledger.read_bytes() == before
    assert statuses(root) == {"1.1": "in_progress", "1.2": "pending"}


# --- (c) simultaneous writers -------------------------------------------------------------------------------


def test_simultaneous_plans_from_markdown_all_finish_or_are_refused_and_the_ledger_verifies(
    repo: Path,
) -> None:
    with PlanManager(repo) as opened:
        opened.init_plan(parse_plan_markdown(PLAN, "0" * 16), session_id="sess-faults")
    titles = [f"Plan number {n}" for n in range(3)]
    for n, title in enumerate(titles):
        (repo / f"plan-{n}.md").write_text(PLAN.replace("Demo plan", title), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.upper().startswith("AUTODEV_")}
    procs = [
        subprocess.Popen(
            [str(AUTODEV), "plan", "--from-markdown", f"plan-{n}.md", "--replace"],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(len(titles))
    ]
    saved = 0
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        result = Run(proc.returncode, out, err)
        if result.code == 0:
            saved += 1
        else:
            assert_clean_error(result)
            assert "lock" in result.err, result.err

    assert saved >= 1
    ledger = Ledger(repo / ".autodev" / "ledger.jsonl")
    assert ledger.open().seq == 1 + saved
    last = list(ledger.entries())[-1]
    assert last.op == "plan_init"
    status = json.loads(autodev(repo, "status", "--json").out)
    assert status["plan"]["title"] == last.payload["plan"]["title"]
    assert autodev(repo, "ledger", "verify").code == 0
