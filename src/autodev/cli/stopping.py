"""SIGTERM and SIGHUP stop the command the way Ctrl-C does.

A service manager, ``timeout``, a CI runner cancelling a job or a closed terminal ends a process with
SIGTERM or SIGHUP, not SIGINT. Their default action ends AutoDev at once: no ``finally`` runs, so the agent
CLIs and QA tools it started in sessions of their own keep working on the repository until the next
``autodev`` reaps them, and temporary files stay behind. Here both signals take Ctrl-C's path instead: the
running work is cancelled, the children are stopped, everything recorded stays, and the command exits with
``128 + signal`` after saying how to continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from types import FrameType

__all__ = ["NOTHING_RECORDED", "advise_after_interrupt", "interruption", "stop_in_order_on_termination"]

RESUME = "everything recorded so far is kept: run `autodev resume` to continue"
NOTHING_RECORDED = (
    "nothing of this run was recorded yet (it stopped before planning began): "
    "run the same `autodev run` again"
)

_HANDLED = (signal.SIGTERM, signal.SIGHUP)
_received: list[signal.Signals] = []
_terminals: list[int] = []
_advice: list[str] = []


def stop_in_order_on_termination() -> None:
    """Route SIGTERM and SIGHUP to the interrupt path, each only where its action is still the default: a
    signal the caller chose to ignore (``nohup`` ignores SIGHUP) stays ignored."""
    for number in _HANDLED:
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _interrupt)
    # Known now: once the terminal has hung up, it no longer answers whether it is one.
    _terminals[:] = [descriptor for descriptor in (0, 1, 2) if os.isatty(descriptor)]


def advise_after_interrupt(advice: str) -> None:
    """What to do next, if the command is interrupted, when ``autodev resume`` would not continue it."""
    _advice[:] = [advice]


def interruption() -> tuple[str, int]:
    """The line that says what stopped the command and what to do next, and its exit code (the shell's
    ``128 + signal``)."""
    advice = _advice[0] if _advice else RESUME
    if _received:
        return f"stopped by {_received[0].name}; {advice}", 128 + _received[0]
    return f"interrupted; {advice}", 128 + signal.SIGINT


def _interrupt(number: int, frame: FrameType | None) -> None:
    _received.append(signal.Signals(number))
    if number == signal.SIGHUP:
        _leave_the_terminal()
    on_interrupt = signal.getsignal(signal.SIGINT)
    if callable(on_interrupt):
        # Python's own handler raises KeyboardInterrupt; inside an event loop, asyncio's cancels the main
        # task first, so that every cancelled step cleans up before KeyboardInterrupt ends the loop.
        on_interrupt(signal.SIGINT, frame)
        return
    # SIGINT is ignored (a job a non-interactive shell started with `&`): the termination still stops. In an
    # event loop the first signal stops it at the loop's next turn, not wherever the main thread happens to
    # be: raised half way through a task's or the loop's own bookkeeping, it could leave a task that never
    # finishes, and the orderly stop waiting for it. A second signal stops at once, as a second Ctrl-C does.
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    if len(_received) > 1:
        raise KeyboardInterrupt
    loop.call_soon_threadsafe(_raise_interrupt)


def _raise_interrupt() -> None:
    raise KeyboardInterrupt


def _leave_the_terminal() -> None:
    """Point whichever of stdin, stdout and stderr was a terminal at /dev/null.

    After a hangup every write to the terminal fails (EIO). The orderly stop still prints (the live
    display's last frame, the closing message), and an error raised by one of those writes would replace
    the interrupt half way through the cleanup. What nobody can read any more goes nowhere instead; the
    exit code still says what happened.
    """
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        for descriptor in _terminals:
            with contextlib.suppress(OSError):
                os.dup2(null, descriptor)
    finally:
        os.close(null)
