"""How far the checkout is from the branch it should build on: a stale base, told rather than hidden.

A run works on whatever the checkout holds; when that is months behind the project's main line, every task
builds on old code and its change conflicts later. The base is the best ref there is to compare with: the
branch's tracked upstream, else ``origin/HEAD``, else ``origin/main`` or ``origin/master``, else a local
``main`` or ``master`` other than the branch itself. Against it the check reports how many commits the
checkout is ahead and behind, how old the ref's newest commit is, and whether the ref was fetched just
now, could not be fetched (why), or was not fetched at all: a ref that was not fetched may be older than the
remote, and the report says so instead of presenting it as current.

``refresh`` is the only thing that ever moves the branch for it: a strict fast-forward that refuses a dirty
tree and any local commit the base does not hold, so a warning can never cost work.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from autodev.workspace.git import GitRepo

__all__ = ["BaseFreshness", "FetchOutcome", "check_base", "refresh_onto_base"]

FetchOutcome = Literal["succeeded", "failed", "not_attempted"]
_REMOTE_DEFAULTS = ("origin/main", "origin/master")
_LOCAL_DEFAULTS = ("main", "master")


@dataclass(frozen=True, slots=True)
class BaseFreshness:
    """The checkout against its base ref; ``ref`` None when there is nothing to compare with."""

    ref: str | None
    source: str
    ref_commit: str | None = None
    ahead: int = 0
    behind: int = 0
    ref_age_s: float | None = None
    fetch: FetchOutcome = "not_attempted"
    fetch_detail: str = ""
    threshold: int = 0

    @property
    def stale(self) -> bool:
        """At least ``threshold`` commits behind its base (a threshold of 0 never is)."""
        return self.ref is not None and self.threshold > 0 and self.behind >= self.threshold

    def line(self) -> str:
        """One line for the user and the agents' context."""
        if self.ref is None:
            return f"base: none to compare with ({self.source})"
        age = f"; its newest commit is {_age(self.ref_age_s)} old" if self.ref_age_s is not None else ""
        fetched = {
            "succeeded": "fetched just now",
            "failed": f"could not be fetched ({self.fetch_detail}), so the remote may be further ahead",
            "not_attempted": "not fetched now, so the remote may be further ahead",
        }[self.fetch]
        return (
            f"base: {self.behind} commit(s) behind and {self.ahead} ahead of {self.ref} ({self.source}{age}; "
            f"{fetched})"
        )

    def record(self) -> dict[str, Any]:
        """The check as a ledger record."""
        return {**asdict(self), "stale": self.stale}


async def check_base(
    git: GitRepo, *, fetch: bool, fetch_timeout_s: float, threshold: int, now: float | None = None
) -> BaseFreshness:
    """Measure the checkout against its base ref (module docstring), fetching that ref first when ``fetch``
    and it is a remote's."""
    ref, source, remote = await _base_ref(git)
    if ref is None:
        return BaseFreshness(None, source, threshold=threshold)
    outcome: FetchOutcome = "not_attempted"
    detail = ""
    if fetch and remote is not None:
        failure = await git.fetch(remote, ref.split("/", 1)[1], timeout_s=fetch_timeout_s)
        outcome, detail = ("failed", failure) if failure is not None else ("succeeded", "")
    commit = await git.resolve(ref)
    counts = await git.query("rev-list", "--left-right", "--count", f"HEAD...{ref}")
    ahead, behind = (int(part) for part in counts.split()) if counts else (0, 0)
    stamp = await git.query("log", "-1", "--format=%ct", ref)
    age = max(0.0, (now if now is not None else time.time()) - int(stamp)) if stamp else None
    return BaseFreshness(ref, source, commit, ahead, behind, age, outcome, detail, threshold)


async def refresh_onto_base(git: GitRepo, base: BaseFreshness) -> str:
    """Fast-forward the checked-out branch to ``base``'s ref; what was done, in one line. Raises
    ``ValueError`` (one line, what to do) for a dirty tree, local commits the base lacks, or no base."""
    if base.ref is None or base.ref_commit is None:
        raise ValueError(f"there is no base to refresh onto ({base.source})")
    if base.ahead:
        raise ValueError(
            f"{base.ahead} local commit(s) are not in {base.ref}; a fast-forward would not keep them: merge "
            f"or rebase them yourself (`git rebase {base.ref}`)"
        )
    if not base.behind:
        return f"already up to date with {base.ref}"
    dirty = await git.dirty_paths()
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
        raise ValueError(f"the checkout has uncommitted changes ({shown}); commit or stash them first")
    if not await git.fast_forward(base.ref_commit):
        raise ValueError(f"git refused to fast-forward to {base.ref}; nothing was changed")
    return f"fast-forwarded {base.behind} commit(s) to {base.ref} ({base.ref_commit[:12]})"


async def _base_ref(git: GitRepo) -> tuple[str | None, str, str | None]:
    """(the base ref, where it came from, the remote to fetch it from, if any)."""
    branch = await git.query("symbolic-ref", "-q", "--short", "HEAD")
    if branch is not None:
        upstream = await git.query("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
        remote = await git.query("config", "--get", f"branch.{branch}.remote")
        if upstream and remote and remote != "." and upstream.startswith(f"{remote}/"):
            return upstream, "tracked upstream", remote
        if upstream and remote == ".":
            return upstream, "tracked upstream", None
    origin_head = await git.query("symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD")
    if origin_head:
        return origin_head, "origin/HEAD", "origin"
    for ref in _REMOTE_DEFAULTS:
        if await git.resolve(f"refs/remotes/{ref}") is not None:
            return ref, "the remote's conventional default", "origin"
    for name in _LOCAL_DEFAULTS:
        if name != branch and await git.resolve(f"refs/heads/{name}") is not None:
            return name, "a conventional local default", None
    return None, "no upstream, no origin, and no main or master branch besides this one", None


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "under a minute"
