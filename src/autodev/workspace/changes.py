"""Which paths of a working copy may have changed, without reading the whole tree: Linux inotify.

git finds a working tree's changes by looking at every file (``lstat`` of every index entry, ``readdir`` of
every directory), so each ``status``, ``add -A``, ``checkout --force`` or ``clean`` of a task costs
O(files in the repository): a tenth of a second and more per call in a repository of 50,000 files, many
times per task. A ``ChangeTracker`` watches every directory of a working copy once and keeps the paths
the kernel reported written, created, deleted, moved or re-attributed since a mark. git is then asked about
those paths only (``autodev.workspace.git``), which costs O(changed files).

The kernel queues an event inside the very system call that changes a directory entry or a file: when the
agent's processes are gone, every change they made is in the queue. What the tracker cannot vouch for it
says so (``changes_since`` returns None) and the caller falls back to git's full scan:

- the event queue overflowed, a watch could not be added (``max_user_watches``), the root itself moved;
- a file system is mounted below the root (what happens inside a mount is invisible to the watches);
- an ignore file (``.gitignore``) changed, for a tracker told to skip ignored directories.

A file hard-linked from outside the copy can be written through the other name without an event in the
copy's directories; making the link changes the file's link count, which is an event, so such a file is
among the changed paths and a recycled copy rewrites it (a new inode) before the next task.

Anything but Linux, or a kernel without inotify, gets no tracker (``ChangeTracker.start`` returns None):
git's full scans remain, exact and slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from autodev.logging import get_logger

if TYPE_CHECKING:
    import anyio

__all__ = [
    "ChangeTracker",
    "FileStamp",
    "StatusKey",
    "WatchedCopy",
    "file_stamp",
    "forget",
    "forget_all",
    "watch",
    "watched",
]

_log = get_logger("autodev.changes")

_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_UNMOUNT = 0x00002000
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000

_WATCHED = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then ``len`` bytes of NUL-padded name
_READ_SIZE = 1 << 16


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


class FileStamp(NamedTuple):
    """What ``lstat`` says of a file that changes whenever it is rewritten, replaced or its mode changes."""

    mode: int
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def file_stamp(path: Path) -> FileStamp | None:
    """``path``'s stamp now (of a link itself, not what it points to); None: nothing there."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return FileStamp(info.st_mode, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class _Unknown(Exception):
    """The tracker can no longer say what changed."""


# Closing an inotify descriptor waits, in the thread that closes it, until the kernel has retired its
# watches (a grace period: 3 to 20 ms here). Nothing needs to wait for that: a daemon thread of its own
# closes each descriptor given up (a few per run), so neither the event loop nor the end of a run waits.
def _close_later(fd: int) -> None:
    threading.Thread(target=_close, args=(fd,), name="autodev-inotify-close", daemon=True).start()


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError as exc:
        _log.warning("changes.close_failed", fd=fd, error=str(exc))


class ChangeTracker:
    """The paths below ``root`` changed since a mark (``changes_since``), from one inotify instance."""

    def __init__(self, root: Path, fd: int, skip: frozenset[str], skip_ignore_files: bool) -> None:
        self.root = root
        # Mount points are listed resolved: compared with the resolved root, looked up once.
        self._mount_prefix = os.fsencode(root.resolve()) + b"/"
        self._fd = fd
        self._skip = skip
        self._watch_ignore_files = skip_ignore_files
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory ("" is the root)
        self._wds: dict[str, int] = {}
        # Each changed path with the generation it last changed in: a mark is a generation number.
        self._changed: dict[str, int] = {}
        self._generation = 0
        self._broken: str | None = None

    @classmethod
    def start(
        cls, root: Path, *, skip: Collection[str] = (".git",), skip_ignore_files: bool = False
    ) -> ChangeTracker | None:
        """Watch every directory below ``root`` except the relative paths in ``skip`` (not descended into);
        None where inotify is not available or the tree cannot be watched whole.

        ``skip_ignore_files``: the skipped paths include directories git ignores, so a changed ``.gitignore``
        makes the tracker unsure (it may have un-ignored what is not watched)."""
        if _LIBC is None:
            return None
        fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return None
        tracker = cls(Path(root), fd, frozenset(skip), skip_ignore_files)
        try:
            tracker._watch_tree("")
        except _Unknown as exc:
            _log.info("changes.unwatchable", root=str(root), reason=str(exc))
            tracker.close()
            return None
        return tracker

    @property
    def generation(self) -> int:
        """Grows with every batch of changes read: equal generations mean nothing changed in between."""
        self.poll()
        return self._generation

    def mark(self) -> int:
        """A point to ask ``changes_since`` from: everything read so far is before it."""
        self.poll()
        self._generation += 1
        return self._generation

    def changes_since(self, mark: int) -> set[str] | None:
        """Paths (relative, ``/``-separated; a directory stands for everything below it) changed after
        ``mark``; None when the tracker cannot tell."""
        self.poll()
        if self._broken is None and self._mounted_below():
            self._broken = "a file system is mounted below the working copy"
        if self._broken is not None:
            return None
        return {path for path, generation in self._changed.items() if generation > mark}

    def forget_before(self, mark: int) -> None:
        """Drop what changed at or before ``mark`` (no caller asks for it any more)."""
        self._changed = {path: gen for path, gen in self._changed.items() if gen > mark}

    @property
    def broken(self) -> str | None:
        """Why the tracker can no longer tell what changed, or None."""
        self.poll()
        return self._broken

    def close(self) -> None:
        if self._fd >= 0:
            _close_later(self._fd)
            self._fd = -1

    def poll(self) -> None:
        """Read every queued event."""
        if self._fd < 0:
            self._broken = self._broken or "closed"
            return
        batch = False
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:
                self._broken = f"reading events failed: {exc}"
                break
            if not data:
                break
            if not batch:
                self._generation += 1
                batch = True
            try:
                self._take(data)
            except _Unknown as exc:
                self._broken = self._broken or str(exc)

    def _take(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                raise _Unknown("the event queue overflowed")
            directory = self._dirs.get(wd)
            if mask & _IN_IGNORED:
                if directory is not None:
                    self._dirs.pop(wd, None)
                    if self._wds.get(directory) == wd:
                        del self._wds[directory]
                continue
            if directory is None:
                continue  # a directory no longer watched (moved away): its path is already recorded
            if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT):
                if directory == "":
                    raise _Unknown("the working copy's root moved or was deleted")
                continue  # the parent's event names it
            name = os.fsdecode(raw)
            path = f"{directory}/{name}" if directory else name
            if path in self._skip:
                continue
            self._changed[path] = self._generation
            if self._watch_ignore_files and name == ".gitignore":
                raise _Unknown(f"{path} changed")
            if mask & _IN_ISDIR:
                if mask & (_IN_MOVED_FROM | _IN_DELETE):
                    self._unwatch_below(path)
                if mask & (_IN_CREATE | _IN_MOVED_TO):
                    self._watch_tree(path)

    def _watch_tree(self, top: str) -> None:
        """Watch ``top`` and every directory below it (symbolic links are not followed)."""
        for directory in self._directories(top):
            wd = _LIBC.inotify_add_watch(  # type: ignore[union-attr]
                self._fd, os.fsencode(self.root / directory if directory else self.root), _WATCHED
            )
            if wd < 0:
                code = ctypes.get_errno()
                if code in (errno.ENOENT, errno.ENOTDIR) and directory != "":
                    continue  # gone again already: the event of its removal is queued
                raise _Unknown(f"cannot watch {directory or '.'}: {os.strerror(code)}")
            self._dirs[wd] = directory
            self._wds[directory] = wd

    def _directories(self, top: str) -> Iterator[str]:
        yield top
        stack = [top]
        while stack:
            current = stack.pop()
            try:
                entries = list(os.scandir(self.root / current if current else self.root))
            except OSError:
                continue
            for entry in entries:
                relative = f"{current}/{entry.name}" if current else entry.name
                if relative in self._skip:
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    yield relative
                    stack.append(relative)

    def _unwatch_below(self, top: str) -> None:
        prefix = f"{top}/"
        for directory in [d for d in self._wds if d == top or d.startswith(prefix)]:
            wd = self._wds.pop(directory)
            self._dirs.pop(wd, None)
            _LIBC.inotify_rm_watch(self._fd, wd)  # type: ignore[union-attr]

    def _mounted_below(self) -> bool:
        return any(point.startswith(self._mount_prefix) for point in _MOUNTS.points())


class _MountTable:
    """The process's mount points, read again only when the kernel says the table changed: an open
    ``/proc/self/mountinfo`` reports every mount and unmount as a priority event to ``poll`` (proc(5)),
    so the usual question costs one ``poll`` instead of reading and parsing the whole table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd = -1
        self._poll: select.poll | None = None
        self._points: tuple[bytes, ...] | None = None

    def points(self) -> tuple[bytes, ...]:
        with self._lock:
            if self._poll is None:
                try:
                    self._fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    return ()
                self._poll = select.poll()
                self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
            if self._points is None or self._poll.poll(0):
                self._points = self._read()
            return self._points

    def _read(self) -> tuple[bytes, ...]:
        os.lseek(self._fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self._fd, _READ_SIZE):
            chunks.append(chunk)
        points = []
        for line in b"".join(chunks).splitlines():
            fields = line.split(b" ")
            if len(fields) > 4:
                points.append(_unescape(fields[4]))
        return tuple(points)


_MOUNTS = _MountTable()


def _unescape(mount_point: bytes) -> bytes:
    """A mount point as mountinfo writes it (space, tab, newline and backslash as octal escapes)."""
    for code in (b"\\040", b"\\011", b"\\012", b"\\134"):
        mount_point = mount_point.replace(code, bytes([int(code[1:], 8)]))
    return mount_point


# What a ``dirty_paths`` answer is valid for: the tracker's generation, the index file's stamp, HEAD's commit.
StatusKey = tuple[int, FileStamp | None, str]


@dataclass
class WatchedCopy:
    """A working copy whose changes a tracker follows, and what AutoDev last knew for certain about it.

    At ``mark``, the copy's HEAD was ``head`` and its files differed from its index only at ``dirty``;
    the index file had ``index_stamp``. Whatever differs now is among ``dirty``, the paths the tracker
    reported since, what git says differs between the index and ``head`` when the index file changed,
    and what differs between ``head`` and HEAD when HEAD moved (see ``GitRepo``).
    """

    root: Path
    tracker: ChangeTracker
    head: str
    mark: int
    index_stamp: FileStamp | None
    dirty: frozenset[str] = frozenset()
    # The index file's bytes at the last reset of a recycled copy, put back by the next reset.
    index_bytes: bytes | None = None
    # The last tree written from the copy, reusable while nothing changed: (generation, index stamp, head).
    snapshot_key: tuple[int, FileStamp | None, str] | None = None
    snapshot_tree: str | None = None
    # The throw-away index that wrote ``snapshot_tree`` (a recycled copy's commit installs it).
    snapshot_index: bytes | None = field(default=None, repr=False)
    # The last ``dirty_paths`` answer, and the (generation, index stamp, head) it was given for.
    status_key: StatusKey | None = None
    status_paths: tuple[str, ...] | None = None
    # Set while a ``dirty_paths`` look asks git, so that a second caller waits for its answer.
    status_look: anyio.Event | None = field(default=None, repr=False)
    # The (generation, index stamp, head) that look's answer will be for, once it has read them.
    status_look_key: StatusKey | None = None
    # git's answers about two fixed states (what differs between two commits, between an index file of a
    # given stamp and a commit), asked again by each check until the copy's next mark.
    answers: dict[tuple[str, str, object], list[str]] = field(default_factory=dict, repr=False)

    # HEAD moves AutoDev made itself: the commit moved to -> (the commit before, the paths the move wrote).
    moves: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict, repr=False)

    def remember(self, question: tuple[str, str, object], answer: list[str]) -> list[str]:
        if len(self.answers) >= _ANSWERS_KEPT:
            self.answers.clear()
        self.answers[question] = answer
        return answer

    def note_move(self, before: str, after: str, paths: Collection[str]) -> None:
        """AutoDev moved HEAD from ``before`` to ``after``, and the paths that differ are among ``paths``."""
        if len(self.moves) >= _ANSWERS_KEPT:
            self.moves.clear()
        self.moves[after] = (before, tuple(paths))

    def moved_paths(self, old: str, new: str) -> set[str] | None:
        """Paths among which ``old`` and ``new`` differ, from AutoDev's own moves back from ``new`` to
        ``old``; None when those moves do not lead there."""
        found: set[str] = set()
        current = new
        for _ in range(len(self.moves)):
            if current == old:
                return found
            step = self.moves.get(current)
            if step is None:
                return None
            current, paths = step
            found.update(paths)
        return found if current == old else None


_WATCHED_COPIES: dict[str, WatchedCopy] = {}
_ANSWERS_KEPT = 64


def watch(
    root: Path,
    head: str,
    index: Path,
    *,
    skip: Collection[str] = (".git",),
    skip_ignore_files: bool = False,
    keep_index: bool = False,
    dirty: Collection[str] = (),
) -> WatchedCopy | None:
    """Start following ``root``'s changes from now, when it is in the state the arguments describe (HEAD
    at ``head``, files differing from ``index`` only at ``dirty``); None where that is not possible.
    ``keep_index``: keep the index's bytes for the next ``GitRepo.recycle``."""
    forget(root)
    tracker = ChangeTracker.start(root, skip=skip, skip_ignore_files=skip_ignore_files)
    if tracker is None:
        return None
    copy = WatchedCopy(
        root=Path(root),
        tracker=tracker,
        head=head,
        mark=tracker.mark(),
        index_stamp=file_stamp(index),
        dirty=frozenset(dirty),
        index_bytes=index.read_bytes() if keep_index and index.exists() else None,
    )
    _WATCHED_COPIES[_key(root)] = copy
    return copy


def watched(root: Path) -> WatchedCopy | None:
    """The watched copy at ``root``, if one is."""
    return _WATCHED_COPIES.get(_key(root)) if _WATCHED_COPIES else None


def forget(root: Path) -> None:
    """Stop following ``root`` (nothing when it is not followed)."""
    copy = _WATCHED_COPIES.pop(_key(root), None)
    if copy is not None:
        copy.tracker.close()


def forget_all() -> None:
    """Stop following every copy (a process that ends its runs: the trackers' file descriptors close)."""
    for root in list(_WATCHED_COPIES):
        forget(Path(root))


def _key(root: Path) -> str:
    return os.path.abspath(root)
