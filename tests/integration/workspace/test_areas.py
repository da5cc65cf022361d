"""Area maps in a notes file, checked against a real repository with real commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.parallel import commit_everything, git, git_repo

from autodev.errors import AutodevError
from autodev.workspace.areas import (
    Area,
    area_prompt_block,
    areas_for_files,
    check_area,
    find_area,
    mark_area,
    notes_file,
    read_areas,
    refresh_task_id,
)

NOTES = """# Project notes

Some text.

## Areas

### Parser
- Code map: `parse_item` in src/parse.py, `Token`
  in src/lex.py, `Lexer`
- Test recipe: run `pytest tests/test_parse.py -q` after any change
- Paths: src/parse.py src/lex.py
- Checked: {checked}

#### Not an area: a deeper heading

### CLI tools
- Code map: `main`
- Test recipe: `make check`

## Later section

### Not an area either
- Code map: `ghost`
"""


def _repo(tmp_path: Path, checked: str = "") -> Path:
    root = git_repo(
        tmp_path / "repo",
        {
            "src/parse.py": "def parse_item():\n    return Token()\n",
            "src/lex.py": "class Token:\n    pass\n\n\nclass Lexer:\n    pass\n",
            "src/cli.py": "def main():\n    pass\n",
        },
    )
    (root / "AGENTS.md").write_text(NOTES.format(checked=checked))
    commit_everything(root, "notes")
    return root


def _area(root: Path, name: str = "Parser") -> Area:
    return find_area(read_areas(notes_file(root, None)), name)


def test_the_areas_section_is_read_with_its_fields_and_nothing_outside_it(tmp_path: Path) -> None:
    root = _repo(tmp_path, checked="abc1234 (by the last refresh)")

    areas = read_areas(notes_file(root, None))

    assert [area.name for area in areas] == ["Parser", "CLI tools"]
    parser, cli = areas
    assert parser.anchors == ("parse_item", "Token", "Lexer")
    assert parser.paths == ("src/parse.py", "src/lex.py")
    assert parser.checked == "abc1234"
    assert parser.test_argv() == ("pytest", "tests/test_parse.py", "-q")
    assert (cli.slug, cli.paths, cli.checked, cli.test_argv()) == ("cli-tools", (), None, ("make", "check"))


def test_the_notes_file_is_the_configured_one_else_agents_md_else_claude_md(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("## Areas\n")
    assert notes_file(tmp_path, None) == tmp_path / "CLAUDE.md"
    (tmp_path / "AGENTS.md").write_text("")
    assert notes_file(tmp_path, None) == tmp_path / "AGENTS.md"
    assert notes_file(tmp_path, "docs/MAP.md") is None
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "MAP.md").write_text("")
    assert notes_file(tmp_path, "docs/MAP.md") == tmp_path / "docs" / "MAP.md"
    assert read_areas(None) == []
    assert read_areas(tmp_path / "AGENTS.md") == []


def test_an_anchor_is_missing_when_its_paths_no_longer_hold_it(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert check_area(root, _area(root), stale_commits=20).missing == ()

    (root / "src" / "lex.py").write_text("class Token:\n    pass\n")  # Lexer gone
    (root / "src" / "other.py").write_text("Lexer = None\n")  # outside the area's paths: does not count
    commit_everything(root, "drop the lexer")

    report = check_area(root, _area(root), stale_commits=20)
    assert report.missing == ("Lexer",)
    assert report.stale
    assert "missing anchors: `Lexer`" in report.line()
    # An area without Paths looks through the whole repository.
    assert check_area(root, _area(root, "cli tools"), stale_commits=20).missing == ()


def test_commits_on_its_paths_since_checked_make_an_area_stale(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    checked = git(root, "rev-parse", "--short", "HEAD").strip()
    (root / "AGENTS.md").write_text(NOTES.format(checked=checked))
    commit_everything(root, "mark")
    for n in range(3):
        (root / "src" / "parse.py").write_text(f"def parse_item():\n    return Token()  # {n}\n")
        commit_everything(root, f"parser change {n}")
        (root / "src" / "cli.py").write_text(f"def main():\n    return {n}\n")  # not the parser's paths
        commit_everything(root, f"cli change {n}")

    report = check_area(root, _area(root), stale_commits=3)
    assert (report.commits_since, report.stale) == (3, True)
    assert not check_area(root, _area(root), stale_commits=4).stale
    assert f"3 commit(s) on its paths since {checked}" in report.line()


def test_an_unknown_checked_commit_is_reported_and_only_the_anchors_decide(tmp_path: Path) -> None:
    root = _repo(tmp_path, checked="deadbee")

    report = check_area(root, _area(root), stale_commits=1)

    assert report.unknown_checked and report.commits_since is None and not report.stale
    assert "Checked deadbee is not a commit of this repository" in report.line()


def test_mark_writes_heads_sha_into_the_area_and_leaves_the_rest_alone(tmp_path: Path) -> None:
    root = _repo(tmp_path, checked="deadbee")
    notes = root / "AGENTS.md"
    head = git(root, "rev-parse", "--short", "HEAD").strip()

    assert mark_area(notes, "parser", root) == head
    assert notes.read_text() == NOTES.format(checked=head)
    # An area without the line gets one, after its last line.
    mark_area(notes, "CLI tools", root)
    text = notes.read_text()
    assert f"- Test recipe: `make check`\n- Checked: {head}\n\n## Later section" in text
    assert _area(root, "cli tools").checked == head
    assert check_area(root, _area(root), stale_commits=1).commits_since == 0


def test_an_unknown_area_is_an_error_naming_the_known_ones(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    with pytest.raises(AutodevError, match=r"no area 'ghost'.*areas: Parser, CLI tools"):
        _area(root, "ghost")


@pytest.mark.parametrize(
    ("paths", "path", "covered"),
    [
        ((), "anything/at/all.py", True),
        (("src/parse.py",), "src/parse.py", True),
        (("src",), "src/deep/file.py", True),
        (("src/*.py",), "src/deep/file.py", False),
        (("src/**/*.py",), "src/deep/file.py", True),
        (("src/**/*.py",), "src/file.py", True),
        (("tests/test_parse*",), "tests/test_parse_more.py", True),
        (("tests/test_parse*",), "tests/other.py", False),
    ],
)
def test_an_areas_paths_are_git_globs(paths: tuple[str, ...], path: str, covered: bool) -> None:
    area = Area("a", (), None, paths, None, 1)
    assert area.covers(path) is covered
    assert (areas_for_files([area], [path]) == [area]) is covered


def test_the_prompt_block_and_the_refresh_ids(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    parser = _area(root)

    block = area_prompt_block([parser], "AGENTS.md")
    assert block.startswith("AREA MAPS (from AGENTS.md)")
    assert "code map: `parse_item`, `Token`, `Lexer`" in block
    assert area_prompt_block([], "AGENTS.md") == ""
    assert refresh_task_id(parser, ["1.1"]) == "t-map-parser"
    assert refresh_task_id(parser, ["t-map-parser", "T-MAP-PARSER-2"]) == "t-map-parser-3"


@pytest.mark.parametrize(
    "recipe",
    [
        "`cd web && npm test`",
        "`PYTHONPATH=src pytest`",
        "`pytest | tee log`",
        "`pytest $(cat args)`",
        "`a; b`",
    ],
)
def test_a_recipe_that_needs_a_shell_is_no_test_command(recipe: str) -> None:
    assert Area("a", (), recipe, (), None, 1).test_argv() is None


def test_marking_a_linked_notes_file_keeps_the_link(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "CLAUDE.md").write_text((root / "AGENTS.md").read_text())
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").symlink_to("CLAUDE.md")

    mark_area(root / "AGENTS.md", "Parser", root)

    assert (root / "AGENTS.md").is_symlink()
    assert "- Checked: " in (root / "CLAUDE.md").read_text()
