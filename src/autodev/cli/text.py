"""What reaches a terminal is text: untrusted strings made inert, on a console whose reader may leave.

Task titles, agent output, file names and the errors quoting them come from plans an agent wrote or from
tools; printed raw, an escape sequence in them retitles the window, clears the screen or forges a hyperlink,
and a ``[/bold]`` in them is rich markup that fails to parse. Every renderer of the CLI passes such strings
through :func:`terminal_text` (plain output) or :func:`terminal_markup` (rich markup) first.
"""

from __future__ import annotations

import os
import re
import sys

from rich.console import Console
from rich.markup import escape

__all__ = ["ReaderMayLeaveConsole", "stop_writing_stdout", "terminal_markup", "terminal_text"]

# Whole sequences go, not just their ESC: "\x1b]0;pwned\x07" must not leave "]0;pwned" behind.
_ESCAPE_SEQUENCE = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]                          # CSI: colours, cursor moves, clearing the screen
    | \x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)         # OSC, DCS, SOS, PM, APC: window titles, hyperlinks
    | \x1b[ -/]*[0-~]                                 # the other ESC sequences: resets, charsets
    | \x9b[0-?]*[ -/]*[@-~]                           # 8-bit CSI
    | [\x90\x98\x9d-\x9f][^\x07\x1b\x80-\x9f]*(?:\x07|\x1b\\|\x9c)  # 8-bit OSC, DCS, SOS, PM, APC
    """,
    re.VERBOSE,
)
# A line break or tab becomes a space: "a\nb" reads as two words, and no value can start a line of its own.
_LINE_BREAK = re.compile(r"[\t\n\r\x0b\x0c]")
# C0, DEL, C1, and the bidi controls that make a terminal show text in another order than it has.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# A lone surrogate (from a JSON "\ud800") cannot be encoded: printing it would fail, not just look odd.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def terminal_text(value: object) -> str:
    """``value`` as one line of text safe to print: no escape sequence, control character or line break.

    A block of several lines is made of lines each passed through here.
    """
    text = _LINE_BREAK.sub(" ", _ESCAPE_SEQUENCE.sub("", str(value)))
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def terminal_markup(value: object) -> str:
    """:func:`terminal_text`, escaped to stand for itself inside rich markup."""
    markup = escape(terminal_text(value))
    # An odd run of trailing backslashes would escape the tag that follows; rich's escape evens out a single
    # one only.
    trailing = len(markup) - len(markup.rstrip("\\"))
    return markup + "\\" if trailing % 2 else markup


def stop_writing_stdout() -> None:
    """Point stdout at the null device once its reader has left, so no later write or flush fails."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class ReaderMayLeaveConsole(Console):
    """A console whose reader may go away (``autodev status | head -1``): what is left goes unprinted.

    rich's default raises ``SystemExit(1)`` from inside whatever was printing: a failed ``status``, or a run
    abandoned half way through a progress event instead of finishing its work quietly.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        stop_writing_stdout()
