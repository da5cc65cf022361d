"""Refs read from the repository's files, as ``git for-each-ref`` would list them, without a git process.

AutoDev compares the repository's branches, tags and its own refs before and after every agent call; with a
git process each time, that listing was a sixth of the git processes a task started. The files backend
keeps each ref either as a loose file (``refs/heads/main`` holding a commit id) or as a line of
``packed-refs``, the loose one winning; reading both is exact, and cheaper than starting git.

Only what is certain is answered here: a repository with the reftable backend, a symbolic ref, a loose
file that holds no object id, or a name git would refuse gets ``None``, and the caller asks git. The loose
files are read before ``packed-refs``, as git reads them: ``git pack-refs`` writes ``packed-refs`` before
it deletes the loose files, so a ref being packed meanwhile is found in one of the two.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BranchMoveError", "advance_branch", "read_refs"]

_OBJECT_ID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
# A loose ref file holds one object id and a line break; anything much longer is not a ref git wrote.
_LOOSE_LIMIT = 256
_PACKED_LIMIT = 64 << 20
# Characters and sequences ``git check-ref-format`` refuses anywhere in a name.
_REFUSED_IN_NAME = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def read_refs(common_dir: Path, prefixes: Sequence[str]) -> dict[str, str] | None:
    """``{ref: object id}`` for every ref below one of ``prefixes`` (each ending in ``/``, like
    ``refs/heads/``), or None when only git can tell (see the module docstring)."""
    if (common_dir / "reftable").exists():
        return None
    found: dict[str, str] = {}
    for prefix in prefixes:
        if not prefix.startswith("refs/") or not prefix.endswith("/"):
            return None
        loose = _loose_refs(common_dir, prefix)
        if loose is None:
            return None
        found.update(loose)
    packed = _packed_refs(common_dir / "packed-refs")
    if packed is None:
        return None
    for name, object_id in packed.items():
        if name.startswith(tuple(prefixes)):
            found.setdefault(name, object_id)
    return dict(sorted(found.items()))


def _loose_refs(common_dir: Path, prefix: str) -> dict[str, str] | None:
    found: dict[str, str] = {}
    pending = [prefix.rstrip("/")]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(common_dir / directory))
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            return None  # e.g. the stub file a reftable repository keeps as ``refs/heads``
        except OSError:
            return None
        for entry in entries:
            name = f"{directory}/{entry.name}"
            if entry.is_symlink():
                return None  # a symbolic ref written as a link (old git): git resolves it
            if entry.is_dir(follow_symlinks=False):
                pending.append(name)
                continue
            if entry.name.endswith(".lock"):
                continue  # a ref being written: its value is still the file without the suffix
            object_id = _loose_value(Path(entry.path))
            if object_id is None or not _valid_name(name):
                return None
            found[name] = object_id
    return found


def _loose_value(path: Path) -> str | None:
    # None for a file gone (deleted or packed since the listing): git is asked for the whole picture.
    value = (_loose_bytes(path) or b"").rstrip(b"\n")
    return value.decode("ascii") if _OBJECT_ID.fullmatch(value) else None


def _loose_bytes(path: Path) -> bytes | None:
    """A loose ref file's bytes (at most ``_LOOSE_LIMIT`` + 1), read without following a link or blocking
    on a FIFO; b"" for anything but a regular file, None when it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, _LOOSE_LIMIT + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)


def _packed_refs(path: Path) -> dict[str, str] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > _PACKED_LIMIT:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    found: dict[str, str] = {}
    for line in b"".join(chunks).splitlines():
        if not line or line.startswith((b"#", b"^")):
            continue  # the header, and the peeled value of the annotated tag above
        object_id, _, name = line.partition(b" ")
        if not _OBJECT_ID.fullmatch(object_id):
            return None
        text = name.decode("utf-8", errors="surrogateescape")
        if not _valid_name(text):
            return None
        found[text] = object_id.decode("ascii")
    return found


def _valid_name(name: str) -> bool:
    """Whether git would list a ref of this name (the rules of ``git check-ref-format``)."""
    if _REFUSED_IN_NAME.search(name) or name.endswith((".", "/")):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))


class BranchMoveError(OSError):
    """A branch move that failed after its reflog entries were written: git must not write them again."""


def advance_branch(git_dir: Path, new: str, old: str, log_line: bytes, *, create_logs: bool) -> bool:
    """``git update-ref -m <message> HEAD <new> <old>`` for a HEAD on a loose branch, written as git writes
    it: ``HEAD.lock`` and the branch's lock taken, the branch checked to be at ``old`` under its lock,
    ``log_line`` appended to HEAD's reflog and the branch's (created with ``create_logs``, git's
    ``core.logAllRefUpdates``; otherwise only appended to logs that exist), the branch's lock renamed over
    it, ``HEAD.lock`` removed.

    ``git_dir`` must be the repository's own git directory (a linked worktree keeps HEAD apart from the
    branches). False, with nothing changed, when git has to do it: HEAD not on a branch, the branch
    packed, a lock held, the branch not at ``old``, the reftable backend, or a file that cannot be
    written before the reflogs are. A failure after the reflogs were written raises ``BranchMoveError``.
    """
    if (git_dir / "reftable").exists():
        return False
    head = _loose_text(git_dir / "HEAD")
    branch = head.removeprefix("ref: ") if head is not None and head.startswith("ref: refs/heads/") else ""
    if not _valid_name(branch):
        return False
    head_lock = git_dir / "HEAD.lock"
    branch_file = git_dir / branch
    branch_lock = branch_file.with_name(f"{branch_file.name}.lock")
    taken: list[Path] = []
    try:
        try:
            for lock in (head_lock, branch_lock):
                os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
                taken.append(lock)
            # Read again under the locks: neither HEAD nor the branch can move until they are released.
            if _loose_text(git_dir / "HEAD") != head or _loose_value(branch_file) != old:
                return False
            branch_lock.write_bytes(f"{new}\n".encode("ascii"))
        except OSError:
            return False
        try:
            for log in (git_dir / "logs" / "HEAD", git_dir / "logs" / branch):
                if create_logs:
                    log.parent.mkdir(parents=True, exist_ok=True)
                elif not log.is_file():
                    continue
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
                try:
                    os.write(fd, log_line)
                finally:
                    os.close(fd)
            os.replace(branch_lock, branch_file)
            taken.remove(branch_lock)
        except OSError as exc:
            raise BranchMoveError(exc.errno, exc.strerror or str(exc)) from exc
        return True
    finally:
        for lock in taken:
            with contextlib.suppress(OSError):
                lock.unlink()


def _loose_text(path: Path) -> str | None:
    """A small regular file's text without its final line break (HEAD), or None."""
    data = _loose_bytes(path)
    if not data or len(data) > _LOOSE_LIMIT:
        return None
    return data.rstrip(b"\n").decode("utf-8", errors="surrogateescape")
