"""Git as the evidence of what changed: diffs against a task's base commit, and one commit per finished task.

What a developer agent says it changed is never trusted; the change is read from git. Diffs include untracked
files without touching the user's index: they are computed through a throw-away index file
(``GIT_INDEX_FILE``) seeded from the real one. AutoDev's own ``.autodev/`` directory is always excluded.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.errors import AutodevError
from autodev.files import read_bounded
from autodev.gitsafety import HARDENED_CONFIG
from autodev.logging import get_logger
from autodev.scratch import owned_prefix, remove_abandoned
from autodev.workspace import changes
from autodev.workspace.changes import FileStamp, StatusKey, WatchedCopy, file_stamp
from autodev.workspace.objects import CommitWriter
from autodev.workspace.patches import Change, added_files_change
from autodev.workspace.refs import BranchMoveError, advance_branch, read_refs
from autodev.workspace.stored_files import file_stamps, stored_entries
from autodev.workspace.trees import FileEntry, paths_meet, raw_entries, splice_tree

__all__ = ["GitError", "GitRepo", "WorkingDiff", "index_entries", "read_head_file", "run_git"]

_EXCLUDE_STATE = ":(exclude).autodev"
# Every patch AutoDev records: binary-safe, renames as a deletion and an addition, full object ids in each
# "index" line, the a/ and b/ prefixes ``git apply`` expects, no colour, git's own order, whatever the user's
# settings (``diff.noPrefix``, ``diff.mnemonicPrefix``, ``color.ui = always``, a ``diff.orderFile``, even one
# a linked worktree cannot read): one form, whether git wrote the patch or ``autodev.workspace.patches`` did.
# (``diff.relative`` changes nothing: git runs at the top of the working tree.)
_PATCH_OPTIONS = (
    "--binary",
    "--full-index",
    "--no-renames",
    "--no-color",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    f"-O{os.devnull}",
)
_ALL_BUT_STATE = ("--", ".", _EXCLUDE_STATE)
_HEAD_FILE_LIMIT = 4096
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Used only when the repository has no identity configured, so that auto-commit works on fresh machines.
_FALLBACK_IDENTITY = ("-c", "user.name=AutoDev", "-c", "user.email=autodev@localhost")
# Sub-commands that would run a textconv or external diff driver from .gitattributes otherwise.
_DIFFING = frozenset({"diff", "log", "show"})
# Paths handed to git as given (no wildcards, no ":(magic)"): the names come from the file system.
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
# A name in the scratch directory that nothing creates: git commands given it as their index read none.
_NO_INDEX = "no-index"
# Beyond this many bytes of changed paths on one command line, git's full scan is asked instead.
_PATHS_ON_COMMAND_LINE = 100_000


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
# For a command that looks at a few paths: git's index preload starts threads that each match every entry
# of the index against the pathspecs (about 1 ms a command at 5,000 entries, for the one path a task wrote);
# the paths themselves are then refreshed one by one as usual. Only the speed changes.
_FEW_PATHS = ("-c", "core.preloadIndex=false")
_UNNOTED = "<not moved by AutoDev>"  # no ref has this value: git refuses such a name


def run_git_now(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command to completion in this thread (``run_git`` says why in a process group of its
    own); for callers that cannot await, such as a plan manager's method on a Ray node."""
    command = ["git", *HARDENED_CONFIG, *_NO_AUTO_MAINTENANCE, *_without_drivers(args)]
    try:
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
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {' '.join(args[:3])} did not finish within {timeout_s:.0f}s") from exc
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH; install git and try again") from exc


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
    return await anyio.to_thread.run_sync(
        functools.partial(run_git_now, args, cwd=cwd, env=env, timeout_s=timeout_s, stdin=stdin)
    )


_SCRATCH_NUMBERS = itertools.count()
_scratch: list[Path] = []


def _scratch_directory() -> Path:
    """A private directory for throw-away index files, made once per process and removed at its exit (a
    directory per snapshot cost more than the snapshot's own git calls). Named for its process
    (``autodev.scratch``), so that a later process removes it if no exit handler ran (SIGKILL, the OOM
    killer); making it is when a process removes what killed ones left."""
    if not _scratch or not _scratch[0].is_dir():
        remove_abandoned()
        _scratch[:] = [Path(tempfile.mkdtemp(prefix=owned_prefix("autodev-index-")))]
        atexit.register(shutil.rmtree, _scratch[0], ignore_errors=True)
    return _scratch[0]


def _seed_scratch_index(index: Path, real_index: Path, own: WatchedCopy | None) -> None:
    """Fill the scratch ``index`` from the tree's own: unchanged files keep their stat data and are not
    hashed again. The copy keeps the index's mtime (copy2): git trusts an entry's stat data only when the
    entry is older than the index file, and a copy stamped "now" would hide a file rewritten, at the same
    size, within the timestamp granularity of its last staging ("racy git")."""
    if own is not None and own.index_bytes is not None and own.index_stamp is not None:
        index.write_bytes(own.index_bytes)
        mtime = own.index_stamp.mtime_ns
        os.utime(index, ns=(mtime, mtime))
    elif real_index.exists():
        shutil.copy2(real_index, index)


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


def index_entries(git_dir: Path) -> int:
    """How many entries the index of ``git_dir`` holds, read from its header; 0 when it has none or
    cannot be read (a split index counts the entries of its own file only)."""
    try:
        with open(git_dir / "index", "rb") as index:
            header = index.read(12)
    except OSError:
        return 0
    if len(header) < 12 or header[:4] != b"DIRC":
        return 0
    return int.from_bytes(header[8:12], "big")


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


def _loose_branch(git_dir: Path, head: str) -> str | None:
    """The commit id in the loose ref file HEAD names ("ref: refs/heads/x") in a repository's own git
    directory, or None (a packed ref, a worktree's git directory, anything unusual: git is asked)."""
    ref = head.removeprefix("ref: ").strip()
    if not head.startswith("ref: refs/heads/") or ".." in ref or (git_dir / "commondir").exists():
        return None
    try:
        data = read_bounded(
            git_dir / ref,
            limit=_HEAD_FILE_LIMIT,
            what="a branch's ref file",
            follow_symlinks=False,
            error=lambda message: GitError(message),
        )
    except (GitError, OSError):
        return None
    content = data.decode("utf-8", errors="replace").strip()
    return content if _OBJECT_ID.fullmatch(content) else None


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` sorted, without those below another of them."""
    kept: list[str] = []
    for path in sorted(set(paths), key=lambda name: name.split("/")):
        if not kept or not path.startswith(f"{kept[-1]}/"):
            kept.append(path)
    return sorted(kept)


def _absent(root: Path, paths: Sequence[str]) -> list[str]:
    return [path for path in paths if not os.path.lexists(root / path)]


def _config_entries(listing: str) -> dict[str, str]:
    """``git config -z --list`` as a mapping of lower-case keys to their last value (a key without a value
    is a boolean true)."""
    entries: dict[str, str] = {}
    for record in listing.split("\0"):
        if record:
            key, _, value = record.partition("\n")
            entries[key.lower()] = value if "\n" in record else "true"
    return entries


def _replace_under_git_lock(target: Path, data: bytes, still: Callable[[], bool] = lambda: True) -> bool:
    """Replace ``target`` with ``data`` as git does: ``<target>.lock`` is created exclusively (git's own
    lock, which every git honours), written and renamed over ``target``. False, with nothing changed, when
    another process holds the lock or ``still`` (asked once the lock is held) says ``target`` moved on."""
    lock = target.with_name(f"{target.name}.lock")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            if not still():
                lock.unlink()
                return False
            out.write(data)
        os.replace(lock, target)
    except BaseException:
        lock.unlink(missing_ok=True)
        raise
    return True


def _copy_under_git_lock(index: Path, lock: Path, stamp: FileStamp) -> bool:
    """Take git's own lock on ``index`` (``lock`` created exclusively) and fill it with a copy of the index
    that keeps its mtime, for git's racy-entry rule (see ``_seed_scratch_index``): True once held.
    False, with no lock left, when someone holds it or the index is no longer at ``stamp`` (under the lock
    no git writes it: a stamp that moved anyway is someone else's write)."""
    try:
        os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        return False
    try:
        shutil.copy2(index, lock)
        if file_stamp(index) == stamp:
            return True
    except BaseException:
        lock.unlink(missing_ok=True)
        raise
    lock.unlink()
    return False


def _write_index(git_dir: Path, data: bytes) -> None:
    if not _replace_under_git_lock(git_dir / "index", data):
        raise GitError(f"{git_dir / 'index.lock'} exists: another git process is using {git_dir}")


def _move_detached_head(git_dir: Path, new: str, old: str) -> bool:
    """``git update-ref --no-deref HEAD <new> <old>`` for a HEAD detached at ``old``, written as git writes
    it (under ``HEAD.lock``) without starting git, and without a reflog entry: True once HEAD names
    ``new``. False, with nothing changed, when HEAD is not detached at ``old`` or git's lock is held: the
    caller then asks git, which moves it or says why not."""
    if not (_OBJECT_ID.fullmatch(new) and _OBJECT_ID.fullmatch(old)) or read_head_file(git_dir) != old:
        return False  # looked at before the lock: a symbolic HEAD (a branch) is never locked here
    try:
        # Read again under the lock: HEAD cannot move between that look and the rename.
        return _replace_under_git_lock(
            git_dir / "HEAD", f"{new}\n".encode("ascii"), lambda: read_head_file(git_dir) == old
        )
    except OSError as exc:  # as git's own failure would be: a full disk is still found by its errno
        raise GitError(f"cannot move HEAD in {git_dir} to {new[:10]}: {exc.strerror or exc}") from exc


def _remove_all(paths: Sequence[Path]) -> None:
    """Delete each path, whatever it is now (a directory where a file was, or nothing)."""
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                raise


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _overlapping(dirty: Sequence[str], written: Sequence[str]) -> bool:
    """Whether a dirty path is, contains or lies inside one of the ``written`` paths."""
    if not dirty or not written:
        return False
    targets = set(written)
    for path in dirty:
        if path in targets or any(part in targets for part in _parents(path)):
            return True
    prefixes = tuple(f"{path}/" for path in dirty)
    return any(path.startswith(prefixes) for path in written)


def _parents(path: str) -> Iterator[str]:
    while "/" in path:
        path = path.rpartition("/")[0]
        yield path


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
    tree: str
    change: Change

    @property
    def files(self) -> tuple[str, ...]:
        return self.change.names

    @property
    def patch(self) -> str:
        return self.change.patch

    @property
    def entries(self) -> tuple[tuple[str, FileEntry], ...]:
        """Each file's new mode and object id in ``tree`` (mode "000000": deleted)."""
        return self.change.entries

    @property
    def is_empty(self) -> bool:
        return not self.files

    @property
    def size_bytes(self) -> int:
        return len(self.patch.encode("utf-8", errors="surrogateescape"))


class CommitFacts:
    """What AutoDev knows for certain of commits: the tree and the parent of each one it made, the tree of
    each one it asked about, file sizes in the bases it asked about, the last diffs between a base and a
    tree, and the patch of a commit the branch was just fast-forwarded to.

    Commits and trees never change, so these answer ``tree_of``, ``is_ancestor`` along AutoDev's own chain
    (a task's commit, its replay onto the branch), ``added_bytes``, ``diff_against`` and ``commit_patch``
    without a process.
    """

    # Beyond this many steps along AutoDev's own commits, git answers (it walks the history faster).
    _WALK_LIMIT = 10_000

    # Commits whose file sizes are kept (the bases of the tasks under way, a few at a time).
    _SIZED_COMMITS = 64
    # Diffs and patches kept for the next question about the same objects (one per task under way).
    _KEPT_DIFFS = 32
    _KEPT_PATCH_CHARS = 4 << 20
    # The changed paths of this many of AutoDev's commits are kept (a run's recent landings), and a path
    # list is composed from at most this many of them (how far a pooled worktree's base falls behind).
    _KEPT_NAMES = 4096
    _NAMES_WALK = 256

    def __init__(self) -> None:
        self.trees: dict[str, str] = {}
        self._parents: dict[str, str] = {}
        self._sizes: dict[str, dict[str, int | None]] = {}
        self.diffs: dict[tuple[str, str], WorkingDiff] = {}
        self.patches: dict[str, str] = {}
        self.changes: dict[str, Change] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._deleting: dict[str, bool] = {}  # of the commits in ``_names``: whether the change deletes
        self._replayed: dict[str, str] = {}
        self._whole: dict[tuple[str, str], None] = {}  # an ordered set: the oldest is dropped first

    def parent_of(self, commit: str) -> str | None:
        """The parent AutoDev gave ``commit`` (None: not one AutoDev made)."""
        return self._parents.get(commit)

    def note_diff(self, diff: WorkingDiff, *, whole: bool = False) -> None:
        """``whole``: the diff is all that differs between its base and its tree, ``.autodev/`` included
        (see ``GitRepo.diff_against``)."""
        if len(diff.patch) > self._KEPT_PATCH_CHARS:
            return
        if len(self.diffs) >= self._KEPT_DIFFS:
            self.diffs.pop(next(iter(self.diffs)))
        self.diffs[(diff.base, diff.tree)] = diff
        if whole:
            if len(self._whole) >= self._KEPT_DIFFS:
                self._whole.pop(next(iter(self._whole)))
            self._whole[(diff.base, diff.tree)] = None

    def note_change(self, commit: str, change: Change) -> None:
        """The paths and the patch of ``commit``'s change on its parent, read ahead of a fast-forward to it
        (``GitRepo.learn_change``) and taken by it once."""
        if len(change.patch) > self._KEPT_PATCH_CHARS:
            return
        if len(self.changes) >= self._KEPT_DIFFS:
            self.changes.pop(next(iter(self.changes)))
        self.changes[commit] = change

    def note_names(self, commit: str, change: Change) -> None:
        """The exact paths ``commit``'s change on the parent AutoDev gave it touches (read from git), and
        whether it deletes any."""
        if commit not in self._parents:
            return
        if len(self._names) >= self._KEPT_NAMES:
            dropped = next(iter(self._names))
            self._names.pop(dropped)
            self._deleting.pop(dropped, None)
        self._names[commit] = change.names
        self._deleting[commit] = change.deletes

    def names_between(self, old: str, new: str, *, none_deleted: bool = False) -> list[str] | None:
        """The paths that differ between ``old`` and its descendant ``new``, composed from the changes of
        AutoDev's commits between them; None when one of them is not known, or a path changes in two of
        them (it may be back as ``old`` has it, which only git can tell). ``none_deleted``: None as well
        when one of those changes deletes a file."""
        found: set[str] = set()
        current = new
        for _ in range(self._NAMES_WALK):
            if current == old:
                return sorted(found)
            names, parent = self._names.get(current), self._parents.get(current)
            if names is None or parent is None or not found.isdisjoint(names):
                return None
            if none_deleted and self._deleting.get(current, True):
                return None
            found.update(names)
            current = parent
        return None

    def note_replay(self, replayed: str, original: str) -> None:
        """``replayed`` is ``original``'s change made again on another parent (``GitRepo.replay``)."""
        if len(self._replayed) >= self._KEPT_DIFFS:
            self._replayed.pop(next(iter(self._replayed)))
        self._replayed[replayed] = original

    def is_whole(self, diff: WorkingDiff) -> bool:
        return (diff.base, diff.tree) in self._whole

    def known_change(self, commit: str) -> Change | None:
        """The paths and the patch of ``commit``'s change on its parent, from a diff AutoDev already read
        (a task's change, between its base and the tree it commits); None when none tells.

        A replay of that change onto a parent that differs from the base only in paths the change does not
        touch (AutoDev's own landings meanwhile, ``names_between``) is the same change: those paths are as
        the base has them on both sides, every other path as the parent has it."""
        onto = self._parents.get(commit)
        if onto is None:
            return None
        return self.change_onto(self._replayed.get(commit, commit), onto)

    def change_onto(self, commit: str, onto: str, *, none_deleted: bool = False) -> Change | None:
        """``commit``'s change (a task's commit on its base) as it is when replayed onto ``onto``, from
        the task's diff: known when the landings between the base and ``onto`` (``names_between``) left
        the change's paths alone. ``none_deleted``: only when neither the change nor those landings delete
        a file; the paths then do not even meet (see ``autodev.workspace.trees``)."""
        base, tree = self._parents.get(commit), self.trees.get(commit)
        if base is None or tree is None:
            return None
        diff = self.diffs.get((base, tree))
        if diff is None or not self.is_whole(diff):
            return None
        change = diff.change
        if none_deleted and change.deletes:
            return None
        if onto != base:
            landed = self.names_between(base, onto, none_deleted=none_deleted)
            if landed is None or not set(landed).isdisjoint(diff.files):
                return None
            if none_deleted and paths_meet(diff.files, landed):
                return None
        return change

    def note_patch(self, commit: str, patch: str) -> None:
        """``commit``'s patch on its parent, kept until ``GitRepo.commit_patch`` asks for it once."""
        if len(patch) > self._KEPT_PATCH_CHARS:
            return
        if len(self.patches) >= self._KEPT_DIFFS:
            self.patches.pop(next(iter(self.patches)))
        self.patches[commit] = patch

    def sizes_in(self, commit: str) -> dict[str, int | None]:
        """The file sizes in ``commit`` found so far (None: no file there), to be filled in by the caller;
        kept only for a full commit id, which always names the same files."""
        if not _OBJECT_ID.fullmatch(commit):
            return {}
        if commit not in self._sizes and len(self._sizes) >= self._SIZED_COMMITS:
            self._sizes.pop(next(iter(self._sizes)))
        return self._sizes.setdefault(commit, {})

    def note(self, commit: str, *, tree: str, parent: str) -> None:
        if _OBJECT_ID.fullmatch(commit) and _OBJECT_ID.fullmatch(tree) and _OBJECT_ID.fullmatch(parent):
            self.trees[commit] = tree
            self._parents[commit] = parent

    def made_since(self, ancestor: str, commit: str) -> set[str] | None:
        """The commits from ``commit`` back to ``ancestor`` (excluded) when that line is of commits AutoDev
        made, and short; else None. Short: asked after every agent call, mostly about an ``ancestor`` that
        is not one (a branch moved forward), which a long walk would learn only at the chain's start."""
        found: set[str] = set()
        current: str | None = commit
        for _ in range(self._NAMES_WALK):
            if current == ancestor:
                return found
            if current is None:
                return None
            found.add(current)
            current = self._parents.get(current)
        return None

    def descends(self, commit: str, ancestor: str) -> bool:
        """Whether ``ancestor`` is ``commit`` or reached from it through parents AutoDev gave; False means
        only "not known here"."""
        if not _OBJECT_ID.fullmatch(ancestor):
            return False
        current: str | None = commit
        for _ in range(self._WALK_LIMIT):
            if current == ancestor:
                return True
            current = self._parents.get(current) if current is not None else None
            if current is None:
                return False
        return False


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
        # Whether AutoDev may write its commits without starting git, and how (asked of git once).
        self._commit_writer_asked = False
        self._commit_writer: CommitWriter | None = None
        self._commit_writer_lock = anyio.Lock()  # tasks that commit at once ask git once
        # Where AutoDev itself last moved each ref, and where it had put it before that (shared by every
        # GitRepo of one repository): a ref found elsewhere after an agent's call was moved by someone else
        # (``autodev.orchestrator.integrity``, through ``moved_by_autodev``).
        self.own_moves: dict[str, str | None] = like.own_moves if like is not None else {}
        self._own_before: dict[str, str | None] = like._own_before if like is not None else {}
        # What AutoDev knows of the commits it made itself (shared like ``own_moves``).
        self._made: CommitFacts = like._made if like is not None else CommitFacts()

    async def git_dir(self) -> Path:
        """The absolute git directory of this tree (``.git/worktrees/<name>`` for a worktree)."""
        if self._git_dir_path is None:
            self._git_dir_path = _git_dir_on_disk(self.root) or Path(
                (await self._run("rev-parse", "--absolute-git-dir")).stdout.strip()
            )
        return self._git_dir_path

    async def _run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        stdin: bytes | None = None,
        few_paths: bool = False,
    ) -> _GitOutput:
        """``few_paths``: a command limited by pathspecs to a few paths of what may be a large index (see
        ``_FEW_PATHS``)."""
        # GIT_OPTIONAL_LOCKS=0: status and diff never take the index lock just to refresh stat data, so a
        # kill during them cannot leave a lock behind.
        full_env = {
            **os.environ,
            **(env or {}),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
        }
        command = (*_FEW_PATHS, *args) if few_paths else args
        result = await run_git(command, cwd=self.root, env=full_env, timeout_s=self.timeout_s, stdin=stdin)
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
        # ``index.lock.lock``: git's lock on the copy of the index a fast-forward restores into.
        candidates = [
            git_dir / "index.lock",
            git_dir / "index.lock.lock",
            git_dir / "HEAD.lock",
            git_dir / "ORIG_HEAD.lock",
        ]
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
        loose = _loose_branch(await self.git_dir(), content)
        if loose is not None:
            return loose
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

    @asynccontextmanager
    async def _scratch_index(
        self, git_dir: Path, own: WatchedCopy | None = None
    ) -> AsyncIterator[dict[str, str]]:
        """The environment of git commands that stage into a throw-away copy of this tree's index.

        ``own``: a recycled copy whose index file is still the one its last reset left; the copy is then
        made from the bytes AutoDev kept of it, not from the file (which anyone may write meanwhile)."""
        index = _scratch_directory() / f"index-{next(_SCRATCH_NUMBERS)}"
        try:
            # The copy is as large as the index (megabytes at tens of thousands of files): written in a
            # worker thread, so the other tasks' work on the event loop does not wait for it.
            await anyio.to_thread.run_sync(_seed_scratch_index, index, git_dir / "index", own)
            yield {"GIT_INDEX_FILE": str(index)}
        finally:
            for leftover in (index, index.with_name(f"{index.name}.lock")):
                leftover.unlink(missing_ok=True)

    async def _stage_everything(self, env: Mapping[str, str] | None = None) -> None:
        staged = await self._run("add", "-A", "--", ".", _EXCLUDE_STATE, env=env, check=False)
        if staged.code != 0 and "ignored by one of your .gitignore files" in staged.stderr:
            # A git-ignored ``.autodev`` that is a symbolic link makes git refuse the exclusion itself
            # ("paths are ignored"); ignored, it is left out without being named.
            staged = await self._run("add", "-A", "--", ".", env=env, check=False)
        if staged.code != 0:
            detail = " ".join(staged.stderr.split())[:300] or f"exit code {staged.code}"
            raise GitError(f"git add -A failed in {self.root}: {detail}")

    async def _stage(
        self, paths: Sequence[str] | None, env: Mapping[str, str] | None = None
    ) -> list[str] | None:
        """Stage every change (``paths`` None) or the changes at ``paths`` only (see ``_changed_paths``).
        Returns the paths git was given and staged, every one of them; None for every change, or when git
        left out a path its ignore rules name."""
        if paths is None:
            await self._stage_everything(env)
            return None
        specs = await self._stageable(paths, env)
        if not specs:
            return specs
        listed = "\0".join(specs).encode("utf-8", errors="surrogateescape")
        args = ("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
        staged = await self._run(
            *args, env={**(env or {}), **_LITERAL}, check=False, stdin=listed, few_paths=True
        )
        # A changed path git ignores is named explicitly here: git says so, stages the rest, exits 1.
        if staged.code != 0 and not (
            staged.code == 1 and "ignored by one of your .gitignore files" in staged.stderr
        ):
            detail = " ".join(staged.stderr.split())[:300] or f"exit code {staged.code}"
            raise GitError(f"git add -A failed in {self.root}: {detail}")
        return specs if staged.code == 0 else None

    async def _stageable(self, paths: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
        """``paths`` git accepts as pathspecs for ``add``: those that exist, and of those that do not, the
        ones the index has (a deleted file, or a directory of them). git refuses a pathspec that matches
        neither, such as a temporary file created and removed again."""
        gone = _absent(self.root, paths)
        if not gone:
            return list(paths)
        listed = await self._run("ls-files", "-z", "--", *gone, env={**(env or {}), **_LITERAL})
        entries = [name for name in listed.stdout.split("\0") if name]
        indexed = set(entries) | {parent for name in entries for parent in _parents(name)}
        missing = {path for path in gone if path not in indexed}
        return [path for path in paths if path not in missing]

    def _watched(self) -> WatchedCopy | None:
        return changes.watched(self.root)

    async def _changed_paths(self, copy: WatchedCopy | None, *, index: bool = True) -> list[str] | None:
        """Every path that may differ from this copy's index or HEAD, found without scanning the tree (see
        ``autodev.workspace.changes``); None when only git's full scan can tell.

        What the copy knew at its mark, the paths written since, what differs between the index and the
        mark's HEAD when the index file changed (``git add`` by an agent, or the user), and what differs
        between the mark's HEAD and HEAD when HEAD moved. ``index`` False: the caller replaces the index
        file as a whole, so what it holds now does not matter, only which files differ."""
        if copy is None:
            return None
        found = copy.tracker.changes_since(copy.mark)
        if found is None:
            return None
        found |= copy.dirty
        stamp = file_stamp(await self.git_dir() / "index")
        if index and stamp != copy.index_stamp:
            known = copy.answers.get(("index", copy.head, stamp))
            if known is None:
                staged = await self._run(
                    "diff-index", "--cached", "-z", "--name-only", "--no-renames", copy.head
                )
                known = copy.remember(
                    ("index", copy.head, stamp), [n for n in staged.stdout.split("\0") if n]
                )
            found.update(known)
        head = await self.head()
        if head is None:
            return None
        if head != copy.head:
            moved = copy.moved_paths(copy.head, head)
            if moved is None:
                moved = set(await self.changed_between(copy.head, head))
                copy.note_move(copy.head, head, moved)
            found.update(moved)
        # A path below another one adds nothing (a pathspec covers everything below it), and git's clean
        # treats a directory named together with a file inside it file by file.
        paths = _outermost(path for path in found if path != ".autodev" and not path.startswith(".autodev/"))
        if sum(len(path) + 1 for path in paths) > _PATHS_ON_COMMAND_LINE:
            return None
        return paths

    async def _tree_now(self) -> str:
        """The id of the tree git would commit from the working tree now (see ``snapshot_tree``)."""
        git_dir = await self.git_dir()
        copy = self._watched()
        if copy is not None:
            # Read before the paths: a change made while they are staged makes the next call stage again.
            key = (copy.tracker.generation, file_stamp(git_dir / "index"), await self.head() or "")
            if copy.snapshot_key == key and copy.snapshot_tree is not None:
                return copy.snapshot_tree
        paths = await self._changed_paths(copy)
        # A recycled copy keeps the index this writes: its commit installs it instead of staging again.
        keep = copy is not None and copy.index_bytes is not None and paths is not None
        own = (
            copy
            if copy is not None
            and copy.index_bytes is not None
            and file_stamp(git_dir / "index") == copy.index_stamp
            else None
        )
        # Staged onto the index its reset left, every entry names an object the store has (git wrote that
        # index from a commit) or one ``add`` just wrote: git's look for each entry's object, a ``stat``
        # per loose object (thousands for a directory of thousands of files), would prove nothing more.
        # An index anyone else may have written is checked as git checks it.
        missing_ok = ("--missing-ok",) if own is not None else ()
        async with self._scratch_index(git_dir, own) as env:
            # Stamped before git reads the files: the tree is then written from them without git when
            # nothing changed them meanwhile (``_tree_from_files``).
            before = file_stamps(self.root, paths) if own is not None and paths else None
            added = await self._stage(paths, env)
            tree = None
            if own is not None and before is not None and added:
                tree = await self._tree_from_files(own, before, added)
            if tree is None:
                tree = (await self._run("write-tree", *missing_ok, env=env)).stdout.strip()
            staged = await anyio.to_thread.run_sync(Path(env["GIT_INDEX_FILE"]).read_bytes) if keep else None
        if copy is not None and paths is not None:
            copy.snapshot_key, copy.snapshot_tree, copy.snapshot_index = key, tree, staged
        return tree

    async def _tree_from_files(
        self, copy: WatchedCopy, before: Mapping[str, FileStamp | None], staged: Sequence[str]
    ) -> str | None:
        """The tree ``git write-tree`` would write from the index ``staged`` was just added to, a recycled
        copy's own index at ``copy.head``: that commit's tree with each staged file's mode and blob id put
        in, when git stored every file as its bytes (``autodev.workspace.stored_files``); None when git
        must write it. When the files are all text files the base lacks, their diff against ``copy.head``
        is written from the same bytes (``autodev.workspace.patches``) and noted for ``diff_against``."""
        writer = await self._writer()
        if writer is None or not writer.stores_files_as_read or not writer.still_valid(os.environ):
            return None
        base_tree = await self.tree_of(copy.head)
        # The writer's store is the repository's own (``GIT_OBJECT_DIRECTORY`` hands commits to git).
        common_dir = writer.objects_dir.parent

        def written() -> tuple[str, Change | None] | None:
            files = stored_entries(self.root, common_dir, before, staged, id_length=len(base_tree))
            if files is None:
                return None
            tree = splice_tree(writer, base_tree, {path: file.entry for path, file in files.items()})
            if tree is None:
                return None
            plain = writer.writes_plain_patches
            return tree, added_files_change(writer.objects_dir, base_tree, files) if plain else None

        try:
            # In one worker thread: the files are read and hashed, and the trees along them rewritten.
            found = await anyio.to_thread.run_sync(written)
        except OSError as exc:  # a file gone or unreadable meanwhile: git says what it finds
            _log.debug("git.tree_not_written_from_files", root=str(self.root), error=str(exc))
            return None
        if found is None:
            return None
        tree, change = found
        if change is not None:
            # The diff of these two objects, whoever asks for it: ``git diff`` would print the same.
            self._made.note_diff(WorkingDiff(base=copy.head, tree=tree, change=change))
        return tree

    async def diff_against(self, base: str) -> WorkingDiff:
        """Everything in the working tree that differs from ``base``, untracked files included: staged
        once into a throw-away index and written as a tree, the diff read between ``base`` and that tree."""
        copy = self._watched()
        index = await self.git_dir() / "index"
        stamp = file_stamp(index)
        # A recycled copy at ``base`` whose index nobody wrote since its reset stages onto ``base``'s own
        # index: the tree then differs from ``base`` only in what the diff below shows (``.autodev/``, left
        # out of it, is as ``base`` has it), so the diff is the whole change between the two.
        whole = (
            copy is not None
            and copy.index_bytes is not None
            and copy.head == base
            and stamp == copy.index_stamp
        )
        tree = await self._tree_now()
        whole = whole and file_stamp(index) == stamp
        known = self._made.diffs.get((base, tree))
        if known is not None:
            self._made.note_diff(known, whole=whole)
            return known  # the same two objects: the same diff (the next step asks again)
        change = await self._names_and_patch(base, tree, *_ALL_BUT_STATE)
        diff = WorkingDiff(base=base, tree=tree, change=change)
        self._made.note_diff(diff, whole=whole)
        return diff

    async def _names_and_patch(self, old: str, new: str, *pathspec: str) -> Change:
        """The paths that differ between two commits or trees, each one's new mode and object id, and the
        binary patch between them."""
        # One process for the names and the patch: with -z the raw part (":<modes> <ids> <status>\0<path>\0"
        # per file) ends at the first empty field, and the patch after it is byte for byte the plain one
        # (``--full-index`` writes whole object ids in it; ``--no-abbrev`` gives them to the raw part).
        args = ("diff", "-z", "--patch-with-raw", *_PATCH_OPTIONS, "--no-abbrev", old, new)
        out = (await self._run(*args, *pathspec)).stdout
        end = out.find("\0\0")
        raw, patch = (out, "") if end < 0 else (out[: end + 1], out[end + 2 :])
        entries = raw_entries(raw)
        names = tuple(sorted(entries))
        return Change(names, patch, tuple((name, entries[name]) for name in names))

    async def snapshot_tree(self) -> str:
        """The id of the tree git would commit from the working tree now: tracked and untracked files,
        ignored ones and ``.autodev/`` excepted. Neither the user's index nor any ref changes; the
        snapshot's objects are written to the object store, so ``restore_from_tree`` can bring it back."""
        return await self._tree_now()

    async def learn_change(self, commit: str) -> None:
        """Read now the paths and the patch of ``commit``'s change on its parent (a commit AutoDev made), so
        that a fast-forward to it later starts no process for them (see ``integration.prepare_landing``)."""
        parent = self._made.parent_of(commit)
        if parent is None or commit in self._made.changes:
            return
        change = self._made.known_change(commit) or await self._names_and_patch(parent, commit)
        self._made.note_names(commit, change)
        self._made.note_change(commit, change)

    async def tree_of(self, commit: str) -> str:
        known = self._made.trees.get(commit)
        if known is not None:
            return known
        tree = (await self._run("rev-parse", f"{commit}^{{tree}}")).stdout.strip()
        if _OBJECT_ID.fullmatch(commit):
            self._made.trees[commit] = tree  # a commit's tree never changes
        return tree

    async def changed_between(self, old: str, new: str) -> list[str]:
        """Paths whose content or mode differs between two trees (or commits)."""
        if old == new and _OBJECT_ID.fullmatch(old):
            return []
        known = self._made.names_between(old, new)
        if known is not None:
            return known  # AutoDev's own landings since ``old``: no process (a pooled worktree's reset)
        # diff-tree reads the whole index first (for rename detection and attributes), which names alone do
        # not use: pointed at an index that does not exist, it skips that read (5 ms at 50,000 files).
        result = await self._run(
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            old,
            new,
            env={"GIT_INDEX_FILE": str(_scratch_directory() / _NO_INDEX)},
        )
        return sorted(name for name in result.stdout.split("\0") if name)

    async def restore_from_tree(self, tree: str, paths: Sequence[str]) -> None:
        """Put ``paths`` of the working tree back as ``tree`` has them; delete those it does not have."""
        if not paths:
            return
        listed = await self._run("ls-tree", "-r", "-z", "--name-only", tree, "--", *paths)
        present = [name for name in listed.stdout.split("\0") if name]
        if present:
            async with self._scratch_index(await self.git_dir()) as env:
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
        hook that prompts or fails for environment reasons must not lose a reviewed, tested change. A
        recycled worktree (``watch``) commits with git's plumbing: only its changed paths are staged, and
        no command reads every file of the tree.
        """
        copy = self._watched()
        paths = await self._changed_paths(copy)
        if copy is not None and copy.index_bytes is not None and paths is not None:
            return await self._commit_changed(copy, paths, message)
        await self._stage(paths)
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

    async def _commit_changed(self, copy: WatchedCopy, paths: Sequence[str], message: str) -> str | None:
        head = await self.head()
        if head is None:
            raise GitError(f"git commit failed in {self.root}: HEAD names no commit")
        # The tree last written from the copy, when nothing changed since: staging the same paths into the
        # same index gives the same tree, so git need not write it again.
        git_dir = await self.git_dir()
        key = (copy.tracker.generation, file_stamp(git_dir / "index"), head)
        snapshot = copy.snapshot_tree if copy.snapshot_key == key else None
        if snapshot is not None and copy.snapshot_index is not None:
            # The index that snapshot staged, from this very index and files: what staging again would
            # write, without git reading and writing every entry of a large index once more.
            _write_index(git_dir, copy.snapshot_index)
        else:
            await self._stage(paths)
        tree = snapshot or (await self._run("write-tree")).stdout.strip()
        if tree == await self.tree_of(head):
            return None
        commit = await self.commit_tree(tree, head, message)
        subject = message.splitlines()[0] if message else ""
        # A recycled worktree's detached HEAD is AutoDev's own: moved without a git process.
        if not _move_detached_head(git_dir, commit, head):
            await self._run("update-ref", "-m", f"commit: {subject}", "HEAD", commit, head)
        copy.note_move(head, commit, paths)
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
        if not paths:
            return not await self.dirty_paths()
        result = await self._run("status", "--porcelain", "--", *paths, _EXCLUDE_STATE, few_paths=True)
        return not result.stdout.strip()

    async def resolve(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None when it names none."""
        if ref.startswith("refs/") and ref.count("/") >= 2:
            listed = read_refs(await self.common_dir(), [ref.rsplit("/", 1)[0] + "/"])
            if listed is not None and ref not in listed:
                return None  # no such ref (the usual answer: a task that parked nothing)
        result = await self._run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return result.stdout.strip() or None if result.code == 0 else None

    async def commits_and_paths_since(self, base: str) -> tuple[int, list[str]]:
        """How many commits HEAD has on top of ``base``, and the paths they changed (none: no process
        beyond the count; none at all when HEAD is ``base``, read from the ref files)."""
        if await self.head() == base:
            return 0, []
        count = int((await self._run("rev-list", "--count", f"{base}..HEAD")).stdout.strip() or 0)
        if not count:
            return 0, []
        names = await self._run("diff", "--name-only", "--no-renames", "-z", base, "HEAD")
        return count, [name for name in names.stdout.split("\0") if name]

    async def branch(self) -> str | None:
        """The checked-out branch's short name; None on a detached HEAD."""
        content = read_head_file(await self.git_dir())
        return content[5:].strip().removeprefix("refs/heads/") if content.startswith("ref: ") else None

    async def query(self, *args: str) -> str | None:
        """The stripped output of a read-only git command, or None when git says no (a missing ref, no
        upstream, no such configuration)."""
        result = await self._run(*args, check=False)
        return result.stdout.strip() if result.code == 0 else None

    async def fetch(self, remote: str, branch: str, *, timeout_s: float) -> str | None:
        """Fetch ``branch`` from ``remote`` into its remote-tracking ref; None when it worked, else why not
        (one line). Never prompts: no terminal, and ssh in batch mode unless the user set its command."""
        env = {"GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")}
        args = ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, branch)
        full_env = {**os.environ, **env, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        try:
            result = await run_git(args, cwd=self.root, env=full_env, timeout_s=timeout_s)
        except GitError as exc:
            return str(exc)
        if result.returncode == 0:
            return None
        detail = " ".join(result.stderr.decode("utf-8", errors="replace").split())[:200]
        return detail or f"git fetch exited with {result.returncode}"

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

    def made_since(self, ancestor: str, descendant: str) -> set[str] | None:
        """The commits after ``ancestor`` up to ``descendant`` when all are AutoDev's own (each made on the
        one before) and a few hundred at most, known without git; None when that is not known here."""
        return self._made.made_since(ancestor, descendant)

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is ``descendant`` or one of its ancestors (known without git when the line
        between them is of commits AutoDev made)."""
        if self._made.descends(descendant, ancestor):
            return True
        result = await self._run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return result.code == 0

    async def refs_under(self, prefix: str) -> dict[str, str]:
        """``{ref: commit}`` for every ref below ``prefix`` (e.g. ``refs/autodev/tasks/``)."""
        return await self.refs_under_all([prefix])

    async def refs_under_all(self, prefixes: Sequence[str]) -> dict[str, str]:
        """``{ref: commit}`` for every ref below any of ``prefixes`` (each ending in ``/``): read from the
        ref files where they tell for certain (``autodev.workspace.refs``), else from one git call."""
        from_files = read_refs(await self.common_dir(), prefixes)
        if from_files is not None:
            return from_files
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
        known = self._made.patches.pop(commit, None)
        if known is not None:
            return known  # read when the branch was moved to it (``_fast_forward_changed``)
        result = await self._run("diff", *_PATCH_OPTIONS, f"{commit}^", commit)
        return result.stdout

    async def range_patch(self, old: str, new: str) -> str:
        result = await self._run("diff", *_PATCH_OPTIONS, old, new, "--", ".", _EXCLUDE_STATE)
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
        return {path: max(0, size - old.get(path, 0)) for path, size in self.sizes_now(paths).items()}

    def sizes_now(self, paths: Sequence[str]) -> dict[str, int]:
        """``{path: bytes}`` of each of ``paths`` in the working tree as it is (0 for one deleted): a
        ``stat`` each, never a read. Each bounds what the path adds against any base (``added_bytes``)."""
        sizes = {}
        for path in paths:
            try:
                sizes[path] = os.lstat(self.root / path).st_size
            except OSError:
                sizes[path] = 0  # deleted
        return sizes

    async def _sizes_in(self, commit: str, paths: Sequence[str]) -> dict[str, int]:
        """The size of each of ``paths`` in ``commit`` (absent when it is no file there): one lookup per
        path, never a listing of the whole tree. A name with a line break cannot be asked for on git's
        line protocol and counts as new."""
        asked = [path for path in paths if "\n" not in path]
        sizes = self._made.sizes_in(commit)
        unknown = [path for path in asked if path not in sizes]
        if unknown:
            query = "".join(f"{commit}:{path}\n" for path in unknown).encode(
                "utf-8", errors="surrogateescape"
            )
            found = await self._run("cat-file", "--batch-check=%(objecttype) %(objectsize)", stdin=query)
            for path, line in zip(unknown, found.stdout.splitlines(), strict=False):
                kind, _, count = line.partition(" ")
                sizes[path] = int(count) if kind == "blob" and count.isdigit() else None
        return {path: size for path in asked if (size := sizes.get(path)) is not None}

    async def dirty_paths(self) -> list[str]:
        """Paths with uncommitted changes (tracked or untracked), ``.autodev/`` excluded.

        A watched copy asks git about the paths that may have changed only; one whose changes are not
        recycled (the main checkout) then takes what it found as its new mark."""
        copy = self._watched()
        if copy is None:
            return await self._status()
        await self.git_dir()
        # Nothing written, staged or moved since the last answer: it is still the answer. Asked before the
        # new mark below, which counts as a change of its own.
        known = self.known_dirty_paths()
        if known is not None:
            return known
        looking = copy.status_look
        if looking is not None and copy.status_look_key in (None, self._status_key_now(copy)):
            # git is being asked already (the look after a landing while a freed task's check comes in),
            # and nothing has changed since it began: its answer is this one too. A look that began
            # before a change is not waited for; its answer would not be this one.
            await looking.wait()
            known = self.known_dirty_paths()
            if known is not None:
                return known
        look = copy.status_look = anyio.Event()
        copy.status_look_key = None
        try:
            return await self._look_at_dirty_paths(copy)
        finally:
            if copy.status_look is look:
                copy.status_look = copy.status_look_key = None
            look.set()

    async def _look_at_dirty_paths(self, copy: WatchedCopy) -> list[str]:
        # Taken before git looks: whatever changes while it does is after the new mark.
        mark = copy.tracker.mark() if copy.index_bytes is None else None
        stamp = file_stamp(await self.git_dir() / "index")
        head = await self.head()
        key = (copy.tracker.generation, stamp, head or "")
        copy.status_look_key = key
        paths = await self._changed_paths(copy)
        dirty = await self._status(paths)
        if paths is not None:
            copy.status_key, copy.status_paths = key, tuple(dirty)
        if mark is not None and head is not None and mark > copy.mark:
            copy.mark, copy.index_stamp, copy.head, copy.dirty = mark, stamp, head, frozenset(dirty)
            copy.tracker.forget_before(mark)
        return dirty

    async def change_bound(self, base: str) -> list[str] | None:
        """For a recycled copy still at ``base`` with the index its reset left: the paths that may differ
        from ``base``, from its watch alone (no process), when each is a file or nothing (a directory's
        ``stat`` says nothing of the files in it). Every dirty path is among them, and a diff against
        ``base`` taken now shows the whole change (``diff_against``). None otherwise."""
        copy = self._watched()
        if copy is None or copy.index_bytes is None or copy.head != base:
            return None
        if file_stamp(await self.git_dir() / "index") != copy.index_stamp or await self.head() != base:
            return None
        paths = await self._changed_paths(copy)
        if paths is None or any(_is_directory(self.root / path) for path in paths):
            return None
        return paths

    def shows_whole_change(self, diff: WorkingDiff) -> bool:
        """Whether ``diff`` is all that differs between its base and its tree (``diff_against``)."""
        return self._made.is_whole(diff)

    async def refresh_dirty_paths(self) -> None:
        """Let git list a watched copy's dirty paths now, when nothing is known since the last change, so
        that ``known_dirty_paths`` answers a later question without a process; nothing for a copy that is
        not watched (its answer would not be kept)."""
        if self._watched() is not None and self.known_dirty_paths() is None:
            await self.dirty_paths()

    def known_dirty_paths(self) -> list[str] | None:
        """``dirty_paths``' last answer for a watched copy while nothing was written, staged or moved since
        (what its tracker and the index and HEAD files say, without git); None when that is not known.

        Synchronous on purpose: nothing else on the event loop runs between the look and the answer."""
        copy = self._watched()
        if copy is None or copy.status_paths is None:
            return None
        key = self._status_key_now(copy)
        return list(copy.status_paths) if key is not None and copy.status_key == key else None

    def _status_key_now(self, copy: WatchedCopy) -> StatusKey | None:
        """What a ``dirty_paths`` answer is valid for, as the copy is now (its tracker's generation, the
        index file's stamp, HEAD's commit), read without git; None for a HEAD only git can resolve."""
        git_dir = self._git_dir_path
        if git_dir is None:
            return None
        content = read_head_file(git_dir)
        head = content if _OBJECT_ID.fullmatch(content) else _loose_branch(git_dir, content)
        if head is None:
            return None
        return (copy.tracker.generation, file_stamp(git_dir / "index"), head)

    async def _status(self, paths: Sequence[str] | None = None) -> list[str]:
        if paths is None:
            args: tuple[str, ...] = ("--", ".", _EXCLUDE_STATE)
        elif not paths:
            return []
        else:
            args = ("--", *paths)
        result = await self._run(
            "status",
            "--porcelain",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            *args,
            env=_LITERAL if paths is not None else None,
            few_paths=paths is not None,
        )
        return [entry[3:] for entry in result.stdout.split("\0") if len(entry) > 3]

    async def watch(self, *, recycled: bool = False, skip: Sequence[str] = ()) -> bool:
        """Follow this working copy's changes from now on (see ``autodev.workspace.changes``); whether it
        can be. ``recycled``: a pooled worktree, exactly at its HEAD now, which ``recycle`` resets by
        undoing only what changed. Otherwise the copy is scanned once, and the relative directories in
        ``skip`` (git-ignored ones) are not watched."""
        git_dir = await self.git_dir()
        head = await self.head()
        if head is None:
            return False
        skipped = (".git", ".autodev", *skip)
        copy = changes.watch(
            self.root,
            head,
            git_dir / "index",
            skip=skipped,
            skip_ignore_files=bool(skip),
            keep_index=recycled,
        )
        if copy is None:
            return False
        if not recycled:
            copy.dirty = frozenset(await self._status())  # after the watches: nothing falls in between
        return True

    def unwatch(self) -> None:
        """Stop following this copy's changes."""
        changes.forget(self.root)

    async def ignored_directories(self) -> list[str]:
        """The directories git ignores as a whole (``build``, ``node_modules``, ``.venv``...)."""
        listed = await self._run(
            "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
        )
        return sorted(name.rstrip("/") for name in listed.stdout.split("\0") if name.endswith("/"))

    async def recycle(self, base: str, *, keep_ignored: bool = False) -> bool:
        """Make this recycled worktree exactly ``base`` by undoing what changed since it was last reset and
        writing what differs between the two bases: O(changed files), where ``checkout --force`` and
        ``clean`` read every file. False, with nothing done, when the changes are not known (the caller
        then resets it the full way). ``keep_ignored``: ignored files stay (a worktree setup made them)."""
        copy = self._watched()
        if copy is None or copy.index_bytes is None:
            return False
        # The index is put back as the last reset left it below: only the files written since matter.
        paths = await self._changed_paths(copy, index=False)
        if paths is None:
            return False
        git_dir = await self.git_dir()
        if (git_dir / "index.lock").exists():
            return False  # a git killed mid-command: the full reset fails on it and the worktree is made anew
        if file_stamp(git_dir / "index") != copy.index_stamp:
            # The index as the last reset left it (the old base, every file's stat data current), written
            # under git's own lock.
            _write_index(git_dir, copy.index_bytes)
        moved = await self.changed_between(copy.head, base) if base != copy.head else []
        # A file the last task wrote that the new base changes too (the usual case: that task's change has
        # landed) is written from the new base below, whatever stands there (a file git writes anew, an
        # untracked file, a directory or a link in its place): undoing it first would write it twice.
        written_over = set(moved)
        paths = [path for path in paths if path not in written_over]
        if paths:
            await self._run("clean", "-ffdq" if keep_ignored else "-ffdxq", "--", *paths, env=_LITERAL)
            listed = await self._run("ls-files", "-z", "-s", "--", *paths, env=_LITERAL)
            tracked = [
                entry.split("\t", 1)[1]
                for entry in listed.stdout.split("\0")
                if "\t" in entry and not entry.startswith("160000 ")  # a submodule is no file to write
            ]
            # Removed first, so each is written anew: a file whose stat data an agent forged, or that is
            # hard-linked from elsewhere, is not left as it is.
            await anyio.to_thread.run_sync(_remove_all, [self.root / path for path in tracked])
            if tracked:
                listing = "\0".join(tracked).encode("utf-8", errors="surrogateescape")
                await self._run("checkout-index", "-f", "-q", "-z", "--stdin", stdin=listing)
        if moved:
            restored = await self._restore_from(base, moved)
            if restored.code != 0:
                detail = " ".join(restored.stderr.split())[:300] or f"exit code {restored.code}"
                raise GitError(f"git restore failed in {self.root}: {detail}")
        head = await self.head()
        if head != base and (head is None or not _move_detached_head(git_dir, base, head)):
            await self._run("update-ref", "--no-deref", "HEAD", base)
        await self._note_head_moved()
        return True

    async def settle(self) -> None:
        """Take this recycled worktree's state now as its mark (right after a reset and its setup)."""
        copy = self._watched()
        if copy is None:
            return
        head = await self.head()
        index = await self.git_dir() / "index"
        if head is None or copy.tracker.broken is not None:
            self.unwatch()
            await self.watch(recycled=True)
            return
        mark = copy.tracker.mark()
        copy.tracker.forget_before(mark)
        copy.mark, copy.head, copy.dirty = mark, head, frozenset()
        copy.index_bytes = index.read_bytes()
        copy.index_stamp = file_stamp(index)
        copy.snapshot_key = copy.snapshot_tree = copy.snapshot_index = None
        copy.status_key = copy.status_paths = None

    async def checkout_detached(self, commit: str) -> None:
        """Make the tree exactly ``commit`` (detached), dropping every change and untracked file in it.

        Only ever run in a task's own worktree, never in the user's main tree.
        """
        await self._run("checkout", "--detach", "--force", "-q", commit)
        await self._note_head_moved()
        await self._run("clean", "-fdxq", "-e", ".autodev")

    async def replay(self, commit: str, onto: str, message: str) -> str | list[str]:
        """A commit with ``commit``'s change on top of ``onto``, or the paths that conflict.

        A task's change that the landings since its base left alone, where nothing is deleted, is put into
        ``onto``'s tree without git (``autodev.workspace.trees``). Otherwise the 3-way merge runs in git's
        object store (``merge-tree --write-tree``, git 2.38+): no working tree is touched, whatever the
        outcome. Older git replays with ``cherry-pick`` in this tree instead.
        """
        spliced = await self._spliced_tree(commit, onto)
        if spliced is not None:
            replayed = await self.commit_tree(spliced, onto, message)
            self._made.note_replay(replayed, commit)
            return replayed
        merged = await self._run("merge-tree", "--write-tree", "--name-only", onto, commit, check=False)
        if merged.code > 1:
            return await self._cherry_pick_onto(commit, onto)
        lines = merged.stdout.split("\n")
        if merged.code == 1:
            conflicted = [line for line in lines[1 : lines.index("") if "" in lines else None] if line]
            return conflicted or [" ".join(merged.stdout.split())[:300]]
        replayed = await self.commit_tree(lines[0].strip(), onto, message)
        self._made.note_replay(replayed, commit)
        return replayed

    async def _spliced_tree(self, commit: str, onto: str) -> str | None:
        """The tree git's merge of ``commit``'s change onto ``onto`` has, written without git when that
        merge has one outcome (``CommitFacts.change_onto``) and the trees it rewrites are loose objects;
        None when git must merge."""
        change = self._made.change_onto(commit, onto, none_deleted=True)
        if change is None:
            return None
        writer = await self._writer()
        if writer is None or not writer.still_valid(os.environ):
            return None
        onto_tree = await self.tree_of(onto)
        splice = functools.partial(splice_tree, writer, onto_tree, dict(change.entries))
        try:
            return await anyio.to_thread.run_sync(splice)
        except OSError as exc:  # git says what is wrong (a full disk, a permission) in its own words
            _log.debug("git.tree_not_spliced", root=str(self.root), error=str(exc))
            return None

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
        """A commit of ``tree`` on top of ``parent``, made in the object store only (no branch moves):
        written as git writes it where that is certain to be the same (``autodev.workspace.objects``), by
        ``git commit-tree`` otherwise."""
        writer = await self._writer()
        commit: str | None = None
        if writer is not None and writer.still_valid(os.environ):
            try:
                commit = await anyio.to_thread.run_sync(writer.write, tree, parent, message)
            except OSError as exc:  # git says what is wrong (a full disk, a permission) in its own words
                _log.debug("git.commit_object_not_written", root=str(self.root), error=str(exc))
        if commit is None:
            made = await self._run(*await self._identity(), "commit-tree", tree, "-p", parent, "-m", message)
            commit = made.stdout.strip()
        self._made.note(commit, tree=tree, parent=parent)
        return commit

    async def prepare_commits(self) -> None:
        """Learn now what AutoDev's commits need from git (the identities and configuration it resolves),
        which the first commit would otherwise ask for on its way."""
        await self._writer()

    async def _writer(self) -> CommitWriter | None:
        """The repository's in-process commit writer, or None where git must write its commits."""
        if self._like is not None:
            return await self._like._writer()
        if self._commit_writer_asked:
            # Known: no lock, whose acquiring hands the event loop to every other ready task first.
            return self._commit_writer
        async with self._commit_writer_lock:
            if not self._commit_writer_asked:
                identity = await self._identity()
                author = await self._run(*identity, "var", "GIT_AUTHOR_IDENT", check=False)
                committer = await self._run(*identity, "var", "GIT_COMMITTER_IDENT", check=False)
                listing = await self._run("config", "-z", "--list", check=False)
                if author.code == committer.code == listing.code == 0:
                    self._commit_writer = CommitWriter.from_git(
                        await self.common_dir() / "objects",
                        author.stdout,
                        committer.stdout,
                        _config_entries(listing.stdout),
                        os.environ,
                    )
                self._commit_writer_asked = True
        return self._commit_writer

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
        moved = await self._fast_forward_changed(commit)
        if moved is None:
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

    async def _fast_forward_changed(self, commit: str) -> bool | None:
        """``merge --ff-only`` for a watched main checkout, writing only the paths the commits change (git's
        merge reads every file of the tree); None when the copy is not watched. Refuses, as git does, when
        a path it would write has local changes or is an untracked file."""
        copy = self._watched()
        head = await self.head()
        if copy is None or copy.index_bytes is not None or head is None:
            return None
        if not await self.is_ancestor(head, commit):
            return False
        if self._made.parent_of(commit) == head:
            # One process for the paths to write and the patch the task's record keeps (``commit_patch``),
            # unless ``learn_change`` read them ahead or they are the task's own diff: a commit replayed
            # again under the integration lock, after another landing moved the branch, is not learned
            # ahead, and a git process there holds up every landing behind it.
            known = self._made.changes.pop(commit, None) or self._made.known_change(commit)
            change = known if known is not None else await self._names_and_patch(head, commit)
            self._made.note_names(commit, change)
            written = list(change.names)
            self._made.note_patch(commit, change.patch)
        else:
            written = await self.changed_between(head, commit)
        if _overlapping(await self.dirty_paths(), written):
            return False
        if written:
            restored = await self._restore_noting_the_index(copy, commit, written)
            if restored.code != 0:
                return False  # what it wrote is what a fast-forward cut short leaves: the caller repairs
        message = f"merge {commit}: Fast-forward"
        if not await self._advance_branch(commit, head, message):
            args = ("update-ref", "-m", message, "HEAD", commit, head)
            if (await self._run(*args, check=False)).code != 0:
                return False
        copy.note_move(head, commit, written)
        return True

    async def _advance_branch(self, new: str, old: str, message: str) -> bool:
        """``update-ref -m <message> HEAD <new> <old>`` written as git writes it, reflogs included
        (``autodev.workspace.refs.advance_branch``); False when git must move the branch."""
        writer = await self._writer()
        if writer is None or writer.reflogs is None or not writer.still_valid(os.environ):
            return False
        git_dir = await self.git_dir()
        if git_dir.resolve() != (await self.common_dir()).resolve():
            return False  # a linked worktree's HEAD and reflog are apart from its branches: git moves it
        line = writer.reflog_line(old, new, message)
        move = functools.partial(
            advance_branch, git_dir, new, old, line, create_logs=writer.reflogs == "create"
        )
        try:
            return await anyio.to_thread.run_sync(move)
        except BranchMoveError as exc:
            raise GitError(f"cannot move the branch in {self.root} to {new[:10]}: {exc.strerror}") from exc

    async def _restore_from(
        self, commit: str, paths: Sequence[str], *, index_file: Path | None = None
    ) -> _GitOutput:
        """``paths`` of the index (``index_file`` instead when given) and the working tree as ``commit`` has
        them (removed where it has none)."""
        listing = "\0".join(paths).encode("utf-8", errors="surrogateescape")
        args = ("restore", f"--source={commit}", "--staged", "--worktree")
        env = _LITERAL if index_file is None else {**_LITERAL, "GIT_INDEX_FILE": str(index_file)}
        return await self._run(
            *args,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            env=env,
            stdin=listing,
            check=False,
            few_paths=True,
        )

    async def _restore_noting_the_index(
        self, copy: WatchedCopy, commit: str, paths: Sequence[str]
    ) -> _GitOutput:
        """``_restore_from`` in a watched main checkout whose index AutoDev knows: git restores into a copy
        of that index held under git's own index lock, which then replaces the index as git's own write
        would. The new index differs from the copy's HEAD at most where the one before did and at
        ``paths``: remembered, so the next look at the checkout asks git for the index's changes no more
        (``_changed_paths``). An index nobody knows, or a lock someone holds, is restored as before."""
        git_dir = await self.git_dir()
        index, lock = git_dir / "index", git_dir / "index.lock"
        head, stamp = copy.head, file_stamp(index)
        # At the mark's own index, what it has staged is among the mark's dirty paths already.
        known = [] if stamp == copy.index_stamp else copy.answers.get(("index", head, stamp))
        if stamp is None or known is None:
            return await self._restore_from(commit, paths)
        # In a worker thread: the index is copied whole (megabytes in a large repository), and a landing's
        # fast-forward must not stop every other task's work on the event loop meanwhile.
        if not await anyio.to_thread.run_sync(_copy_under_git_lock, index, lock, stamp):
            # A lock someone holds (git then says who), or an index someone wrote meanwhile.
            return await self._restore_from(commit, paths)
        try:
            restored = await self._restore_from(commit, paths, index_file=lock)
            if restored.code != 0:
                lock.unlink()
                return restored
            written = os.stat(lock)
            os.replace(lock, index)
        except BaseException:
            lock.unlink(missing_ok=True)
            raise
        now = file_stamp(index)
        # The same file, unwritten since (a rename changes its ctime, nothing else): the index git wrote.
        if now is not None and (now.device, now.inode, now.size, now.mtime_ns) == (
            written.st_dev,
            written.st_ino,
            written.st_size,
            written.st_mtime_ns,
        ):
            copy.remember(("index", head, now), sorted({*known, *paths}))
        return restored

    async def paths_unlike(self, paths: Sequence[str], *commits: str) -> list[str]:
        """Those of ``paths`` whose file in this working tree (or its absence) matches their version in
        none of ``commits``: content someone wrote, not a state git's own checkout of one would leave."""
        if not paths:
            return []
        versions: list[dict[str, str]] = []
        for commit in commits:
            listed = await self._run("ls-tree", "-z", commit, "--", *paths, env=_LITERAL)
            found: dict[str, str] = {}
            for record in listed.stdout.split("\0"):
                meta, _, name = record.partition("\t")
                if name and len(parts := meta.split()) == 3:
                    found[name] = parts[2]
            versions.append(found)
        # Regular files are compared by their blob id; a link or a directory where a file may go is left
        # to its owner (never taken for what a checkout wrote).
        files = [
            path
            for path in paths
            if "\n" not in path and (self.root / path).is_file() and not (self.root / path).is_symlink()
        ]
        hashed: dict[str, str] = {}
        if files:
            listing = "".join(f"{path}\n" for path in files).encode("utf-8", errors="surrogateescape")
            out = await self._run("hash-object", "--no-filters", "--stdin-paths", stdin=listing)
            hashed = dict(zip(files, out.stdout.split(), strict=True))
        unlike = []
        for path in paths:
            target = self.root / path
            if path in hashed:
                like = any(version.get(path) == hashed[path] for version in versions)
            elif not target.exists() and not target.is_symlink():
                like = any(path not in version for version in versions)
            else:
                like = False
            if not like:
                unlike.append(path)
        return unlike

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
