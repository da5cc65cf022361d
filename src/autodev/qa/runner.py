"""The one check runner: every QA tool runs through ``run_check``.

A check is an argv list run without a shell, in a pinned working directory, under a deadline, through
``autodev.process_runner.run_process`` (own process group, killed as a whole on deadline, bounded
memory). What it leaves behind is a ``CheckResult`` fit for evidence: the argv, the exit status, how it
ended, a bounded excerpt of what it printed and a digest of that output.

What the digest covers: ``run_process`` streams stdout to a transcript file, so stdout is hashed byte for
byte as the tool printed it, however long; it keeps only the head and tail of stderr (``STDERR_KEEP_BYTES``
each), so stderr enters the digest as kept, which is all of it for any stderr up to twice that size.
``output_sha256`` is the SHA-256 of stdout followed by that stderr text (UTF-8), and ``output_bytes`` the
number of bytes it covers. The excerpt shows the head and tail of stdout, then, after a ``--- stderr ---``
line, the head and tail of stderr, in ``CheckSpec.excerpt_bytes`` at most.
"""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from autodev.process_runner import ProcessOutcome, ProcessSpec, ProcessStartError, run_process
from autodev.scratch import owned_prefix

__all__ = [
    "CHECK_STATUSES",
    "STDERR_MARKER",
    "CheckResult",
    "CheckSpec",
    "CheckStatus",
    "run_check",
]

CheckStatus = Literal["pass", "fail", "error", "timeout"]
CHECK_STATUSES: tuple[CheckStatus, ...] = get_args(CheckStatus)

MIB = 1024 * 1024
STDERR_KEEP_BYTES = 64 * 1024
"""Bytes of the head, and again of the tail, of stderr that a check keeps."""
STDERR_MARKER = "--- stderr ---"
"""The line that separates stdout from stderr in ``CheckResult.output_excerpt``."""
_READ_CHUNK = MIB
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """One tool run: ``argv`` (program first, never a shell string), the directory it runs in, its deadline.

    ``env`` holds overrides laid over the caller's environment; ``stdin`` is fed to the tool (else it
    reads an empty stdin). A tool that prints more than ``max_output_bytes`` on stdout is stopped and the
    check is an error.
    """

    argv: tuple[str, ...]
    cwd: Path
    timeout_s: float
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    excerpt_bytes: int = 8 * 1024
    max_output_bytes: int = 64 * MIB
    children_dir: Path | None = None

    def __post_init__(self) -> None:
        if not self.argv or not self.argv[0]:
            raise ValueError("a check needs a program to run: argv must not be empty")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")


class CheckResult(BaseModel):
    """How one check ended, as recorded in evidence.

    ``status`` is ``pass`` (exit 0), ``fail`` (non-zero exit), ``timeout`` (deadline reached, process group
    killed) or ``error`` (the tool could not start, was killed by a signal, or flooded its output);
    ``reason`` says why for anything but a pass, and ``tool_missing`` marks an executable that was not
    found. ``exit_code`` is negative for a signal and ``None`` when the tool never ran or was stopped.
    """

    model_config = ConfigDict(extra="forbid")

    argv: list[str]
    cwd: str
    status: CheckStatus
    exit_code: int | None = None
    duration_s: float = Field(default=0.0, ge=0)
    output_excerpt: str = ""
    output_sha256: str = _EMPTY_SHA256
    output_bytes: int = Field(default=0, ge=0)
    reason: str | None = None
    tool_missing: bool = False


async def run_check(spec: CheckSpec, *, on_line: Callable[[bytes], None] | None = None) -> CheckResult:
    """Run ``spec`` and return how it ended; a tool that cannot start is a result, not an exception.

    ``on_line`` receives each non-empty stdout line (without its newline) while the tool runs, for callers
    that parse a report (lines over 8 MiB are dropped, see ``run_process``).
    """
    if not await anyio.Path(spec.cwd).is_dir():
        return _not_run(spec, f"working directory {spec.cwd} does not exist")
    with tempfile.TemporaryDirectory(prefix=owned_prefix("autodev-check-")) as scratch:
        transcript = Path(scratch) / "stdout"
        process = ProcessSpec(
            argv=spec.argv,
            cwd=spec.cwd,
            timeout_s=spec.timeout_s,
            env={**os.environ, **spec.env},
            stdin_data=spec.stdin,
            transcript_path=transcript,
            max_output_bytes=spec.max_output_bytes,
            keep_stderr_bytes=STDERR_KEEP_BYTES,
            children_dir=spec.children_dir,
        )
        try:
            outcome = await run_process(process, on_line or _ignore_line)
        except ProcessStartError as exc:
            if exc.missing:
                return _not_run(spec, f"{spec.argv[0]}: not found", missing=True)
            return _not_run(spec, f"cannot start {exc}")
        stderr = (outcome.stderr_head + outcome.stderr_tail).encode("utf-8", errors="replace")
        excerpt, digest, size = await anyio.to_thread.run_sync(
            _summarize, transcript, stderr, spec.excerpt_bytes
        )
    status, reason = _classify(outcome, spec)
    return CheckResult(
        argv=list(spec.argv),
        cwd=str(spec.cwd),
        status=status,
        exit_code=outcome.exit_code,
        duration_s=outcome.duration_s,
        output_excerpt=excerpt,
        output_sha256=digest,
        output_bytes=size,
        reason=reason,
    )


def _not_run(spec: CheckSpec, reason: str, *, missing: bool = False) -> CheckResult:
    return CheckResult(
        argv=list(spec.argv), cwd=str(spec.cwd), status="error", reason=reason, tool_missing=missing
    )


def _ignore_line(_line: bytes) -> None:
    return None


def _classify(outcome: ProcessOutcome, spec: CheckSpec) -> tuple[CheckStatus, str | None]:
    if outcome.output_limited:
        return "error", f"printed more than {spec.max_output_bytes} bytes on stdout; stopped"
    if outcome.timed_out:
        return "timeout", f"did not finish within {spec.timeout_s:g}s; its process group was killed"
    code = outcome.exit_code
    if code is None:
        return "error", "stopped before it exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return "error", f"killed by {name}"
    if code == 0:
        return "pass", None
    return "fail", f"exited with status {code}"


def _summarize(transcript: Path, stderr: bytes, budget: int) -> tuple[str, str, int]:
    """Excerpt, digest and size of stdout (read back from ``transcript``) followed by ``stderr``."""
    digest = hashlib.sha256()
    head = b""
    tail = b""
    size = 0
    if transcript.exists():
        with transcript.open("rb") as stream:
            while chunk := stream.read(_READ_CHUNK):
                digest.update(chunk)
                if len(head) < budget:
                    head += chunk[: budget - len(head)]
                tail = (tail + chunk)[-budget:]
                size += len(chunk)
    digest.update(stderr)
    stdout_room, stderr_room = _split_budget(size, len(stderr), budget)
    excerpt = _head_tail(head, tail, size, stdout_room)
    if stderr:
        if excerpt and not excerpt.endswith("\n"):
            excerpt += "\n"
        excerpt += f"{STDERR_MARKER}\n" + _head_tail(
            stderr[:budget], stderr[-budget:], len(stderr), stderr_room
        )
    return excerpt, digest.hexdigest(), size + len(stderr)


def _split_budget(stdout_size: int, stderr_size: int, budget: int) -> tuple[int, int]:
    """Share ``budget`` between the streams: each gets half, and what one does not need goes to the other."""
    half = budget // 2
    stdout_room = min(stdout_size, max(half, budget - stderr_size))
    return stdout_room, min(stderr_size, budget - stdout_room)


def _head_tail(head: bytes, tail: bytes, size: int, room: int) -> str:
    """``room`` bytes of a stream of ``size`` bytes whose first and last bytes are ``head`` and ``tail``.

    The whole stream when it fits (``head`` then holds all of it), else its head and its tail around a note
    of how much was left out.
    """
    if size <= room:
        return head[:size].decode("utf-8", errors="replace")
    keep_head = room // 2
    keep_tail = room - keep_head
    omitted = size - keep_head - keep_tail
    kept_tail = tail[len(tail) - keep_tail :] if keep_tail else b""
    return (
        head[:keep_head].decode("utf-8", errors="replace")
        + f"\n[... {omitted} bytes omitted ...]\n"
        + kept_tail.decode("utf-8", errors="replace")
    )
