"""detect_languages: which gates a repository gets, from the files that make it a project."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodev.qa import LANGUAGES, detect_languages


def _touch(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (["pyproject.toml"], ["python"]),
        (["setup.py"], ["python"]),
        (["setup.cfg"], ["python"]),
        (["scripts/tools/run.py"], ["python"]),
        (["package.json"], ["nodejs"]),
        (["Cargo.toml"], ["rust"]),
        (["go.mod"], ["go"]),
        (["go.work"], ["go"]),
    ],
)
def test_each_language_is_recognised_by_its_project_file(
    repo: Path, files: list[str], expected: list[str]
) -> None:
    _touch(repo, *files)

    assert detect_languages(repo) == expected


def test_languages_come_in_a_fixed_order_whatever_the_files(repo: Path) -> None:
    _touch(repo, "go.mod", "Cargo.toml", "package.json", "tool.py")

    assert detect_languages(repo) == list(LANGUAGES) == ["python", "nodejs", "rust", "go"]


def test_a_repository_without_a_known_project_has_no_language(repo: Path) -> None:
    _touch(repo, "README.md", "docs/index.md", "Makefile")

    assert detect_languages(repo) == []


@pytest.mark.parametrize(
    "ignored", [".autodev", ".git", "node_modules", ".venv", "venv", "target", "__pycache__", ".tox"]
)
def test_python_files_in_ignored_trees_do_not_make_a_python_project(repo: Path, ignored: str) -> None:
    _touch(repo, "package.json", f"{ignored}/deep/inside/helper.py")

    assert detect_languages(repo) == ["nodejs"]


def test_project_files_below_the_root_do_not_count_for_root_run_toolchains(repo: Path) -> None:
    # `npm test`, `cargo build` and `go build ./...` run at the root; a nested project is not the root's.
    _touch(repo, "web/package.json", "crates/x/Cargo.toml", "tools/go.mod")

    assert detect_languages(repo) == []


def test_a_directory_named_like_a_project_file_is_not_one(repo: Path) -> None:
    (repo / "package.json").mkdir()
    (repo / "go.mod").mkdir()

    assert detect_languages(repo) == []


def test_links_out_of_the_repository_are_not_followed(tmp_path: Path, repo: Path) -> None:
    outside = tmp_path / "outside"
    _touch(outside, "lib/module.py")
    (repo / "linked").symlink_to(outside, target_is_directory=True)

    assert detect_languages(repo) == []
