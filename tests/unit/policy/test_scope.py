"""Write scopes: the `Write scope:` line's exact rules, grounding in a real tree, containment by component."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autodev.policy.scope import (
    ScopeError,
    WriteScope,
    covers,
    ground_scope,
    normalize_pattern,
    outside,
    parse_write_scope,
)

_COMPONENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=8).filter(
    lambda part: part not in (".", "..")
)
_PATH = st.lists(_COMPONENT, min_size=1, max_size=4).map("/".join)


def test_a_line_at_the_start_declares_its_comma_and_semicolon_separated_paths() -> None:
    scope = parse_write_scope("Add a flag.\nWrite scope: src/**, tests/;docs/index.md\n")
    assert scope == WriteScope(("src/**", "tests/**", "docs/index.md"))


@given(prefix=st.sampled_from(["write scope:", "WRITE SCOPE:", "Write Scope:", "wRiTe ScOpE:"]))
def test_the_prefix_is_case_insensitive(prefix: str) -> None:
    assert parse_write_scope(f"{prefix} src/**") == WriteScope(("src/**",))


@pytest.mark.parametrize(
    "text",
    [
        "Please do not touch anything.",
        "  Write scope: src/**",  # not at the very start of the line
        "> Write scope: src/**",  # a block quote
        "   > Write scope: src/**",
        "```\nWrite scope: src/**\n```",  # a code fence
        "~~~text\nWrite scope: src/**\n~~~",
        "````\n```\nWrite scope: src/**\n```\n````",  # a longer fence holds a shorter one
        "Do not use Write scope: src/**",  # quoted or negated in prose
        "No write scope: src/**",
        "The scope of the write: src/**",
    ],
)
def test_quoted_fenced_negated_and_indented_text_declares_nothing(text: str) -> None:
    assert parse_write_scope(text) is None


def test_after_a_fence_closes_lines_count_again() -> None:
    text = "```\nWrite scope: nope/**\n```\nWrite scope: src/**"
    assert parse_write_scope(text) == WriteScope(("src/**",))


def test_several_lines_add_up_without_repeats() -> None:
    text = "Write scope: src/**\nmore words\nwrite scope: src/**; docs/**"
    assert parse_write_scope(text) == WriteScope(("src/**", "docs/**"))


@given(parts=st.lists(_PATH, min_size=1, max_size=5), separators=st.data())
def test_any_mix_of_separators_and_spaces_gives_the_same_patterns(
    parts: list[str], separators: st.DataObject
) -> None:
    glue = [separators.draw(st.sampled_from([",", ";", " , ", " ; ", ",  "])) for _ in parts[1:]]
    line = parts[0] + "".join(sep + part for sep, part in zip(glue, parts[1:], strict=True))
    scope = parse_write_scope(f"Write scope: {line}")
    assert scope is not None
    assert scope.patterns == tuple(dict.fromkeys(normalize_pattern(part) for part in parts))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("/etc/passwd", "repository-relative"),
        ("~/notes", "repository-relative"),
        ("C:/src", "repository-relative"),
        ("src/../../x", "leaves its directory"),
        ("src/[ab].py", "characters"),
        ("!src/**", "characters"),
        ("src/a**", "whole path component"),
    ],
)
def test_a_malformed_entry_is_an_error_not_dropped(entry: str, problem: str) -> None:
    with pytest.raises(ScopeError, match=problem):
        parse_write_scope(f"Write scope: {entry}")


@pytest.mark.parametrize(
    ("pattern", "claim", "covered"),
    [
        ("src/**", "src/a.py", True),
        ("src/**", "src/deep/er/a.py", True),
        ("src/**", "src", True),
        ("src/**", "srcx/a.py", False),
        ("src/*", "src/a.py", True),
        ("src/*", "src/a/b.py", False),
        ("src/*", "src/**", False),  # a wildcard claim cannot widen a narrower scope
        ("src/*", "src/*", True),
        ("src/**", "src/*/x.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a.txt", False),
        ("src/*.py", "src/*", False),
        ("**", "anything/at/all", True),
        ("**", "**", True),
        ("src/**", "**", False),
        ("src/**/test_*.py", "src/a/b/test_x.py", True),
        ("src/**/test_*.py", "src/a/b/x.py", False),
        ("docs/index.md", "docs/index.md", True),
        ("docs/index.md", "docs/other.md", False),
    ],
)
def test_containment_is_component_aware(pattern: str, claim: str, covered: bool) -> None:
    assert covers(pattern, claim) is covered


@given(path=_PATH)
def test_a_recursive_scope_covers_everything_below_it(path: str) -> None:
    assert covers("pkg/**", f"pkg/{path}")
    assert not covers("pkg/**", f"other/{path}")


@given(pattern=_PATH, claim=_PATH)
def test_a_literal_path_covers_only_itself(pattern: str, claim: str) -> None:
    assert covers(pattern, claim) is (normalize_pattern(pattern) == normalize_pattern(claim))


def test_outside_lists_the_changed_files_no_pattern_covers() -> None:
    scope = WriteScope(("src/**", "README.md"))
    assert outside(scope, ["src/a.py", "README.md", "setup.py", "tests/t.py", "setup.py"]) == [
        "setup.py",
        "tests/t.py",
    ]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "docs").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "escape")
    os.symlink(root / "src", root / "inside")
    return root


def test_existing_files_and_directories_are_eligible_and_a_directory_covers_what_is_below(tree: Path) -> None:
    scope = ground_scope(tree, ["src", "src/pkg/mod.py", "docs/**", "src/*/mod.py"])
    assert scope.patterns == ("src/**", "src/pkg/mod.py", "docs/**", "src/*/mod.py")


def test_a_new_file_is_eligible_only_where_its_parent_exists(tree: Path) -> None:
    assert ground_scope(tree, ["docs/new.md"]).patterns == ("docs/new.md",)
    with pytest.raises(ScopeError, match="does not exist"):
        ground_scope(tree, ["missing/new.md"])
    with pytest.raises(ScopeError, match="does not exist"):
        ground_scope(tree, ["missing/**"])


def test_a_scope_through_a_symlink_leaving_the_repository_is_refused(tree: Path) -> None:
    with pytest.raises(ScopeError, match="outside the repository"):
        ground_scope(tree, ["escape/**"])
    with pytest.raises(ScopeError, match="outside the repository"):
        ground_scope(tree, ["escape/new.txt"])
    assert ground_scope(tree, ["inside/**"]).patterns == ("inside/**",)


def test_the_whole_repository_can_be_declared(tree: Path) -> None:
    assert ground_scope(tree, ["**"]).patterns == ("**",)
    assert parse_write_scope("Write scope: ./") == WriteScope(("**",))
