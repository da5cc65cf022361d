"""Which signals AutoDev's command takes over: a fresh interpreter each, as the console script starts."""

from __future__ import annotations

import subprocess
import sys

# Each probe starts from the dispositions a command started from a terminal has, whatever the test runner
# inherited (``nohup`` ignores SIGHUP, a job started with ``&`` ignores SIGINT).
PROBE = """
import signal
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)
{before}
from autodev.cli.stopping import stop_in_order_on_termination
stop_in_order_on_termination()
print(*(
    "default" if handler is signal.SIG_DFL else "ignored" if handler is signal.SIG_IGN else "taken"
    for handler in map(signal.getsignal, (signal.SIGTERM, signal.SIGHUP))
))
"""


def _dispositions(before: str = "") -> list[str]:
    probe = PROBE.format(before=before)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_termination_and_hangup_are_taken_over() -> None:
    assert _dispositions() == ["taken", "taken"]


def test_a_signal_the_caller_ignores_stays_ignored() -> None:
    # `nohup autodev run ...` ignores SIGHUP so that the run outlives the terminal; it must.
    assert _dispositions("signal.signal(signal.SIGHUP, signal.SIG_IGN)") == ["taken", "ignored"]
    assert _dispositions("signal.signal(signal.SIGTERM, signal.SIG_IGN)") == ["ignored", "taken"]


# SIGINT ignored, as for a job a non-interactive shell started with `&`: SIGTERM arrives while a task of
# the event loop is in the middle of its own work (here: right after it sent the signal to itself).
MID_TASK = """
import asyncio, os, signal
for number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.SIG_IGN)
from autodev.cli.stopping import stop_in_order_on_termination
stop_in_order_on_termination()

async def main():
    for _ in range({signals}):
        os.kill(os.getpid(), signal.SIGTERM)
    total = sum(range(100_000))  # the task's own work, which the stop must not cut in half
    print("work done", flush=True)
    await asyncio.sleep(30)
    print("not stopped", flush=True)

try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("stopped", flush=True)
"""


def _mid_task(signals: int) -> list[str]:
    probe = MID_TASK.format(signals=signals)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout.splitlines()


def test_with_sigint_ignored_a_termination_stops_the_event_loop_at_its_next_turn_not_mid_task() -> None:
    assert _mid_task(1) == ["work done", "stopped"]


def test_with_sigint_ignored_a_second_termination_stops_at_once() -> None:
    assert _mid_task(2) == ["stopped"]
