"""Refs read from the ref files: always what ``git for-each-ref`` lists, or no answer (git is asked)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.parallel import commit_everything as _commit
from support.parallel import git as _git

from autodev.workspace.git import GitRepo
from autodev.workspace.refs import read_refs

PREFIXES = ("refs/heads/", "refs/tags/", "refs/autodev/")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    _commit(root, "one")
    (root / "a.txt").write_text("b\n")
    _commit(root, "two")
    _git(root, "branch", "feature/deep/name", "HEAD~1")
    _git(root, "tag", "light")
    _git(root, "tag", "-a", "annotated", "-m", "note", "HEAD~1")
    _git(root, "update-ref", "refs/autodev/tasks/1.2", "HEAD")
    _git(root, "update-ref", "refs/other/hidden", "HEAD")
    return root


def _listed_by_git(root: Path, prefixes: tuple[str, ...] = PREFIXES) -> dict[str, str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)", *prefixes],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_loose_refs_are_listed_as_git_lists_them(repo: Path) -> None:
    assert read_refs(repo / ".git", PREFIXES) == _listed_by_git(repo)
    assert "refs/other/hidden" not in (read_refs(repo / ".git", PREFIXES) or {})


def test_packed_refs_and_loose_ones_over_them(repo: Path) -> None:
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "tags" / "annotated").exists()
    assert read_refs(repo / ".git", PREFIXES) == _listed_by_git(repo)
    # A loose ref written after packing wins over its packed line, as in git.
    parent = _git(repo, "rev-parse", "HEAD~1").strip()
    _git(repo, "update-ref", "refs/heads/main", parent)
    listed = read_refs(repo / ".git", PREFIXES)
    assert listed == _listed_by_git(repo)
    assert listed is not None and listed["refs/heads/main"] == parent


def test_a_deleted_packed_ref_is_gone(repo: Path) -> None:
    _git(repo, "pack-refs", "--all")
    _git(repo, "update-ref", "-d", "refs/heads/feature/deep/name")
    assert read_refs(repo / ".git", PREFIXES) == _listed_by_git(repo)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("refs/heads/pointer", "ref: refs/heads/main\n"),  # a symbolic ref
        ("refs/heads/broken", "not an object id\n"),
        ("refs/tags/.hidden", None),  # a name git refuses
    ],
)
def test_what_only_git_can_tell_gets_no_answer(repo: Path, name: str, content: str | None) -> None:
    path = repo / ".git" / name
    path.write_text(content or _git(repo, "rev-parse", "HEAD"))
    assert read_refs(repo / ".git", PREFIXES) is None


def test_a_reftable_repository_gets_no_answer(tmp_path: Path) -> None:
    (tmp_path / "reftable").mkdir()
    assert read_refs(tmp_path, PREFIXES) is None


def test_a_ref_being_written_keeps_its_value(repo: Path) -> None:
    before = read_refs(repo / ".git", PREFIXES)
    (repo / ".git" / "refs" / "heads" / "main.lock").write_text("0" * 40 + "\n")
    assert read_refs(repo / ".git", PREFIXES) == before


@pytest.mark.asyncio
async def test_the_repository_asks_git_when_the_files_do_not_tell(repo: Path) -> None:
    git = GitRepo(repo)
    (repo / ".git" / "refs" / "heads" / "pointer").write_text("ref: refs/heads/main\n")
    assert await git.refs_under_all(PREFIXES) == _listed_by_git(repo)
    (repo / ".git" / "refs" / "heads" / "pointer").unlink()
    assert await git.refs_under_all(PREFIXES) == _listed_by_git(repo)
