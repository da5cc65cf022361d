"""Git as the evidence of what changed: diffs against a task's base commit, and one commit per finished task.

What a developer agent says it changed is never trusted; the change is read from git. Diffs include untracked
files without touching the user's index: they are computed through a throw-away index file
(``GIT_INDEX_FILE``) seeded from the real one. AutoDev's own ``.autodev/`` directory is always excluded.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.errors import AutodevError
from autodev.files import read_bounded
from autodev.gitsafety import HARDENED_CONFIG
from autodev.logging import get_logger

__all__ = ["GitError", "GitRepo", "WorkingDiff", "read_head_file", "run_git"]

_EXCLUDE_STATE = ":(exclude).autodev"
_ALL_BUT_STATE = ("--", ".", _EXCLUDE_STATE)
_HEAD_FILE_LIMIT = 4096
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Used only when the repository has no identity configured, so that auto-commit works on fresh machines.
_FALLBACK_IDENTITY = ("-c", "user.name=AutoDev", "-c", "user.email=autodev@localhost")
# Sub-commands that would run a textconv or external diff driver from .gitattributes otherwise.
_DIFFING = frozenset({"diff", "log", "show"})


def _git_running_in(root: Path) -> bool:
    """Whether any git process has its working directory inside ``root`` (read from /proc)."""
    resolved = root.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            cwd = (entry / "cwd").resolve()
        except OSError:
            continue
        if name.startswith("git") and (cwd == resolved or resolved in cwd.parents):
            return True
    return False


_log = get_logger("autodev.git")

# Each of AutoDev's many commits and merges would start ``git maintenance run --auto`` (a process every
# time, a repack now and then, in the middle of a task); AutoDev runs it once at the end of a phase instead
# (``GitRepo.maintain``), with the repository's own thresholds.
_NO_AUTO_MAINTENANCE = ("-c", "maintenance.auto=false")
_UNNOTED = "<not moved by AutoDev>"  # no ref has this value: git refuses such a name


async def run_git(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command to completion in a worker thread.

    A thread rather than an event-loop subprocess: the loop stays free while many tasks run git at once
    (measured about a third faster here), and a cancelled caller waits for the short git command to end
    instead of killing it half way through writing its index or a ref. ``timeout_s`` still kills it. For the
    same reason git runs in a process group of its own: the Ctrl-C a terminal sends to AutoDev's group
    reaches AutoDev, which stops in order, and not git half way through a write (it died of the SIGINT, and
    the task it worked for was blocked for "git failed").
    """
    command = ["git", *HARDENED_CONFIG, *_NO_AUTO_MAINTENANCE, *_without_drivers(args)]

    def run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            command,
            cwd=cwd,
            env=dict(env),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            check=False,
            process_group=0,
        )

    try:
        return await anyio.to_thread.run_sync(run)
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {' '.join(args[:3])} did not finish within {timeout_s:.0f}s") from exc
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH; install git and try again") from exc


def _git_dir_on_disk(root: Path) -> Path | None:
    """The git directory ``root/.git`` is or names (a worktree's ``gitdir:`` file), as ``git rev-parse
    --absolute-git-dir`` gives it, read without starting git: a task's working copies are asked for it
    again and again. None when only git can tell (``GIT_DIR`` set, no ``.git``, anything unusual)."""
    if "GIT_DIR" in os.environ:
        return None
    dot_git = root / ".git"
    try:
        found = os.lstat(dot_git)
        if stat.S_ISDIR(found.st_mode):
            directory = dot_git
        elif stat.S_ISREG(found.st_mode) and found.st_size <= _HEAD_FILE_LIMIT:
            text = dot_git.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir: ") or "\n" in text:
                return None
            directory = root / text.removeprefix("gitdir: ")
        else:
            return None
        resolved = Path(os.path.realpath(directory))
        return resolved if stat.S_ISREG(os.stat(resolved / "HEAD").st_mode) else None
    except (OSError, UnicodeDecodeError):
        return None


def read_head_file(git_dir: Path) -> str:
    """The content of ``git_dir/HEAD`` ("ref: refs/heads/x" or a commit id), or "" when it cannot be read.

    Read without blocking and only from a regular file: an agent may have put a FIFO or a device there.
    """
    try:
        data = read_bounded(
            git_dir / "HEAD",
            limit=_HEAD_FILE_LIMIT,
            what="git's HEAD file",
            follow_symlinks=True,
            error=lambda message: GitError(message),
        )
    except (GitError, OSError):
        return ""
    return data.decode("utf-8", errors="replace").strip()


def _without_drivers(args: Sequence[str]) -> list[str]:
    """``args`` with external diff and textconv drivers off for the commands that would run them."""
    index = 0
    while index < len(args) and args[index] == "-c":
        index += 2  # ``-c key=value`` pairs come before the sub-command
    if index >= len(args) or args[index] not in _DIFFING:
        return list(args)
    return [*args[: index + 1], "--no-ext-diff", "--no-textconv", *args[index + 1 :]]


class GitError(AutodevError):
    """A git command failed; the message carries the command and git's own words."""


@dataclass(frozen=True, slots=True)
class WorkingDiff:
    """The working tree's change against a base commit: tracked and untracked files, binary-safe, and the
    id of the tree it was read from (what ``snapshot_tree`` gives at that moment)."""

    base: str
    patch: str
    files: tuple[str, ...]
    tree: str

    @property
    def is_empty(self) -> bool:
        return not self.files

    @property
    def size_bytes(self) -> int:
        return len(self.patch.encode("utf-8", errors="surrogateescape"))


@dataclass(frozen=True, slots=True)
class _GitOutput:
    code: int
    stdout: str
    stderr: str


class GitRepo:
    """Async wrapper over the ``git`` executable for one working tree (the main tree or a worktree)."""

    def __init__(self, root: Path, *, timeout_s: float = 120.0, like: GitRepo | None = None) -> None:
        self.root = Path(root)
        self.timeout_s = timeout_s
        # Looked up once: neither changes while AutoDev works, and a task asks for them many times.
        self._git_dir_path: Path | None = None
        self._common_dir_path: Path | None = None
        # A worktree shares its repository's configuration: ``like`` (that repository) lends its identity.
        self._like = like
        self._identity_args: tuple[str, ...] | None = None
        # Where AutoDev itself last moved each ref, and where it had put it before that (shared by every
        # GitRepo of one repository): a ref found elsewhere after an agent's call was moved by someone else
        # (``autodev.orchestrator.integrity``, through ``moved_by_autodev``).
        self.own_moves: dict[str, str | None] = like.own_moves if like is not None else {}
        self._own_before: dict[str, str | None] = like._own_before if like is not None else {}

    async def git_dir(self) -> Path:
        """The absolute git directory of this tree (``.git/worktrees/<name>`` for a worktree)."""
        if self._git_dir_path is None:
            self._git_dir_path = _git_dir_on_disk(self.root) or Path(
                (await self._run("rev-parse", "--absolute-git-dir")).stdout.strip()
            )
        return self._git_dir_path

    async def _run(
        self, *args: str, env: Mapping[str, str] | None = None, check: bool = True, stdin: bytes | None = None
    ) -> _GitOutput:
        # GIT_OPTIONAL_LOCKS=0: status and diff never take the index lock just to refresh stat data, so a
        # kill during them cannot leave a lock behind.
        full_env = {
            **os.environ,
            **(env or {}),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
        }
        result = await run_git(args, cwd=self.root, env=full_env, timeout_s=self.timeout_s, stdin=stdin)
        output = _GitOutput(
            result.returncode,
            result.stdout.decode("utf-8", errors="surrogateescape"),
            result.stderr.decode("utf-8", errors="replace"),
        )
        if check and output.code != 0:
            detail = " ".join(output.stderr.split())[:300] or f"exit code {output.code}"
            raise GitError(f"git {' '.join(args[:3])} failed in {self.root}: {detail}")
        return output

    async def maintain(self) -> None:
        """The housekeeping git would have started after AutoDev's commits (``git maintenance run
        --auto``: nothing unless the repository's thresholds are passed). Best effort: a failure is logged."""
        try:
            result = await self._run("maintenance", "run", "--auto", "--quiet", check=False)
        except GitError as exc:  # a timeout or no git: housekeeping must not fail finished work
            _log.warning("git.maintenance_failed", root=str(self.root), detail=str(exc))
            return
        if result.code != 0:
            _log.warning("git.maintenance_failed", root=str(self.root), detail=result.stderr.strip()[:300])

    async def clear_stale_locks(self) -> list[Path]:
        """Remove lock files a killed git left behind (``index.lock``, ``HEAD.lock``, ref locks).

        Only called under AutoDev's run lock, and only when no git process is running in this repository:
        a lock with no live git holding it can only be debris, and git refuses to work until it is gone.
        """
        git_dir = await self.git_dir()
        candidates = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "ORIG_HEAD.lock"]
        candidates += list((git_dir / "refs").rglob("*.lock"))
        # Worktrees (parallel tasks, tournament variants) keep their own index and HEAD.
        for worktree_dir in (git_dir / "worktrees").glob("*"):
            candidates += [worktree_dir / "index.lock", worktree_dir / "HEAD.lock"]
        stale = [path for path in candidates if path.exists()]
        if not stale or _git_running_in(self.root):
            return []
        for path in stale:
            path.unlink(missing_ok=True)
        return stale

    async def is_repository(self) -> bool:
        result = await self._run("rev-parse", "--is-inside-work-tree", check=False)
        return result.code == 0 and result.stdout.strip() == "true"

    async def head(self) -> str | None:
        """The commit HEAD points at, or None in a repository without commits."""
        try:
            content = read_head_file(await self.git_dir())
        except GitError:
            content = ""
        if _OBJECT_ID.fullmatch(content):
            return content  # a detached HEAD (a task's worktree) names its commit: no process needed
        result = await self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
        return result.stdout.strip() or None if result.code == 0 else None

    async def ensure_base_commit(self) -> str:
        """HEAD, creating an empty initial commit first in a repository that has none."""
        head = await self.head()
        if head is not None:
            return head
        await self._run(*await self._identity(), "commit", "--allow-empty", "-m", "autodev: initial commit")
        created = await self._note_head_moved()
        if created is None:
            raise GitError(f"could not create an initial commit in {self.root}")
        return created

    @contextmanager
    def _scratch_index(self, git_dir: Path) -> Iterator[dict[str, str]]:
        """The environment of git commands that stage into a throw-away copy of this tree's index."""
        with tempfile.TemporaryDirectory(prefix="autodev-index-") as tmp:
            index = Path(tmp) / "index"
            real_index = git_dir / "index"
            # Seeded from the real index: unchanged files keep their stat data and are not hashed again. The
            # copy keeps the index's mtime (copy2): git trusts an entry's stat data only when the entry is
            # older than the index file, and a copy stamped "now" would hide a file rewritten, at the same
            # size, within the timestamp granularity of its last staging ("racy git").
            if real_index.exists():
                shutil.copy2(real_index, index)
            yield {"GIT_INDEX_FILE": str(index)}

    async def _stage_everything(self, env: Mapping[str, str] | None = None) -> None:
        staged = await self._run("add", "-A", "--", ".", _EXCLUDE_STATE, env=env, check=False)
        if staged.code != 0 and "ignored by one of your .gitignore files" in staged.stderr:
            # A git-ignored ``.autodev`` that is a symbolic link makes git refuse the exclusion itself
            # ("paths are ignored"); ignored, it is left out without being named.
            staged = await self._run("add", "-A", "--", ".", env=env, check=False)
        if staged.code != 0:
            detail = " ".join(staged.stderr.split())[:300] or f"exit code {staged.code}"
            raise GitError(f"git add -A failed in {self.root}: {detail}")

    async def diff_against(self, base: str) -> WorkingDiff:
        """Everything in the working tree that differs from ``base``, untracked files included: staged
        once into a throw-away index and written as a tree, the diff read between ``base`` and that tree."""
        with self._scratch_index(await self.git_dir()) as env:
            await self._stage_everything(env)
            tree = (await self._run("write-tree", env=env)).stdout.strip()
        # One process for the names and the patch: with -z the raw part (":<modes> <ids> <status>\0<path>\0"
        # per file) ends at the first empty field, and the patch after it is byte for byte the plain one.
        out = (
            await self._run(
                "diff", "-z", "--patch-with-raw", "--binary", "--no-renames", base, tree, *_ALL_BUT_STATE
            )
        ).stdout
        end = out.find("\0\0")
        raw, patch = (out, "") if end < 0 else (out[: end + 1], out[end + 2 :])
        fields = raw.split("\0")
        files = tuple(
            sorted(path for meta, path in zip(fields[::2], fields[1::2], strict=False) if meta and path)
        )
        return WorkingDiff(base=base, patch=patch, files=files, tree=tree)

    async def snapshot_tree(self) -> str:
        """The id of the tree git would commit from the working tree now: tracked and untracked files,
        ignored ones and ``.autodev/`` excepted. Neither the user's index nor any ref changes; the
        snapshot's objects are written to the object store, so ``restore_from_tree`` can bring it back."""
        with self._scratch_index(await self.git_dir()) as env:
            await self._stage_everything(env)
            return (await self._run("write-tree", env=env)).stdout.strip()

    async def tree_of(self, commit: str) -> str:
        return (await self._run("rev-parse", f"{commit}^{{tree}}")).stdout.strip()

    async def changed_between(self, old: str, new: str) -> list[str]:
        """Paths whose content or mode differs between two trees (or commits)."""
        result = await self._run("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
        return sorted(name for name in result.stdout.split("\0") if name)

    async def restore_from_tree(self, tree: str, paths: Sequence[str]) -> None:
        """Put ``paths`` of the working tree back as ``tree`` has them; delete those it does not have."""
        if not paths:
            return
        listed = await self._run("ls-tree", "-r", "-z", "--name-only", tree, "--", *paths)
        present = [name for name in listed.stdout.split("\0") if name]
        if present:
            with self._scratch_index(await self.git_dir()) as env:
                await self._run("read-tree", tree, env=env)
                await self._run("checkout-index", "-f", "--", *present, env=env)
        for path in sorted(set(paths) - set(present)):
            target = self.root / path
            if target.is_file() or target.is_symlink():
                target.unlink()

    async def show_file(self, commit: str, path: str) -> bytes | None:
        """The content of ``path`` at ``commit``, or None when the commit has no such file."""
        result = await run_git(
            ["cat-file", "blob", f"{commit}:{path}"],
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"},
            timeout_s=self.timeout_s,
        )
        return result.stdout if result.returncode == 0 else None

    async def commit_all(self, message: str) -> str | None:
        """Commit every change in the working tree (not ``.autodev/``); None when there is nothing to commit.

        Hooks are skipped (``--no-verify``): AutoDev has already run its own gates on this change, and a
        hook that prompts or fails for environment reasons must not lose a reviewed, tested change.
        """
        await self._stage_everything()
        committed = await self._run(
            *await self._identity(), "commit", "--no-verify", "-q", "-m", message, check=False
        )
        if committed.code != 0:
            staged = await self._run("diff", "--cached", "--quiet", check=False)
            if staged.code == 0:
                return None  # nothing to commit (asked only now: the usual commit needs no extra call)
            detail = " ".join((committed.stderr or committed.stdout).split())[:300]
            raise GitError(f"git commit failed in {self.root}: {detail}")
        return await self._note_head_moved()

    async def head_subject(self) -> str | None:
        """The subject line of the HEAD commit, or None without commits."""
        result = await self._run("log", "-1", "--format=%s", check=False)
        return result.stdout.strip() if result.code == 0 else None

    async def find_subject(self, base: str, tip: str, subject: str) -> str | None:
        """The newest commit in ``base..tip`` whose subject is exactly ``subject``, if any."""
        result = await self._run("log", "--format=%H %s", f"{base}..{tip}")
        for line in result.stdout.splitlines():
            commit, _, text = line.partition(" ")
            if text == subject:
                return commit
        return None

    async def first_parent_subjects(self, base: str, tip: str) -> list[str]:
        """The subjects of the commits on ``tip``'s first-parent line after ``base``, newest first."""
        result = await self._run("log", "--first-parent", "--format=%s", f"{base}..{tip}")
        return result.stdout.splitlines()

    async def commits_since(self, base: str, tip: str = "HEAD") -> list[str]:
        """Commits reachable from ``tip`` but not from ``base``, oldest first."""
        result = await self._run("rev-list", "--reverse", "--topo-order", f"{base}..{tip}")
        return [line for line in result.stdout.split() if line]

    async def is_clean(self, paths: Sequence[str] = ()) -> bool:
        result = await self._run("status", "--porcelain", "--", *(paths or ["."]), _EXCLUDE_STATE)
        return not result.stdout.strip()

    async def resolve(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None when it names none."""
        result = await self._run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return result.stdout.strip() or None if result.code == 0 else None

    async def set_ref(self, ref: str, commit: str) -> None:
        self._note_own_move(ref, commit)
        await self._run("update-ref", ref, commit)

    async def delete_ref(self, ref: str) -> None:
        self._note_own_move(ref, None)
        await self._run("update-ref", "-d", ref, check=False)

    def moved_by_autodev(self, ref: str, value: str | None) -> bool:
        """Whether ``value`` (None: no such ref) is where AutoDev last put ``ref`` or where it had put it
        just before: a move AutoDev has noted but git has not finished yet (a fast-forward under way while
        another task's call is checked) leaves the ref at the value before it."""
        return any(ref in noted and noted[ref] == value for noted in (self.own_moves, self._own_before))

    def _note_own_move(self, ref: str, value: str | None) -> None:
        if ref in self.own_moves and self.own_moves[ref] != value:
            self._own_before[ref] = self.own_moves[ref]
        self.own_moves[ref] = value

    async def head_ref_key(self) -> str:
        """The name under which this tree's HEAD is watched: its branch's ref, or ``HEAD@<root>`` when
        detached (a task's worktree)."""
        content = read_head_file(await self.git_dir())
        if content.startswith("ref: "):
            return content[5:].strip()
        return f"HEAD@{self.root.resolve()}"

    async def _note_head_moved(self) -> str | None:
        """HEAD after AutoDev moved it, recorded as AutoDev's own move."""
        head = await self.head()
        self._note_own_move(await self.head_ref_key(), head)
        return head

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is ``descendant`` or one of its ancestors."""
        result = await self._run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return result.code == 0

    async def refs_under(self, prefix: str) -> dict[str, str]:
        """``{ref: commit}`` for every ref below ``prefix`` (e.g. ``refs/autodev/tasks/``)."""
        return await self.refs_under_all([prefix])

    async def refs_under_all(self, prefixes: Sequence[str]) -> dict[str, str]:
        """``{ref: commit}`` for every ref below any of ``prefixes``, in one call."""
        result = await self._run("for-each-ref", "--format=%(refname) %(objectname)", *prefixes)
        pairs = (line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        return {name: commit for name, commit in pairs}

    async def common_dir(self) -> Path:
        """The repository's shared git directory (the main ``.git`` also for a worktree)."""
        if self._common_dir_path is None:
            found = Path((await self._run("rev-parse", "--git-common-dir")).stdout.strip())
            self._common_dir_path = found if found.is_absolute() else (self.root / found).resolve()
        return self._common_dir_path

    async def subject(self, commit: str) -> str | None:
        result = await self._run("log", "-1", "--format=%s", commit, check=False)
        return result.stdout.strip() if result.code == 0 else None

    async def changed_paths(self, old: str, new: str) -> list[str]:
        """Paths that differ between two commits."""
        result = await self._run("diff", "--name-only", "-z", "--no-renames", old, new)
        return [name for name in result.stdout.split("\0") if name]

    async def commit_patch(self, commit: str) -> str:
        """The binary patch ``commit`` makes on top of its first parent."""
        result = await self._run("diff", "--binary", "--no-renames", f"{commit}^", commit)
        return result.stdout

    async def range_patch(self, old: str, new: str) -> str:
        result = await self._run("diff", "--binary", "--no-renames", old, new, "--", ".", _EXCLUDE_STATE)
        return result.stdout

    async def added_bytes(self, base: str, dirty: Sequence[str] | None = None) -> dict[str, int]:
        """``{path: bytes}`` the working tree adds against ``base`` for every changed path: a new file's size,
        a changed file's growth (0 when it shrank or was deleted). Read from the file system and the base's
        sizes of those paths only: nothing is hashed or staged, so a huge file costs a ``stat``, not a copy.
        ``dirty``: the changed paths when the caller has just listed them (``dirty_paths``)."""
        paths = await self.dirty_paths() if dirty is None else list(dirty)
        if not paths:
            return {}
        old = await self._sizes_in(base, paths)
        added = {}
        for path in paths:
            try:
                size = os.lstat(self.root / path).st_size
            except OSError:
                size = 0  # deleted
            added[path] = max(0, size - old.get(path, 0))
        return added

    async def _sizes_in(self, commit: str, paths: Sequence[str]) -> dict[str, int]:
        """The size of each of ``paths`` in ``commit`` (absent when it is no file there): one lookup per
        path, never a listing of the whole tree. A name with a line break cannot be asked for on git's
        line protocol and counts as new."""
        asked = [path for path in paths if "\n" not in path]
        query = "".join(f"{commit}:{path}\n" for path in asked).encode("utf-8", errors="surrogateescape")
        found = await self._run("cat-file", "--batch-check=%(objecttype) %(objectsize)", stdin=query)
        sizes = {}
        for path, line in zip(asked, found.stdout.splitlines(), strict=False):
            kind, _, size = line.partition(" ")
            if kind == "blob" and size.isdigit():
                sizes[path] = int(size)
        return sizes

    async def dirty_paths(self) -> list[str]:
        """Paths with uncommitted changes (tracked or untracked), ``.autodev/`` excluded."""
        result = await self._run(
            "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all", "--", ".", _EXCLUDE_STATE
        )
        return [entry[3:] for entry in result.stdout.split("\0") if len(entry) > 3]

    async def checkout_detached(self, commit: str) -> None:
        """Make the tree exactly ``commit`` (detached), dropping every change and untracked file in it.

        Only ever run in a task's own worktree, never in the user's main tree.
        """
        await self._run("checkout", "--detach", "--force", "-q", commit)
        await self._note_head_moved()
        await self._run("clean", "-fdxq", "-e", ".autodev")

    async def replay(self, commit: str, onto: str, message: str) -> str | list[str]:
        """A commit with ``commit``'s change on top of ``onto``, or the paths that conflict.

        The 3-way merge runs in git's object store (``merge-tree --write-tree``, git 2.38+): no working
        tree is touched, whatever the outcome. Older git replays with ``cherry-pick`` in this tree instead.
        """
        merged = await self._run("merge-tree", "--write-tree", "--name-only", onto, commit, check=False)
        if merged.code > 1:
            return await self._cherry_pick_onto(commit, onto)
        lines = merged.stdout.split("\n")
        if merged.code == 1:
            conflicted = [line for line in lines[1 : lines.index("") if "" in lines else None] if line]
            return conflicted or [" ".join(merged.stdout.split())[:300]]
        tree = lines[0].strip()
        made = await self._run(*await self._identity(), "commit-tree", tree, "-p", onto, "-m", message)
        return made.stdout.strip()

    async def _cherry_pick_onto(self, commit: str, onto: str) -> str | list[str]:
        await self.checkout_detached(onto)
        identity = await self._identity()
        result = await self._run(*identity, "cherry-pick", "--allow-empty", commit, check=False)
        if result.code != 0:
            conflicted = await self._run("diff", "--name-only", "--diff-filter=U", check=False)
            await self._run("cherry-pick", "--abort", check=False)
            paths = [line for line in conflicted.stdout.splitlines() if line]
            return paths or [" ".join(result.stderr.split())[:300] or f"exit code {result.code}"]
        replayed = await self._note_head_moved()
        if replayed is None:
            raise GitError(f"cherry-pick of {commit} left no commit in {self.root}")
        return replayed

    async def commit_tree(self, tree: str, parent: str, message: str) -> str:
        """A commit of ``tree`` on top of ``parent``, made in the object store only (no branch moves)."""
        made = await self._run(*await self._identity(), "commit-tree", tree, "-p", parent, "-m", message)
        return made.stdout.strip()

    async def reset_soft(self, commit: str) -> None:
        """Move HEAD to ``commit`` and leave every file as it is (only ever in a task's own worktree)."""
        await self._run("reset", "--soft", "-q", commit)
        await self._note_head_moved()

    async def abort_cherry_pick(self) -> None:
        """Abort a cherry-pick a killed run left half done (no-op when none is in progress)."""
        if (await self.git_dir() / "CHERRY_PICK_HEAD").exists():
            await self._run("cherry-pick", "--abort", check=False)

    async def apply_three_way(self, patch: str) -> bool:
        """Apply ``patch`` with a 3-way merge, leaving conflict markers where it does not fit; whether it
        applied cleanly."""
        data = patch.encode("utf-8", errors="surrogateescape")
        args = ["apply", "--binary", "--whitespace=nowarn", "--3way", "-"]
        return (await self._run(*args, stdin=data, check=False)).code == 0

    async def fast_forward(self, commit: str) -> bool:
        """Move the checked-out branch (or detached HEAD) forward to ``commit``; False when git refuses
        (not a fast-forward, or local changes it would overwrite), with nothing changed."""
        # Noted first: an agent's call checked while the merge runs must not take this move for its own.
        key = await self.head_ref_key()
        noted = [(moves, moves.get(key, _UNNOTED)) for moves in (self.own_moves, self._own_before)]
        self._note_own_move(key, commit)
        moved = (await self._run("merge", "--ff-only", "-q", commit, check=False)).code == 0
        if moved:
            await self._note_head_moved()
        else:
            # Nothing moved: AutoDev's record of the ref is what it was.
            for moves, value in noted:
                moves.pop(key, None)
                if value != _UNNOTED:
                    moves[key] = value
        return moved

    async def restore_paths(self, commit: str, paths: Sequence[str]) -> None:
        """Put ``paths`` back to their state in ``commit`` (deleting those it does not have)."""
        if not paths:
            return
        listed = await self._run("ls-tree", "-r", "-z", "--name-only", commit, "--", *paths)
        tracked = [name for name in listed.stdout.split("\0") if name]
        if tracked:
            await self._run("checkout", commit, "--", *tracked)
        for path in set(paths) - set(tracked):
            target = self.root / path
            if target.is_file() or target.is_symlink():
                target.unlink()

    async def _identity(self) -> tuple[str, ...]:
        if self._identity_args is None and self._like is not None:
            self._identity_args = await self._like._identity()
        if self._identity_args is None:
            email = await self._run("config", "user.email", check=False)
            self._identity_args = () if email.code == 0 and email.stdout.strip() else _FALLBACK_IDENTITY
        return self._identity_args
