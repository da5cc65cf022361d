"""Hostile agent output: whatever an agent CLI prints or an inline agent writes ends in a reason, not a crash.

A fake ``claude`` (a small Python script written per test) prints ``stream-json`` lines that go wrong in one
way each: cut off, mixed with garbage, one 50 MB line, invalid UTF-8, a 100 MB flood, an endless flood, an
exit mid-stream, a hang. ``ClaudeCodeAdapter`` runs it for real (process group, deadline, transcript) and
must return ``AgentResult(success=False)`` with the right ``error.kind``, keep memory bounded, and leave no
process behind. The inline platform's response files get the same treatment, through the adapter and
through ``autodev resume``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import stat
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import anyio
import pytest
from support import cli
from support.cli import Run

from autodev.adapters.base import AgentError, AgentInvocation, AgentResult, DelegationPendingSignal
from autodev.adapters.claude_code import ClaudeCodeAdapter
from autodev.adapters.inline import InlineAdapter, InvalidResponseError
from autodev.cli.demo import prepare_demo
from autodev.config import AutodevConfig
from autodev.errors import AutodevError

MIB = 1024 * 1024
# The growth of the test process's peak memory that still counts as "bounded" while 100 MB stream past.
MEMORY_BOUND_KIB = 100 * 1024
MAX_MESSAGE_CHARS = 2000

INIT = {"type": "system", "subtype": "init", "session_id": "sess-fake", "model": "fake"}
TOOL_USE = {
    "type": "assistant",
    "message": {"content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}]},
}
RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "All done.",
    "num_turns": 2,
    "total_cost_usd": 0.25,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def line(event: Mapping[str, object]) -> bytes:
    return json.dumps(event).encode() + b"\n"


# --- the fake CLI and its runner ----------------------------------------------------------------------------


def fake_claude(directory: Path, body: str) -> Path:
    """An executable ``claude`` that reads its prompt, then runs ``body`` (Python, ``out`` = raw stdout)."""
    path = directory / "fake-claude"
    prelude = "import os, subprocess, sys, time\nsys.stdin.buffer.read()\nout = sys.stdout.buffer\n"
    path.write_text(f"#!{sys.executable}\n{prelude}{textwrap.dedent(body)}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def printing(*chunks: bytes, exit_code: int = 0, stderr: str = "") -> str:
    """A fake body that prints ``chunks`` as given (no newline added) and exits with ``exit_code``."""
    return (
        f"for chunk in {list(chunks)!r}:\n    out.write(chunk)\nout.flush()\n"
        f"sys.stderr.write({stderr!r})\nsys.exit({exit_code})\n"
    )


def invoke(repo: Path, executable: Path, *, timeout_s: float = 60.0) -> tuple[AgentResult, ClaudeCodeAdapter]:
    adapter = ClaudeCodeAdapter(repo_root=repo, config=AutodevConfig(), executable=str(executable))
    invocation = AgentInvocation(
        role="developer", prompt="Implement task 1.1.", cwd=repo, task_id="1.1", timeout_s=timeout_s
    )

    async def call() -> AgentResult:
        await adapter.init_workspace(repo, [])
        return await adapter.execute(invocation)

    return anyio.run(call), adapter


def assert_failure(result: AgentResult, *kinds: str) -> AgentError:
    """``result`` is a failure of one of ``kinds`` with a one-line message; returns its error."""
    assert not result.success, result
    assert result.error is not None and result.error.kind in kinds, result.error
    assert result.error.message.strip() and "\n" not in result.error.message
    assert len(result.error.message) < MAX_MESSAGE_CHARS
    return result.error


def autodev(cwd: Path, *args: str) -> Run:
    """Run the installed executable on the repository ``cwd`` with no inherited ``AUTODEV_*`` setting."""
    return cli.autodev(cwd, "-C", str(cwd), *args)


def live_group_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (this container's init does not reap orphans)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat_line[stat_line.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


def assert_group_gone(pgid: int) -> None:
    """No live process is left in group ``pgid`` (one just SIGKILLed may take a moment to become a zombie)."""
    for _ in range(100):
        if not live_group_members(pgid):
            return
        time.sleep(0.05)
    raise AssertionError(f"processes of group {pgid} still alive: {live_group_members(pgid)}")


def _status_kib(field: str) -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith(f"{field}:"):
            return int(row.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@contextlib.contextmanager
def peak_memory_growth() -> Iterator[Callable[[], int]]:
    """Yields a function giving how far (KiB) the peak RSS rose above the RSS at entry."""
    with contextlib.suppress(OSError):
        # "5" resets the peak (VmHWM) to the current RSS; where that is refused, the old peak only makes the
        # measured growth smaller, never a false failure.
        Path("/proc/self/clear_refs").write_text("5")
    start = _status_kib("VmRSS")
    yield lambda: _status_kib("VmHWM") - start


@pytest.fixture
def workdir(repo: Path) -> Iterator[Path]:
    (repo / "README.md").write_text("a repository\n")
    yield repo
    # The flood tests leave transcripts of hundreds of MB; no later test reads them.
    shutil.rmtree(repo / ".autodev" / "transcripts", ignore_errors=True)


# --- stream-json that goes wrong ----------------------------------------------------------------------------


def test_a_stream_cut_off_before_its_result_is_malformed_output(workdir: Path) -> None:
    cut = line(RESULT)[:40]
    fake = fake_claude(workdir, printing(line(INIT), line(TOOL_USE), cut))

    result, _ = invoke(workdir, fake)

    error = assert_failure(result, "malformed_output")
    assert "without a result" in error.message
    assert result.tool_calls == 1 and result.session_id == "sess-fake"


def test_garbage_interleaved_with_events_is_skipped_and_the_result_kept(workdir: Path) -> None:
    garbage = [
        b"Warning: something the CLI prints on stdout\n",
        b"\x1b[31mcolour codes\x1b[0m\n",
        b"[1, 2, 3]\n",
        b"42\n",
        b"null\n",
        b'"a string"\n',
        b"[" * 100_000 + b"\n",
        b'{"a":' * 50_000 + b"\n",
        b'{"type": "assistant", "message": "not an object"}\n',
        b'{"type": "assistant", "message": {"content": "not a list"}}\n',
        b'{"type": "assistant", "message": {"content": [7, {"type": "tool_use", "id": 5}]}}\n',
        b'{"type": "result", "subtype": \n',
        b"\x00\x00\x00\n",
        b"\r\n",
    ]
    fake = fake_claude(
        workdir, printing(line(INIT), *garbage[:7], line(TOOL_USE), *garbage[7:], line(RESULT))
    )

    result, _ = invoke(workdir, fake)

    assert result.success, result.error
    assert result.text == "All done." and result.cost_usd == 0.25
    assert result.tool_calls >= 1


def test_only_garbage_is_malformed_output_counting_what_was_skipped(workdir: Path) -> None:
    fake = fake_claude(workdir, printing(b"Error: not logged in\n", b"<html>proxy error</html>\n", b"{"))

    result, _ = invoke(workdir, fake)

    error = assert_failure(result, "malformed_output")
    assert "non-JSON line" in error.message


def test_invalid_utf8_lines_are_skipped_and_the_result_kept(workdir: Path) -> None:
    fake = fake_claude(
        workdir,
        printing(
            line(INIT),
            b"\xff\xfe\xfd binary noise\n",
            b'{"type": "assistant", "note": "\xc3\x28"}\n',
            b"\xed\xa0\x80\n",
            line(RESULT),
        ),
    )

    result, _ = invoke(workdir, fake)

    assert result.success, result.error
    assert result.text == "All done."


def test_a_result_carrying_invalid_utf8_is_a_failure_or_replaced_text_never_a_crash(workdir: Path) -> None:
    broken = line(RESULT).replace(b"All done.", b"All \xff\xfe done.")
    fake = fake_claude(workdir, printing(line(INIT), broken))

    result, _ = invoke(workdir, fake)

    if result.success:
        assert result.text.startswith("All ") and result.text.endswith(" done.")
    else:
        assert_failure(result, "malformed_output")


def test_a_50_mb_line_of_noise_is_dropped_with_bounded_memory_and_the_result_kept(workdir: Path) -> None:
    fake = fake_claude(
        workdir,
        f"out.write({line(INIT)!r})\nout.write(b'x' * (50 * {MIB}) + b'\\n')\nout.write({line(RESULT)!r})\n",
    )

    with peak_memory_growth() as growth:
        result, _ = invoke(workdir, fake)

    assert result.success, result.error
    assert result.text == "All done."
    assert growth() < MEMORY_BOUND_KIB, f"peak memory rose by {growth()} KiB"


def test_a_50_mb_result_event_is_a_failure_with_bounded_memory(workdir: Path) -> None:
    # The 50 MB event is built inside the fake; only its recipe passes through this process.
    fake = fake_claude(
        workdir,
        f"import json\nout.write({line(INIT)!r})\nevent = dict({RESULT!r}, result='y' * {50 * MIB})\n"
        "out.write(json.dumps(event).encode() + b'\\n')\n",
    )

    with peak_memory_growth() as growth:
        result, _ = invoke(workdir, fake)

    error = assert_failure(result, "malformed_output", "output_limit")
    # "No result event" alone would send the user looking for a CLI that never answered.
    assert "line" in error.message, error
    assert growth() < MEMORY_BOUND_KIB, f"peak memory rose by {growth()} KiB"


def test_a_100_mb_flood_fails_with_bounded_memory_and_no_process_left(workdir: Path) -> None:
    # 100 MB of noise in 8 KiB lines, then the CLI exits 0 without a result.
    fake = fake_claude(
        workdir,
        f"out.write({line(INIT)!r})\nchunk = (b'noise ' * 1365 + b'\\n') * 128\n"
        "for _ in range(100):\n    out.write(chunk)\nout.flush()\n",
    )

    with peak_memory_growth() as growth:
        result, adapter = invoke(workdir, fake)

    assert_failure(result, "malformed_output", "output_limit")
    assert growth() < MEMORY_BOUND_KIB, f"peak memory rose by {growth()} KiB"
    assert adapter.last_pid is not None
    assert_group_gone(adapter.last_pid)


def test_an_endless_flood_is_stopped_at_the_output_bound(workdir: Path) -> None:
    fake = fake_claude(
        workdir,
        f"out.write({line(INIT)!r})\nchunk = (b'z' * 1023 + b'\\n') * 1024\n"
        "subprocess.Popen(['sleep', '300'])\nwhile True:\n    out.write(chunk)\n",
    )

    with peak_memory_growth() as growth:
        result, adapter = invoke(workdir, fake, timeout_s=120)

    assert_failure(result, "output_limit")
    assert result.exit_code is None  # killed by the adapter, not exited
    assert growth() < MEMORY_BOUND_KIB, f"peak memory rose by {growth()} KiB"
    assert adapter.last_pid is not None
    assert_group_gone(adapter.last_pid)


def test_an_exit_in_the_middle_of_the_stream_is_nonzero_exit_quoting_stderr(workdir: Path) -> None:
    fake = fake_claude(
        workdir,
        printing(
            line(INIT), line(TOOL_USE), line(RESULT)[:30], exit_code=7, stderr="fatal: connection reset\n"
        ),
    )

    result, _ = invoke(workdir, fake)

    error = assert_failure(result, "nonzero_exit")
    assert "exited 7" in error.message and "connection reset" in error.message
    assert result.exit_code == 7


def test_a_cli_killed_by_a_signal_mid_stream_is_a_failure(workdir: Path) -> None:
    fake = fake_claude(workdir, f"out.write({line(INIT)!r})\nout.flush()\nos.kill(os.getpid(), 9)\n")

    result, _ = invoke(workdir, fake)

    assert_failure(result, "nonzero_exit")


def test_a_hanging_cli_times_out_and_its_whole_group_is_killed(workdir: Path) -> None:
    fake = fake_claude(
        workdir,
        f"out.write({line(INIT)!r})\nout.flush()\nsubprocess.Popen(['sleep', '300'])\ntime.sleep(300)\n",
    )

    result, adapter = invoke(workdir, fake, timeout_s=1.5)

    error = assert_failure(result, "timeout")
    assert "1.5s" in error.message
    assert adapter.last_pid is not None
    # The group holds the CLI and the `sleep` it started: both are gone.
    assert_group_gone(adapter.last_pid)


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "-Infinity", "-5", "1e400"])
def test_a_result_with_a_nonsense_cost_never_becomes_a_cost(workdir: Path, cost: str) -> None:
    event = line(RESULT).replace(b'"total_cost_usd": 0.25', f'"total_cost_usd": {cost}'.encode())
    assert event != line(RESULT)
    fake = fake_claude(workdir, printing(line(INIT), event))

    result, _ = invoke(workdir, fake)

    # A cost that is not a finite, non-negative number is unknown, or the call fails; it is never recorded
    # as is (a NaN total disables the budget guard, a negative one lowers it).
    assert result.cost_usd is None or (math.isfinite(result.cost_usd) and result.cost_usd >= 0), result


# --- inline response files ----------------------------------------------------------------------------------

MALFORMED_RESPONSES: dict[str, tuple[bytes, str | None]] = {
    "not-json": (b"I did the work, see the diff.", None),
    "empty": (b"", None),
    "array": (b'[{"text": "x"}]', None),
    "null": (b"null", None),
    "wrong-types": (b'{"text": 5, "success": "yes"}', "text"),
    "extra-key": (b'{"text": "x", "verdict": "APPROVED"}', "verdict"),
    "misspelt-key": (b'{"txt": "x"}', "txt"),
    "error-with-success": (b'{"text": "x", "error": "boom"}', "error"),
    "negative-cost": (b'{"text": "x", "cost_usd": -1}', "cost_usd"),
    "invalid-utf8": (b'{"text": "caf\xe9"}', None),
    "deep-nesting": (b"[" * 100_000, None),
    "10-mb-text": (b"All done. " * (MIB + 1), None),
}


@pytest.mark.parametrize("name", list(MALFORMED_RESPONSES))
def test_a_malformed_inline_response_is_a_typed_error_naming_file_and_field(repo: Path, name: str) -> None:
    data, field = MALFORMED_RESPONSES[name]
    adapter = InlineAdapter(repo_root=repo)
    invocation = AgentInvocation(role="reviewer", prompt="Review task 1.1.", cwd=repo, task_id="1.1")
    with pytest.raises(DelegationPendingSignal) as pending:
        anyio.run(adapter.execute, invocation)
    response = pending.value.response_path
    response.write_bytes(data)

    with pytest.raises(InvalidResponseError) as raised:
        anyio.run(adapter.execute, invocation)

    error = raised.value
    assert isinstance(error, AutodevError) and error.exit_code == 2
    assert str(response) in error.message and "\n" not in error.message
    assert len(error.message) < MAX_MESSAGE_CHARS, f"a {len(error.message)}-character message"
    if field is not None:
        assert error.field == field and repr(field) in error.message, error.message
    assert response.read_bytes() == data  # left in place, to be fixed there
    archive = adapter.archive_dir
    assert not archive.exists() or not any(archive.iterdir())


def test_resume_refuses_each_malformed_inline_response_and_touches_nothing(tmp_path: Path) -> None:
    setup = prepare_demo(tmp_path / "project")
    root = setup.repo_root
    suspended = autodev(root, "run", "--platform", "inline", setup.intent)
    assert suspended.code == 3, suspended
    response = root / ".autodev" / "responses" / "plan-explorer.json"
    ledger = root / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    ledger_after: dict[str, bytes] = {}

    for name in ("not-json", "array", "wrong-types", "extra-key", "10-mb-text"):
        data, field = MALFORMED_RESPONSES[name]
        response.write_bytes(data)

        result = autodev(root, "resume")

        assert "Traceback" not in result.err, result.err
        assert result.code == 2, (name, result)
        assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
        assert str(response) in result.err and len(result.err) < MAX_MESSAGE_CHARS, (name, result.err[:300])
        if field is not None:
            assert repr(field) in result.err, (name, result.err)
        assert response.read_bytes() == data, name
        ledger_after[name] = ledger.read_bytes()
    # Compared last, so that everything above is checked even while this fails.
    changed = [name for name, after in ledger_after.items() if after != before]
    assert not changed, f"a resume refused for a malformed response appended to the ledger: {changed}"
