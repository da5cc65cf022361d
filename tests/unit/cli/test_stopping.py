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
