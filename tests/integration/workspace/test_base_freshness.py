"""The checkout against its base ref, with real git and a real (on-disk) remote: which ref is the base, the
ahead/behind counts, the ref's age, and whether it was fetched; the strict fast-forward that refreshes it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.parallel import git, git_repo
from support.remotes import bare_origin_of, push_from_elsewhere

from autodev.workspace.base_freshness import BaseFreshness, check_base, refresh_onto_base
from autodev.workspace.git import GitRepo


def _check(root: Path, *, fetch: bool, threshold: int = 2) -> BaseFreshness:
    return anyio.run(lambda: check_base(GitRepo(root), fetch=fetch, fetch_timeout_s=10, threshold=threshold))


@pytest.fixture
def behind(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout tracking origin/<branch>, with three commits pushed to origin since it last fetched."""
    repo = git_repo(tmp_path / "repo")
    origin = bare_origin_of(repo, tmp_path / "origin.git")
    push_from_elsewhere(origin, tmp_path / "elsewhere", 3)
    return repo, origin


def test_an_unfetched_ref_is_compared_as_it_is_and_said_to_be_possibly_behind(
    behind: tuple[Path, Path],
) -> None:
    repo, _ = behind

    base = _check(repo, fetch=False)

    assert base.source == "tracked upstream" and base.ref is not None and base.ref.startswith("origin/")
    assert (base.ahead, base.behind, base.fetch) == (0, 0, "not_attempted")
    assert not base.stale
    assert "not fetched now, so the remote may be further ahead" in base.line()


def test_a_fetch_shows_how_far_behind_the_checkout_is_and_how_old_the_ref_is(
    behind: tuple[Path, Path],
) -> None:
    repo, _ = behind
    git(repo, "commit", "-q", "--allow-empty", "-m", "local work")

    base = _check(repo, fetch=True)

    assert (base.ahead, base.behind, base.fetch) == (1, 3, "succeeded")
    assert base.stale and base.ref_commit is not None
    assert base.ref_age_s is not None and 0 <= base.ref_age_s < 3600
    assert base.line().startswith(f"base: 3 commit(s) behind and 1 ahead of {base.ref} (tracked upstream;")
    assert "fetched just now" in base.line()
    # The record the ledger keeps says the same.
    assert base.record()["stale"] is True and base.record()["behind"] == 3


def test_a_fetch_that_fails_is_said_and_the_ref_at_hand_is_compared(
    behind: tuple[Path, Path], tmp_path: Path
) -> None:
    repo, _ = behind
    git(repo, "remote", "set-url", "origin", str(tmp_path / "gone.git"))

    base = _check(repo, fetch=True)

    assert base.fetch == "failed" and base.fetch_detail
    assert base.behind == 0 and "could not be fetched" in base.line()


def test_without_an_upstream_origin_head_then_a_local_main_is_the_base(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    git(repo, "branch", "-q", "-M", "main")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "checkout", "-q", "main")
    for n in range(2):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"main {n}")
    git(repo, "checkout", "-q", "feature")

    local = _check(repo, fetch=True)

    assert (local.ref, local.source, local.behind) == ("main", "a conventional local default", 2)
    assert local.fetch == "not_attempted"  # nothing to fetch a local branch from
    # With a remote whose HEAD is known (and no upstream for this branch), origin/HEAD wins.
    git(repo, "checkout", "-q", "main")
    bare_origin_of(repo, tmp_path / "origin.git")
    git(repo, "checkout", "-q", "feature")
    remote = _check(repo, fetch=False)
    assert (remote.ref, remote.source) == ("origin/main", "origin/HEAD")


def test_a_lone_repository_has_no_base_and_says_why(tmp_path: Path) -> None:
    base = _check(git_repo(tmp_path / "repo"), fetch=True)

    assert base.ref is None and not base.stale
    assert base.line().startswith("base: none to compare with (no upstream")


def test_refresh_is_a_strict_fast_forward(behind: tuple[Path, Path], tmp_path: Path) -> None:
    repo, origin = behind
    base = _check(repo, fetch=True)
    (repo / "README.md").write_text("edited\n")
    with pytest.raises(ValueError, match="uncommitted changes"):
        anyio.run(refresh_onto_base, GitRepo(repo), base)
    git(repo, "checkout", "-q", "--", "README.md")

    done = anyio.run(refresh_onto_base, GitRepo(repo), base)

    assert done.startswith("fast-forwarded 3 commit(s) to origin/")
    assert (repo / "upstream_2.txt").exists()
    assert _check(repo, fetch=False).behind == 0
    # Local history the base lacks is never dropped.
    git(repo, "commit", "-q", "--allow-empty", "-m", "mine")
    push_from_elsewhere(origin, tmp_path / "elsewhere2", 1, prefix="later")
    ahead = _check(repo, fetch=True)
    with pytest.raises(ValueError, match="1 local commit"):
        anyio.run(refresh_onto_base, GitRepo(repo), ahead)
    assert "mine" in git(repo, "log", "-1", "--format=%s")
