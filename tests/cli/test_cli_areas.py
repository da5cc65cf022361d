"""``autodev areas`` through the installed executable, on a repository with real commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_clean_error, autodev
from support.parallel import commit_everything, git, git_repo

NOTES = """# Notes

## Areas

### Core
- Code map: `double`, `halve`
- Test recipe: `pytest tests -q`
- Paths: src

### Docs
- Code map: `Usage`
- Paths: README.md
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = git_repo(
        tmp_path / "repo", {"src/core.py": "def double(x):\n    return 2 * x\n", "README.md": "Usage\n"}
    )
    (root / "AGENTS.md").write_text(NOTES)
    commit_everything(root, "notes")
    return root


def test_areas_reports_each_area_and_says_which_are_stale(repo: Path) -> None:
    result = autodev(repo, "areas")

    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "Core: stale · missing anchors: `halve` · never checked",
        "Docs: not stale · 1 anchor(s) found · never checked",
    ]
    assert autodev(repo, "areas", "docs").out.splitlines() == [result.out.splitlines()[1]]


def test_mark_records_head_and_the_json_report_shows_it(repo: Path) -> None:
    head = git(repo, "rev-parse", "--short", "HEAD").strip()

    marked = autodev(repo, "areas", "--mark", "Docs")

    assert marked.code == 0, marked.err
    assert marked.out.strip() == f"Docs: Checked: {head} written to AGENTS.md"
    assert f"- Paths: README.md\n- Checked: {head}\n" in (repo / "AGENTS.md").read_text()
    (docs,) = json.loads(autodev(repo, "areas", "docs", "--json").out)["areas"]
    assert docs == {
        "area": "Docs",
        "slug": "docs",
        "stale": False,
        "missing_anchors": [],
        "checked": head,
        "unknown_checked": False,
        "commits_since_checked": 0,
        "paths": ["README.md"],
        "test_recipe": None,
    }


def test_a_configured_notes_file_is_read_instead(repo: Path) -> None:
    (repo / "docs").mkdir()
    (repo / "docs" / "MAP.md").write_text("## Areas\n### Only\n- Code map: `double`\n")
    (repo / ".autodev").mkdir(exist_ok=True)
    (repo / ".autodev" / "config.toml").write_text('areas = "docs/MAP.md"\n')

    assert autodev(repo, "areas").out.splitlines() == ["Only: not stale · 1 anchor(s) found · never checked"]


@pytest.mark.parametrize(
    "args",
    [("areas", "ghost"), ("areas", "--mark", "ghost"), ("areas", "--mark")],
)
def test_a_bad_request_is_one_line_and_changes_nothing(repo: Path, args: tuple[str, ...]) -> None:
    before = (repo / "AGENTS.md").read_text()

    result = autodev(repo, *args)

    assert_clean_error(result)
    assert (repo / "AGENTS.md").read_text() == before


def test_without_a_notes_file_areas_says_where_maps_live(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "bare")

    result = autodev(root, "areas")

    assert_clean_error(result)
    assert "AGENTS.md or CLAUDE.md" in result.err


@pytest.mark.parametrize("value", ["/etc/AGENTS.md", "../AGENTS.md"])
def test_a_notes_file_outside_the_repository_is_a_config_error(repo: Path, value: str) -> None:
    (repo / ".autodev").mkdir(exist_ok=True)
    (repo / ".autodev" / "config.toml").write_text(f'areas = "{value}"\n')

    result = autodev(repo, "areas")

    assert_clean_error(result)
    assert "areas" in result.err and "relative to the repository root" in result.err
