"""SIGTERM and SIGHUP stop the command the way Ctrl-C does.

A service manager, ``timeout``, a CI runner cancelling a job or a closed terminal ends a process with
SIGTERM or SIGHUP, not SIGINT. Their default action ends AutoDev at once: no ``finally`` runs, so the agent
CLIs and QA tools it started in sessions of their own keep working on the repository until the next
``autodev`` reaps them, and temporary files stay behind. Here both signals take Ctrl-C's path instead: the
running work is cancelled, the children are stopped, everything recorded stays, and the command exits with
``128 + signal`` after saying how to continue.
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["interruption", "stop_in_order_on_termination"]

_HANDLED = (signal.SIGTERM, signal.SIGHUP)
_received: list[signal.Signals] = []


def stop_in_order_on_termination() -> None:
    """Route SIGTERM and SIGHUP to the interrupt path, each only where its action is still the default: a
    signal the caller chose to ignore (``nohup`` ignores SIGHUP) stays ignored."""
    for number in _HANDLED:
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _interrupt)


def interruption() -> tuple[str, int]:
    """What stopped the command, in words, and its exit code (the shell's ``128 + signal``)."""
    if _received:
        return f"stopped by {_received[0].name}", 128 + _received[0]
    return "interrupted", 128 + signal.SIGINT


def _interrupt(number: int, frame: FrameType | None) -> None:
    _received.append(signal.Signals(number))
    on_interrupt = signal.getsignal(signal.SIGINT)
    if callable(on_interrupt):
        # Python's own handler raises KeyboardInterrupt; inside an event loop, asyncio's cancels the main
        # task first, so that every cancelled step cleans up before KeyboardInterrupt ends the loop.
        on_interrupt(signal.SIGINT, frame)
        return
    # SIGINT is ignored (a job a non-interactive shell started with `&`): the termination still stops.
    raise KeyboardInterrupt
