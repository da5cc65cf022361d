"""The one sanitizer of what the CLI prints: escape sequences and control characters go, markup is inert."""

from __future__ import annotations

import io
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from autodev.adapters.detect import ToolProbe
from autodev.cli.render import print_config, print_environment, print_probes
from autodev.cli.text import terminal_markup, terminal_text
from autodev.config import ConfigEntry
from autodev.qa.environment import EnvironmentCandidate, EnvironmentResolution

HOSTILE = "Fix \x1b]0;pwned\x07the \x1b[2Jparser\x9b31m [/bold] [link=file:///etc/passwd]x[/link]\r\x08!"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain title", "plain title"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[2J\x1b[H\x1b[?25lhidden cursor", "hidden cursor"),
        ("\x1b]0;pwned\x07title", "title"),
        ("\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bPq#0;2;0;0;0\x1b\\sixel", "sixel"),
        ("reset\x1bc", "reset"),
        ("charset\x1b(B", "charset"),
        ("\x9b31mred\x9b0m", "red"),
        ("\x9d0;pwned\x9ctitle", "title"),
        ("bell\x07 nul\x00 del\x7f nel\x85 csi\x9b", "bell nul del nel csi"),
        ("ab\x08\x08cd", "abcd"),
        ("right\u202eto left\u2066", "rightto left"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("unterminated \x1b]0;title", "unterminated 0;title"),
        ("trailing escape\x1b", "trailing escape"),
        ("ünïcödé, 中文 and emoji 🎉", "ünïcödé, 中文 and emoji 🎉"),
    ],
)
def test_escape_sequences_go_whole_and_control_characters_go(raw: str, shown: str) -> None:
    assert terminal_text(raw) == shown


def test_a_value_is_one_line() -> None:
    assert terminal_text("first\r\nsecond\tcolumn\x0bthird\x0c") == "first  second column third "


def test_any_object_is_shown_as_its_text() -> None:
    assert terminal_text(3) == "3"
    assert terminal_text(None) == "None"


def test_markup_in_a_value_is_shown_as_written() -> None:
    markup = f"[bold]{terminal_markup(HOSTILE)}[/bold]"
    text = Text.from_markup(markup)
    assert text.plain == "Fix the parser [/bold] [link=file:///etc/passwd]x[/link] !"
    assert [(span.start, span.end, str(span.style)) for span in text.spans] == [(0, len(text.plain), "bold")]


@pytest.mark.parametrize("value", ["a\\", "a\\\\", "a\\\\\\", "\\[bold]", "a\\[b"])
def test_backslashes_in_a_value_never_escape_the_tag_after_it(value: str) -> None:
    text = Text.from_markup(f"[bold]{terminal_markup(value)}[/bold] after")
    assert text.plain.endswith("after") and "[/bold]" not in text.plain
    assert [(span.start, span.end) for span in text.spans] == [(0, len(text.plain) - len(" after"))]


def test_a_printed_value_reaches_the_terminal_as_text_only() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=200, emoji=False)
    console.print(f"title: {terminal_markup(HOSTILE)}")
    assert out.getvalue() == "title: Fix the parser [/bold] [link=file:///etc/passwd]x[/link] !\n"


def _is_control(char: str) -> bool:
    return (
        unicodedata.category(char) in ("Cc", "Cs")
        or "\u202a" <= char <= "\u202e"
        or "\u2066" <= char <= "\u2069"
    )


# Text rich with what terminals and rich's markup react to, beside any other character.
_HOSTILE_TEXT = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.characters(min_codepoint=0, max_codepoint=0x9F),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
        st.sampled_from(
            ["\x1b[", "\x1b]", "\x1b\\", "\x9b", "\x9d", "\x07", "[", "]", "[/", "\\", "[bold]", "[/]"]
        ),
    ),
    max_size=60,
).map("".join)


@given(_HOSTILE_TEXT)
def test_no_control_character_survives(raw: str) -> None:
    text = terminal_text(raw)
    # Newline and tab included: a value is one line, and a block is made of such lines.
    assert not [char for char in text if _is_control(char)], repr(text)
    text.encode("utf-8")  # a lone surrogate would make the print itself fail


@given(_HOSTILE_TEXT)
def test_escaped_markup_always_parses_and_adds_no_style(raw: str) -> None:
    text = Text.from_markup(f"[bold]{terminal_markup(raw)}[/bold]", emoji=False)
    # The closing tag stays a tag and every character is kept, though backslashes before a "[" may show fewer.
    assert text.plain.replace("\\", "") == terminal_text(raw).replace("\\", "")
    assert all(str(span.style) == "bold" for span in text.spans)
    Text.from_markup(terminal_markup(raw))


def test_config_and_doctor_tables_show_what_tools_and_files_said_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_config([ConfigEntry("platform", HOSTILE, "[/red] pyproject.toml")])
    print_probes("QA tools", [ToolProbe("ruff", "ruff", True, "/bin/[/x]", version=HOSTILE)])
    candidate = EnvironmentCandidate("configured", HOSTILE, usable=False)
    print_environment(EnvironmentResolution(None, HOSTILE, (candidate,)), [HOSTILE])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out and "pwned" not in out
    shown = "Fix the parser [/bold] [link=file:///etc/passwd]x[/link] !"
    assert out.count(shown) == 5
    assert "[/red] pyproject.toml" in out and "/bin/[/x]" in out
