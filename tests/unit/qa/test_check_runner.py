"""run_check with real processes: how a check ends, what it records, and that no shell is ever involved."""

from __future__ import annotations

import hashlib
import signal
import sys
from pathlib import Path

import anyio
import pytest
from support.processes import running

from autodev.qa import CheckResult, CheckSpec, run_check
from autodev.qa.runner import STDERR_MARKER


def _python(
    code: str,
    cwd: Path,
    *args: str,
    timeout_s: float = 30.0,
    env: dict[str, str] | None = None,
    excerpt_bytes: int = 8 * 1024,
) -> CheckSpec:
    argv = (sys.executable, "-c", code, *args)
    return CheckSpec(argv, cwd, timeout_s, env=env or {}, excerpt_bytes=excerpt_bytes)


def _entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.mark.asyncio
async def test_a_tool_that_exits_zero_passes_and_records_its_output(tmp_path: Path) -> None:
    result = await run_check(_python("print('all good')", tmp_path))

    assert result.status == "pass"
    assert result.exit_code == 0
    assert result.reason is None
    assert result.argv == [sys.executable, "-c", "print('all good')"]
    assert result.cwd == str(tmp_path)
    assert result.output_excerpt == "all good\n"
    assert result.output_sha256 == hashlib.sha256(b"all good\n").hexdigest()
    assert result.output_bytes == len(b"all good\n")
    assert CheckResult.model_validate_json(result.model_dump_json()) == result


@pytest.mark.asyncio
async def test_a_non_zero_exit_fails_with_its_status_and_both_streams(tmp_path: Path) -> None:
    code = "import sys; print('checked 3 files'); sys.stderr.write('E1 bad thing\\n'); sys.exit(3)"

    result = await run_check(_python(code, tmp_path))

    assert (result.status, result.exit_code, result.reason) == ("fail", 3, "exited with status 3")
    assert result.output_excerpt == f"checked 3 files\n{STDERR_MARKER}\nE1 bad thing\n"
    assert result.output_sha256 == hashlib.sha256(b"checked 3 files\nE1 bad thing\n").hexdigest()


@pytest.mark.asyncio
async def test_the_check_runs_in_the_pinned_directory_with_env_overrides(tmp_path: Path) -> None:
    code = "import os; print(os.getcwd()); print(os.environ['AUTODEV_CHECK_PROBE'])"

    result = await run_check(_python(code, tmp_path, env={"AUTODEV_CHECK_PROBE": "set-by-spec"}))

    assert result.output_excerpt == f"{tmp_path}\nset-by-spec\n"


@pytest.mark.asyncio
async def test_a_missing_tool_is_an_error_not_a_failure(tmp_path: Path) -> None:
    result = await run_check(CheckSpec(("autodev-no-such-tool-xyz", "--version"), tmp_path, 10.0))

    assert result.status == "error"
    assert result.tool_missing
    assert result.exit_code is None
    assert result.reason == "autodev-no-such-tool-xyz: not found"


@pytest.mark.asyncio
async def test_a_file_that_cannot_be_executed_is_an_error(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")

    result = await run_check(CheckSpec((str(script),), tmp_path, 10.0))

    assert result.status == "error"
    assert not result.tool_missing
    assert result.reason is not None and "cannot start" in result.reason


@pytest.mark.asyncio
async def test_a_missing_working_directory_is_an_error(tmp_path: Path) -> None:
    result = await run_check(_python("pass", tmp_path / "gone"))

    assert result.status == "error"
    assert result.reason == f"working directory {tmp_path / 'gone'} does not exist"


@pytest.mark.asyncio
async def test_a_tool_killed_by_a_signal_is_an_error(tmp_path: Path) -> None:
    result = await run_check(_python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", tmp_path))

    assert result.status == "error"
    assert result.exit_code == -signal.SIGKILL
    assert result.reason == "killed by SIGKILL"


@pytest.mark.asyncio
async def test_the_deadline_stops_the_tool_and_everything_it_started(tmp_path: Path) -> None:
    code = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(os.getpid(), child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    pids: list[int] = []

    result = await run_check(
        _python(code, tmp_path, timeout_s=1.5), on_line=lambda line: pids.extend(map(int, line.split()))
    )

    assert result.status == "timeout"
    assert result.exit_code is None
    assert result.reason == "did not finish within 1.5s; its process group was killed"
    assert len(pids) == 2
    # SIGKILL is delivered asynchronously: on a loaded machine a process may take a moment to die.
    for _ in range(60):
        if not [pid for pid in pids if running(pid)]:
            break
        await anyio.sleep(0.05)
    assert not [pid for pid in pids if running(pid)]


@pytest.mark.asyncio
async def test_huge_output_keeps_a_bounded_excerpt_and_digests_every_byte(tmp_path: Path) -> None:
    # Blank lines and a missing final newline: the digest is of the bytes printed, not of parsed lines.
    code = (
        "import sys\n"
        "out = sys.stdout.buffer\n"
        "for i in range(200_000):\n"
        "    out.write(b'line %d of the report\\n' % i)\n"
        "    if i % 1000 == 0:\n"
        "        out.write(b'\\n')\n"
        "out.write(b'the end, no newline')\n"
    )
    expected = bytearray()
    for i in range(200_000):
        expected += b"line %d of the report\n" % i
        if i % 1000 == 0:
            expected += b"\n"
    expected += b"the end, no newline"

    result = await run_check(_python(code, tmp_path))

    assert result.status == "pass"
    assert result.output_bytes == len(expected) > 4_000_000
    assert result.output_sha256 == hashlib.sha256(expected).hexdigest()
    assert len(result.output_excerpt.encode()) < 8 * 1024 + 100
    assert result.output_excerpt.startswith("line 0 of the report\n\nline 1 of the report\n")
    assert result.output_excerpt.endswith("line 199999 of the report\nthe end, no newline")
    assert f"[... {len(expected) - 8 * 1024} bytes omitted ...]" in result.output_excerpt


@pytest.mark.asyncio
async def test_stdout_and_stderr_share_the_excerpt_budget(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('q' * 100_000); sys.stderr.write('z' * 100_000)"

    result = await run_check(_python(code, tmp_path, excerpt_bytes=1000))

    stdout_part, stderr_part = result.output_excerpt.split(f"\n{STDERR_MARKER}\n")
    assert stdout_part.count("q") == 500
    assert stderr_part.count("z") == 500
    assert result.output_bytes == 200_000


@pytest.mark.asyncio
async def test_arguments_reach_the_tool_literally_without_a_shell(tmp_path: Path) -> None:
    hostile = "a; touch pwned $(touch pwned2) `touch pwned3` | cat > pwned4 && echo $HOME *"
    code = "import sys; print(sys.argv[1])"

    result = await run_check(_python(code, tmp_path, hostile))

    assert result.status == "pass"
    assert result.output_excerpt == hostile + "\n"
    assert _entries(tmp_path) == []


@pytest.mark.asyncio
async def test_a_shell_command_string_is_not_run_through_a_shell(tmp_path: Path) -> None:
    result = await run_check(CheckSpec(("echo hi; touch pwned",), tmp_path, 10.0))

    assert result.status == "error"
    assert result.tool_missing
    assert not (tmp_path / "pwned").exists()


def test_a_spec_needs_a_program_and_a_positive_deadline(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="argv must not be empty"):
        CheckSpec((), tmp_path, 10.0)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        CheckSpec(("true",), tmp_path, 0)
