"""Run one agent CLI as a subprocess: own process group, deadline, bounded memory, full transcript.

Every subprocess adapter goes through ``run_process``. The prompt travels on stdin (Linux caps one argv
element at 128 KiB); stdin is closed when unused. stdout is split into lines and handed to the adapter's
parser one at a time, so memory stays bounded however much the CLI prints; everything is also streamed to
the transcript file. stderr keeps only its head and tail. On deadline, cancellation or an output flood the
whole process group gets SIGTERM, then SIGKILL after a grace period; after a normal exit whatever the CLI
left running in its group is stopped too. Processes that left the group (``setsid``, a double fork) are
found by the tag in their environment and killed as well (``autodev.processes``), so no call
leaves an orphan behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import ByteReceiveStream, Process

from autodev.processes import (
    TAG_VARIABLE,
    call_tag,
    kill_adopted,
    kill_tagged,
    own_child,
    starting_child_soon,
)
from autodev.state.children import register_child

__all__ = ["ProcessOutcome", "ProcessSpec", "ProcessStartError", "run_process"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """How to run one CLI. ``env`` is the complete environment (the adapter merges its overrides)."""

    argv: Sequence[str]
    cwd: Path
    timeout_s: float
    env: Mapping[str, str] | None = None
    stdin_data: bytes | None = None
    grace_s: float = 3.0
    transcript_path: Path | None = None
    max_line_bytes: int = 8 * MIB
    max_output_bytes: int = 512 * MIB
    keep_stderr_bytes: int = 32 * 1024
    # Where the running child is registered (a file per process group) so that, if AutoDev itself is
    # killed, the next run can stop what it left behind: children live in their own sessions and do not
    # die with their parent.
    children_dir: Path | None = None
    # Seconds the process may print nothing (stdout or stderr) while alive before it is killed as stalled;
    # None: only ``timeout_s`` bounds it.
    stall_timeout_s: float | None = None


@dataclass(slots=True)
class ProcessOutcome:
    """How the process ended. ``exit_code`` is None when it was killed by us."""

    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    # Killed after printing nothing for ``stall_timeout_s`` (``stdout_bytes`` says whether it ever had).
    stalled: bool = False
    output_limited: bool = False
    stdout_bytes: int = 0
    long_lines: int = 0
    stderr_head: str = ""
    stderr_tail: str = ""
    pid: int = 0
    # Processes of the call that had left its process group and were killed when it ended.
    stray_pids: list[int] = field(default_factory=list)

    @property
    def stderr_excerpt(self) -> str:
        """Up to a few hundred characters of stderr, for a one-line error message."""
        text = (self.stderr_head + (" ... " if self.stderr_tail else "") + self.stderr_tail).strip()
        text = " ".join(text.split())
        return text[:400]


class ProcessStartError(Exception):
    """The executable could not be started; ``missing`` tells a missing CLI from other failures."""

    def __init__(self, argv0: str, missing: bool, detail: str) -> None:
        self.argv0 = argv0
        self.missing = missing
        super().__init__(f"{argv0}: {detail}")


@dataclass(slots=True)
class _HeadTail:
    limit: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]


class _LineSplitter:
    """Splits a byte stream into lines, cutting any line longer than ``limit`` (counted, not kept)."""

    def __init__(self, on_line: Callable[[bytes], None], limit: int) -> None:
        self._on_line = on_line
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False
        self.long_lines = 0

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                self._append(chunk[start:])
                return
            self._append(chunk[start:newline])
            self._emit()
            start = newline + 1

    def close(self) -> None:
        if self._buffer or self._skipping:
            self._emit()

    def _append(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._buffer += piece
        if len(self._buffer) > self._limit:
            # A line this long is no event we could use; keep memory bounded and drop the rest of it.
            self.long_lines += 1
            self._skipping = True
            self._buffer.clear()

    def _emit(self) -> None:
        if not self._skipping and self._buffer:
            self._on_line(bytes(self._buffer))
        self._buffer.clear()
        self._skipping = False


def _signal_group(pid: int, signum: int) -> bool:
    """Send ``signum`` to the process group led by ``pid``; False when the group is already gone."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


async def _stop_group(process: Process, grace_s: float) -> None:
    """SIGTERM the whole group, wait up to ``grace_s`` for the leader, then SIGKILL whatever is left."""
    if _signal_group(process.pid, signal.SIGTERM) and process.returncode is None:
        with anyio.move_on_after(grace_s):
            await process.wait()
    _signal_group(process.pid, signal.SIGKILL)
    if process.returncode is None:
        await process.wait()


async def run_process(spec: ProcessSpec, on_line: Callable[[bytes], None]) -> ProcessOutcome:
    """Run ``spec`` to completion or deadline, feeding each stdout line to ``on_line``."""
    started = time.monotonic()
    tag = call_tag(spec.children_dir.parent if spec.children_dir else None)
    env = {**(spec.env if spec.env is not None else os.environ), TAG_VARIABLE: tag}
    # Ours until waited for: a search for orphans (``kill_adopted``) must not reap it under us.
    ours = contextlib.ExitStack()
    try:
        async with starting_child_soon():
            process = await anyio.open_process(
                list(spec.argv),
                stdin=subprocess.PIPE if spec.stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=spec.cwd,
                env=env,
                start_new_session=True,
            )
            ours.enter_context(own_child(process.pid))
    except FileNotFoundError as exc:
        raise ProcessStartError(spec.argv[0], True, "not found on PATH") from exc
    except OSError as exc:
        raise ProcessStartError(spec.argv[0], False, exc.strerror or str(exc)) from exc

    registration = register_child(spec.children_dir, process.pid) if spec.children_dir else None
    outcome = ProcessOutcome(exit_code=None, duration_s=0.0, pid=process.pid)
    splitter = _LineSplitter(on_line, spec.max_line_bytes)
    stderr = _HeadTail(spec.keep_stderr_bytes)
    transcript: IO[bytes] | None = None
    if spec.transcript_path is not None:
        spec.transcript_path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered: what the agent streamed is on disk at once, for `autodev peek` beside the run.
        transcript = spec.transcript_path.open("wb", buffering=0)

    async def feed_stdin() -> None:
        if process.stdin is None or spec.stdin_data is None:
            return
        # The CLI may exit before reading everything; that is its answer, not our error.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await process.stdin.send(spec.stdin_data)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await process.stdin.aclose()

    last_output = [time.monotonic()]
    stall_watch = anyio.CancelScope()

    async def watch_stall(limit: float, scope: anyio.CancelScope) -> None:
        with stall_watch:
            while True:
                remaining = last_output[0] + limit - time.monotonic()
                if remaining <= 0:
                    outcome.stalled = True
                    scope.cancel()
                    return
                await anyio.sleep(remaining)

    async def pump_stdout(stream: ByteReceiveStream, scope: anyio.CancelScope) -> None:
        async for chunk in stream:
            last_output[0] = time.monotonic()
            outcome.stdout_bytes += len(chunk)
            if transcript is not None:
                transcript.write(chunk)
            splitter.feed(chunk)
            if outcome.stdout_bytes > spec.max_output_bytes:
                outcome.output_limited = True
                scope.cancel()
                return
        splitter.close()

    async def pump_stderr(stream: ByteReceiveStream) -> None:
        async for chunk in stream:
            last_output[0] = time.monotonic()
            stderr.add(chunk)

    try:
        with anyio.move_on_after(spec.timeout_s) as deadline:
            async with anyio.create_task_group() as group:
                group.start_soon(feed_stdin)
                assert process.stdout is not None and process.stderr is not None
                group.start_soon(pump_stdout, process.stdout, deadline)
                group.start_soon(pump_stderr, process.stderr)
                if spec.stall_timeout_s is not None:
                    group.start_soon(watch_stall, spec.stall_timeout_s, deadline)
                await process.wait()
                stall_watch.cancel()  # a process that has ended is not stalled, whatever it still prints
                # The leader is done; anything it left in its group, or that left the group, would keep
                # our pipes open forever.
                _signal_group(process.pid, signal.SIGKILL)
                outcome.stray_pids += await anyio.to_thread.run_sync(kill_tagged, tag)
        outcome.timed_out = deadline.cancelled_caught and not (outcome.output_limited or outcome.stalled)
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_group(process, spec.grace_s)
            outcome.stray_pids += await anyio.to_thread.run_sync(kill_tagged, tag)
            outcome.stray_pids += await anyio.to_thread.run_sync(kill_adopted)
            if registration is not None:
                with contextlib.suppress(OSError):
                    registration.unlink()
            if transcript is not None:
                transcript.close()
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await process.aclose()
            ours.close()
    killed_by_us = outcome.timed_out or outcome.output_limited or outcome.stalled
    outcome.exit_code = None if killed_by_us else process.returncode
    outcome.duration_s = time.monotonic() - started
    outcome.long_lines = splitter.long_lines
    outcome.stderr_head = stderr.head.decode("utf-8", errors="replace")
    outcome.stderr_tail = stderr.tail.decode("utf-8", errors="replace")
    return outcome
