"""A branch's tree with a change's files put in, written without starting git: the replay of a change that
nothing else touched.

A task's change lands on a branch that other landings moved since the task's base, and git replays it by a
3-way merge (``git merge-tree --write-tree``): a process of several milliseconds on a task's way to its
dependents, and again under the integration lock when another landing came in between. When the change and
the landings since its base touch different paths, and neither deletes anything, that merge has one
outcome: the branch's tree with the change's files, each with its mode and object, in their places. Without
a deletion git's rename detection (of files or of whole directories) has nothing to pair, so no file moves;
with no path in common, and none below another, no file, directory or type conflicts.

``splice_tree`` writes that tree: it reads the trees along the change's paths (loose objects, as git's
merges and AutoDev's own writes leave them), puts the entries in, and writes the rewritten trees as git
writes them, with the modes as git normalises them when it reads a tree. Anything it cannot read or place
exactly (a packed tree, an entry in the way, a tree out of git's order) makes it answer None, and git
merges instead.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from autodev.workspace.objects import CommitWriter

__all__ = [
    "ABSENT_MODE",
    "FileEntry",
    "entries_at",
    "paths_meet",
    "raw_entries",
    "read_loose_object",
    "splice_tree",
]

# A file's new mode and object id in a change, as ``git diff --raw`` shows them.
FileEntry: TypeAlias = tuple[str, str]
# The new mode ``git diff --raw`` gives a deleted file.
ABSENT_MODE = "000000"

_TREE_MODE = b"40000"
_CANONICAL_MODES = frozenset({b"100644", b"100755", b"120000", b"160000", _TREE_MODE})
_FILE_MODES = frozenset({"100644", "100755", "120000", "160000"})
_RAW_ID_LENGTH = {40: 20, 64: 32}


def raw_entries(raw: str) -> dict[str, FileEntry]:
    """Each path's new mode and object id from the raw part of ``git diff -z --raw --no-abbrev --no-renames``
    (``:<old mode> <new mode> <old id> <new id> <status>``, then the path, each field ended by NUL)."""
    fields = raw.split("\0")
    entries: dict[str, FileEntry] = {}
    for meta, path in zip(fields[::2], fields[1::2], strict=False):
        parts = meta.split(" ")
        if path and len(parts) == 5:
            entries[path] = (parts[1], parts[3])
    return entries


def read_loose_object(objects_dir: Path, object_id: str) -> tuple[bytes, bytes] | None:
    """The type and the body of the loose object ``object_id``; None when it is not a readable loose object
    of the store (packed, in an alternate store, or damaged)."""
    try:
        data = zlib.decompress((objects_dir / object_id[:2] / object_id[2:]).read_bytes())
    except (OSError, zlib.error):
        return None
    header, nul, body = data.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if not nul or not size.isdigit() or int(size) != len(body):
        return None
    return kind, body


def _canonical_mode(mode: bytes) -> bytes | None:
    """``mode`` as git takes it when it reads a tree (``canon_mode``), which is how its merges write it."""
    try:
        value = int(mode, 8)
    except ValueError:
        return None
    kind = value & 0o170000
    if kind == 0o040000:
        return _TREE_MODE
    if kind == 0o100000:
        return b"100755" if value & 0o100 else b"100644"
    if kind == 0o120000:
        return b"120000"
    return b"160000"


def _sort_key(name: bytes, mode: bytes) -> bytes:
    # git orders a tree's entries by name, a directory's as if it ended in "/".
    return name + b"/" if mode == _TREE_MODE else name


@dataclass(frozen=True, slots=True)
class _Tree:
    """A tree's body (modes as git reads them) and where each entry starts, in git's order: an entry is
    found by bisection and a few are put in by slicing, without going through the others (a directory
    of thousands of files is rewritten by every landing that adds one)."""

    keys: list[bytes]  # each entry's sort key (``_sort_key``), ascending
    starts: list[int]  # where each entry starts in ``body``, and the body's length last
    body: bytes
    width: int  # the length of a raw object id

    def find(self, key: bytes) -> int | None:
        index = bisect.bisect_left(self.keys, key)
        return index if index < len(self.keys) and self.keys[index] == key else None

    def object_at(self, index: int) -> str:
        return self.body[self.starts[index + 1] - self.width : self.starts[index + 1]].hex()

    def mode_at(self, index: int) -> str:
        start = self.starts[index]
        return self.body[start : self.body.index(b" ", start)].decode("ascii")

    def with_entries(self, entries: Mapping[bytes, bytes]) -> _Tree:
        """This tree with ``entries`` (sort key: whole entry) put in, an entry of the same key replaced."""
        keys: list[bytes] = []
        starts: list[int] = []
        pieces: list[bytes] = []
        length = copied = 0  # the new body's length; the old entries before ``copied`` are in it
        for key in [*sorted(entries), None]:
            found = len(self.keys) if key is None else bisect.bisect_left(self.keys, key, copied)
            if found > copied:  # the old entries in between, as they are
                shift = length - self.starts[copied]
                keys.extend(self.keys[copied:found])
                starts.extend([start + shift for start in self.starts[copied:found]])
                pieces.append(self.body[self.starts[copied] : self.starts[found]])
                length += self.starts[found] - self.starts[copied]
            if key is None:
                break
            keys.append(key)
            starts.append(length)
            pieces.append(entries[key])
            length += len(entries[key])
            copied = found + 1 if found < len(self.keys) and self.keys[found] == key else found
        starts.append(length)
        return _Tree(keys, starts, b"".join(pieces), self.width)


def _starts(body: bytes, width: int, count: int) -> list[int]:
    starts, position = [0] * (count + 1), 0
    for index in range(count):
        position = body.index(b"\0", position) + 1 + width
        starts[index + 1] = position
    return starts


class _KeptTrees:
    """Trees read or written lately, by store and id, the least recently used dropped first: a landing's
    tree is the next landing's base, so a large directory is parsed once a run rather than at every
    landing. Bounded by the memory they take, since a directory of tens of thousands of files is
    megabytes in this form and each landing into it makes another."""

    _BUDGET = 32 << 20
    _PER_ENTRY = 100  # a key's bytes object and its offset, in the lists beside the body

    def __init__(self) -> None:
        self._trees: OrderedDict[tuple[Path, str], _Tree] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @classmethod
    def _footprint(cls, tree: _Tree) -> int:
        return len(tree.body) + cls._PER_ENTRY * len(tree.keys)

    def get(self, objects_dir: Path, tree: str) -> _Tree | None:
        with self._lock:
            found = self._trees.get((objects_dir, tree))
            if found is not None:
                self._trees.move_to_end((objects_dir, tree))
            return found

    def keep(self, objects_dir: Path, tree: str, parsed: _Tree) -> None:
        with self._lock:
            replaced = self._trees.pop((objects_dir, tree), None)
            if replaced is not None:
                self._size -= self._footprint(replaced)
            self._trees[(objects_dir, tree)] = parsed
            self._size += self._footprint(parsed)
            while self._size > self._BUDGET and len(self._trees) > 1:
                _, dropped = self._trees.popitem(last=False)
                self._size -= self._footprint(dropped)


_kept = _KeptTrees()


def _read_tree(objects_dir: Path, tree: str) -> _Tree | None:
    """A loose tree in git's order, its modes as git reads them; None otherwise."""
    known = _kept.get(objects_dir, tree)
    if known is not None:
        return known
    found = read_loose_object(objects_dir, tree)
    if found is None or found[0] != b"tree":
        return None
    body, width = found[1], _RAW_ID_LENGTH[len(tree)]
    keys: list[bytes] = []
    starts = [0]
    canonical = True
    position = 0
    while position < len(body):
        space = body.find(b" ", position)
        nul = body.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 1 + width > len(body):
            return None
        written = body[position:space]
        mode = written if written in _CANONICAL_MODES else _canonical_mode(written)
        name = body[space + 1 : nul]
        if mode is None or not name or b"/" in name:
            return None
        key = _sort_key(name, mode)
        if keys and key <= keys[-1]:
            return None  # out of git's order, or twice: git's own merge says what it makes of that
        canonical = canonical and mode == written
        keys.append(key)
        position = nul + 1 + width
        starts.append(position)
    if not canonical:
        body = _canonical_body(body, starts)
        starts = _starts(body, width, len(keys))
    parsed = _Tree(keys, starts, body, width)
    _kept.keep(objects_dir, tree, parsed)
    return parsed


def _canonical_body(body: bytes, starts: list[int]) -> bytes:
    pieces = []
    for begin, end in itertools.pairwise(starts):
        space = body.index(b" ", begin)
        pieces.append(b"%s%s" % (_canonical_mode(body[begin:space]) or b"", body[space:end]))
    return b"".join(pieces)


def _entry(mode: bytes, name: bytes, object_id: str) -> bytes:
    return b"%s %s\0%s" % (mode, name, bytes.fromhex(object_id))


def _put(
    writer: CommitWriter, tree: str | None, files: Mapping[tuple[bytes, ...], FileEntry], id_length: int
) -> str | None:
    """The id of ``tree`` (None: an empty directory) with ``files`` (path components below it: entry) put
    in, the trees it changes written; None when that cannot be done exactly here."""
    width = _RAW_ID_LENGTH[id_length]
    current = _Tree([], [0], b"", width) if tree is None else _read_tree(writer.objects_dir, tree)
    if current is None:
        return None
    below: dict[bytes, dict[tuple[bytes, ...], FileEntry]] = {}
    entries: dict[bytes, bytes] = {}
    for parts, (mode, object_id) in files.items():
        if len(parts) > 1:
            below.setdefault(parts[0], {})[parts[1:]] = (mode, object_id)
        elif current.find(parts[0] + b"/") is not None:
            return None  # a directory where the file goes: git's merge decides that one
        else:
            entries[parts[0]] = _entry(mode.encode(), parts[0], object_id)
    for name, inner in below.items():
        if current.find(name) is not None or name in entries:
            return None  # a file where a directory goes
        index = current.find(name + b"/")
        subtree = _put(writer, None if index is None else current.object_at(index), inner, id_length)
        if subtree is None:
            return None
        entries[name + b"/"] = _entry(_TREE_MODE, name, subtree)
    written = current.with_entries(entries)
    object_id = writer.write_object(b"tree", written.body, id_length=id_length)
    _kept.keep(writer.objects_dir, object_id, written)
    return object_id


def splice_tree(writer: CommitWriter, tree: str, files: Mapping[str, FileEntry]) -> str | None:
    """The id of ``tree`` with ``files`` (path: new mode and object id, from a change that deletes
    nothing) in their places, each tree along their paths written into ``writer``'s store; None when this
    cannot be written exactly (see the module docstring): git is asked then."""
    split: dict[tuple[bytes, ...], FileEntry] = {}
    for path, (mode, object_id) in files.items():
        parts = tuple(path.encode("utf-8", errors="surrogateescape").split(b"/"))
        if mode not in _FILE_MODES or len(object_id) != len(tree) or not all(map(_plain_name, parts)):
            return None
        split[parts] = (mode, object_id)
    if not split:
        return tree
    return _put(writer, tree, split, len(tree))


def entries_at(objects_dir: Path, tree: str, paths: Iterable[str]) -> dict[str, FileEntry | None] | None:
    """Each of ``paths`` as ``tree`` has it: the mode (as git reads it) and object id of the file, link or
    submodule there, None where nothing is; None for all when a tree along a path is not a readable loose
    tree, or a directory stands where a path names a file (only git says what a diff makes of that)."""
    found: dict[str, FileEntry | None] = {}
    for path in paths:
        *directories, name = path.encode("utf-8", errors="surrogateescape").split(b"/")
        parsed = _read_tree(objects_dir, tree)
        for directory in directories:
            index = parsed.find(directory + b"/") if parsed is not None else None
            if parsed is None or index is None:
                break
            parsed = _read_tree(objects_dir, parsed.object_at(index))
        else:
            if parsed is None or parsed.find(name + b"/") is not None:
                return None
            index = parsed.find(name)
            found[path] = None if index is None else (parsed.mode_at(index), parsed.object_at(index))
            continue
        if parsed is None:
            return None
        found[path] = None  # no such directory (or a file in its place): nothing at the path
    return found


def paths_meet(ours: Iterable[str], theirs: Iterable[str]) -> bool:
    """Whether two changes' paths meet: a path in both, or a path of one a directory above one of the
    other's (a file and a directory of the same name, which a merge must decide)."""
    mine = set(ours)
    above_mine = {path[:cut] for path in mine for cut in _slashes(path)}
    return any(
        path in mine or path in above_mine or any(path[:cut] in mine for cut in _slashes(path))
        for path in theirs
    )


def _plain_name(name: bytes) -> bool:
    return name not in (b"", b".", b"..")


def _slashes(path: str) -> list[int]:
    return [index for index, char in enumerate(path) if char == "/"]
