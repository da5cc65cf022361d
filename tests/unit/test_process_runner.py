"""run_process with real subprocesses: stdin delivery, deadlines, cancellation, floods, no orphans."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import anyio
import pytest
from support.processes import survivors

from autodev.process_runner import ProcessSpec, ProcessStartError, run_process


def _spec(code: str, tmp_path: Path, **kwargs: object) -> ProcessSpec:
    return ProcessSpec(argv=[sys.executable, "-c", code], cwd=tmp_path, **kwargs)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_large_stdin_is_delivered_and_lines_parsed(tmp_path: Path) -> None:
    lines: list[bytes] = []
    payload = ("x" * 1000 + "\n") * 300
    code = (
        "import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d)); "
        "print(hashlib.sha256(d).hexdigest())"
    )
    outcome = await run_process(
        _spec(
            code, tmp_path, timeout_s=30, stdin_data=payload.encode(), transcript_path=tmp_path / "t.jsonl"
        ),
        lines.append,
    )
    assert outcome.exit_code == 0 and not outcome.timed_out
    assert lines == [str(len(payload)).encode(), hashlib.sha256(payload.encode()).hexdigest().encode()]
    assert (tmp_path / "t.jsonl").read_bytes().splitlines() == lines


@pytest.mark.asyncio
async def test_deadline_kills_the_whole_group(tmp_path: Path) -> None:
    code = (
        "import subprocess, time; subprocess.Popen(['sleep', '60']); print('started', flush=True); "
        "time.sleep(60)"
    )
    outcome = await run_process(_spec(code, tmp_path, timeout_s=1.5, grace_s=0.5), lambda _line: None)
    assert outcome.timed_out and outcome.exit_code is None
    assert await survivors(outcome.pid) == []


@pytest.mark.asyncio
async def test_children_left_behind_after_a_normal_exit_are_stopped(tmp_path: Path) -> None:
    code = "import subprocess; subprocess.Popen(['sleep', '60']); print('bye')"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=20), lambda _line: None)
    assert outcome.exit_code == 0 and not outcome.timed_out
    assert await survivors(outcome.pid) == []


@pytest.mark.asyncio
async def test_cancellation_kills_the_group(tmp_path: Path) -> None:
    pids: list[int] = []

    def on_line(line: bytes) -> None:
        pids.append(int(line))

    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    with anyio.move_on_after(1.5):
        await run_process(_spec(code, tmp_path, timeout_s=60, grace_s=0.5), on_line)
    assert pids and await survivors(pids[0]) == []


@pytest.mark.asyncio
async def test_output_flood_is_bounded_and_stopped(tmp_path: Path) -> None:
    count = 0

    def on_line(_line: bytes) -> None:
        nonlocal count
        count += 1

    code = "import sys\nwhile True:\n    sys.stdout.write('y' * 1023 + '\\n')"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=60, max_output_bytes=2_000_000), on_line)
    assert outcome.output_limited and not outcome.timed_out and outcome.exit_code is None
    assert 1_000 < count < 3_000
    assert await survivors(outcome.pid) == []


@pytest.mark.asyncio
async def test_overlong_line_is_dropped_not_buffered(tmp_path: Path) -> None:
    lines: list[bytes] = []
    code = "import sys; sys.stdout.write('z' * 5_000_000 + '\\n' + 'short\\n')"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=30, max_line_bytes=100_000), lines.append)
    assert outcome.long_lines == 1 and lines == [b"short"]


@pytest.mark.asyncio
async def test_stderr_keeps_head_and_tail(tmp_path: Path) -> None:
    code = "import sys; sys.stderr.write('HEAD' + 'm' * 200_000 + 'TAIL'); sys.exit(3)"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=30, keep_stderr_bytes=1000), lambda _l: None)
    assert outcome.exit_code == 3
    assert outcome.stderr_head.startswith("HEAD") and outcome.stderr_tail.endswith("TAIL")
    assert len(outcome.stderr_head) + len(outcome.stderr_tail) <= 2000


@pytest.mark.asyncio
async def test_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(ProcessStartError) as info:
        await run_process(ProcessSpec(argv=["no-such-cli-xyz"], cwd=tmp_path, timeout_s=5), lambda _l: None)
    assert info.value.missing


@pytest.mark.asyncio
async def test_a_process_silent_from_the_start_is_killed_as_stalled_long_before_its_deadline(
    tmp_path: Path,
) -> None:
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=60, stall_timeout_s=0.5), lambda _: None)

    assert outcome.stalled and not outcome.timed_out
    assert outcome.exit_code is None and outcome.stdout_bytes == 0
    assert outcome.duration_s < 30
    assert await survivors(outcome.pid) == []


@pytest.mark.asyncio
async def test_a_process_that_falls_silent_after_printing_is_stalled_and_its_output_kept(
    tmp_path: Path,
) -> None:
    lines: list[bytes] = []
    code = "import time; print('started', flush=True); time.sleep(60)"
    outcome = await run_process(_spec(code, tmp_path, timeout_s=60, stall_timeout_s=0.5), lines.append)

    assert outcome.stalled and outcome.stdout_bytes > 0
    assert lines == [b"started"]


@pytest.mark.asyncio
async def test_a_process_that_keeps_printing_is_not_stalled_however_long_it_runs(tmp_path: Path) -> None:
    # Four times the stall limit in all, never silent for longer than a fifth of it; stderr counts as output.
    code = (
        "import sys, time\n"
        "for i in range(20):\n"
        "    (sys.stdout if i % 2 else sys.stderr).write('tick\\n'); sys.stdout.flush(); sys.stderr.flush()\n"
        "    time.sleep(0.1)\n"
        "print('done')\n"
    )
    lines: list[bytes] = []
    outcome = await run_process(_spec(code, tmp_path, timeout_s=60, stall_timeout_s=0.5), lines.append)

    assert not outcome.stalled and outcome.exit_code == 0
    assert lines[-1] == b"done"
