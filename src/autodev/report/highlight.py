"""A unified diff as HTML, each line coloured by what it does (added, removed, hunk, file header) and its
code by the file's language, through Pygments (which ``rich`` already brings).

Each file's lines are lexed twice, as the old side (context and removed lines) and as the new side (context
and added lines), so that a removed line that opens a string does not turn the added lines after it into
string: each line takes its colours from the side it belongs to. Hunks of one file are lexed as one text, so
a docstring or a comment that spans lines inside a hunk is coloured as one. Files whose language Pygments
does not know by their name are shown uncoloured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from html import escape
from itertools import groupby
from operator import itemgetter
from pathlib import PurePosixPath

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.token import Comment, Keyword, Name, Number, Operator, String, _TokenType, is_token_subtype
from pygments.util import ClassNotFound

__all__ = ["TOKEN_STYLE", "highlight_diff"]

# Token kinds the page colours, most specific first (a Name.Builtin is not coloured as a plain Name).
_KINDS: tuple[tuple[_TokenType, str], ...] = (
    (Comment, "tc"),
    (String, "ts"),
    (Number, "tn"),
    (Keyword, "tk"),
    (Operator.Word, "tk"),
    (Name.Builtin, "tb"),
    (Name.Decorator, "td"),
    (Name.Function, "tf"),
    (Name.Class, "tf"),
    (Name.Tag, "tk"),
    (Name.Attribute, "tb"),
)

TOKEN_STYLE = (
    ".tc{color:#6e7781;font-style:italic}.ts{color:#0a3069}.tn{color:#0550ae}.tk{color:#cf222e}"
    ".tb{color:#8250df}.td{color:#953800}.tf{color:#6639ba}"
)


@lru_cache(maxsize=512)
def _kind(token: _TokenType) -> str | None:
    return next((css for kind, css in _KINDS if is_token_subtype(token, kind)), None)


@lru_cache(maxsize=256)
def _lexer(name: str) -> Lexer | None:
    """The lexer for a file name, or None; cached by name, since a report asks for the same few often."""
    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _spans(pieces: list[tuple[str | None, str]]) -> str:
    """One line's ``(class, text)`` pieces as HTML, neighbours of one class in one span."""
    html = []
    for css, group in groupby(pieces, key=itemgetter(0)):
        text = escape("".join(piece for _, piece in group))
        if text:
            html.append(f"<span class='{css}'>{text}</span>" if css else text)
    return "".join(html)


def _coloured_lines(lexer: Lexer | None, lines: list[str]) -> list[str]:
    """``lines`` as HTML, one string per line, coloured as one text in ``lexer``'s language."""
    if lexer is None or not lines:
        return [escape(line) for line in lines]
    lexed: list[list[tuple[str | None, str]]] = [[]]
    # Pygments reads a carriage return as a line break; git's lines end at line feeds only.
    for token, value in lexer.get_tokens("\n".join(line.replace("\r", "") for line in lines)):
        css = _kind(token)
        first, *rest = value.split("\n")
        lexed[-1].append((css, first))
        lexed.extend([(css, piece)] for piece in rest)
    if len(lexed) != len(lines):
        # The lexer did not give back the lines it was given: better plain than on the wrong lines.
        return [escape(line) for line in lines]
    return [_spans(pieces) for pieces in lexed]


@dataclass(slots=True)
class _File:
    """One file's part of the diff: its header lines and its hunk lines as ``(prefix, code)``."""

    path: str = ""
    lines: list[tuple[str, str]] = field(default_factory=list)

    def render(self) -> list[str]:
        lexer = _lexer(PurePosixPath(self.path).name) if self.path else None
        old = _coloured_lines(lexer, [code for prefix, code in self.lines if prefix in " -"])
        new = _coloured_lines(lexer, [code for prefix, code in self.lines if prefix in " +"])
        at_old = at_new = 0
        out = []
        for prefix, code in self.lines:
            if prefix == "header":
                out.append(_header(code))
            elif prefix == "+":
                out.append(f"<span class='add'>+{new[at_new]}</span>")
                at_new += 1
            elif prefix == "-":
                out.append(f"<span class='del'>-{old[at_old]}</span>")
                at_old += 1
            elif prefix == " ":
                out.append(f" {new[at_new]}")
                at_old += 1
                at_new += 1
            else:
                out.append(escape(code))
        return out


def _header(line: str) -> str:
    if line.startswith("@@"):
        return f"<span class='hunk'>{escape(line)}</span>"
    if line.startswith(("diff --git", "+++", "---")):
        return f"<span class='file'>{escape(line)}</span>"
    return escape(line)


def _path_of(line: str) -> str | None:
    """The new path a ``+++`` line names (the old one for a deletion), or None for another line."""
    if line.startswith("+++ ") and line[4:] != "/dev/null":
        return line[4:].removeprefix("b/")
    if line.startswith("--- ") and line[4:] != "/dev/null":
        return line[4:].removeprefix("a/")
    return None


def highlight_diff(text: str) -> str:
    """``text`` (a unified diff as git writes it) as the inner HTML of a ``<pre>``."""
    files: list[_File] = []
    in_hunk = False
    # Lines end at line feeds only: a form feed or a carriage return inside a line is part of it.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        if line.startswith("diff --git") or not files:
            files.append(_File())
            in_hunk = False
        current = files[-1]
        if line.startswith("@@"):
            in_hunk = True
            current.lines.append(("header", line))
        elif in_hunk and line[:1] in ("+", "-", " "):
            current.lines.append((line[0], line[1:]))
        elif in_hunk and line == "":
            current.lines.append((" ", ""))  # a context line of an empty line whose space was trimmed
        elif in_hunk and line.startswith("\\"):
            current.lines.append(("note", line))  # "\ No newline at end of file"
        else:
            in_hunk = False
            path = _path_of(line)
            if path is not None and (line.startswith("+++") or not current.path):
                current.path = path
            current.lines.append(("header", line))
    return "\n".join(line for file in files for line in file.render())
