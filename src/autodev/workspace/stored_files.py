"""What ``git add`` stored for files of a working tree, read back without git where it is certain.

A task's snapshot stages its changed paths into a throw-away index (``git add``, which applies git's ignore
rules and writes the blobs) and then asked ``git write-tree`` for the tree: a second process on the way from
the developer's answer to the reviewer's call, which reads the whole index. When git stored each file as
its bytes, the tree is the base's tree with each changed path's mode and blob id put in
(``autodev.workspace.trees.splice_tree``), and both come from the file itself: the blob id is the hash of
``blob <size>\\0<bytes>`` (of the link's target for a symbolic link), the mode git's ``100755`` when the owner
may execute the file, ``120000`` for a link, ``100644`` otherwise.

Git stores a file as its bytes unless something converts it: an attribute (``text``, ``eol``, ``filter``,
``ident``, ``working-tree-encoding``) from a ``.gitattributes`` along the path, ``info/attributes``, the
user's or the system's attributes file; or the configuration (``core.autocrlf``, ``core.eol``,
``core.attributesFile``; a sparse checkout, whose ``.gitattributes`` git may read from the index alone, is
left to git too). The mode follows the file only with ``core.fileMode`` and ``core.symlinks`` left on.
Wherever any of that is present, or a path is anything but a file or a link, or was deleted, or git named
it as ignored, or changed while it was read, the caller asks git. Each blob id found must also name a
loose object in the store (the one ``git add`` just wrote, or one it found there): a tree never names an
object the store lacks.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from autodev.workspace.changes import FileStamp, file_stamp
from autodev.workspace.objects import object_id
from autodev.workspace.trees import FileEntry

__all__ = ["StoredFile", "file_stamps", "stored_entries"]

# Beyond this many bytes in all, the files are left to git: reading them twice is no longer cheap.
_MOST_BYTES = 64 << 20


class StoredFile(NamedTuple):
    """A path as git stored it: its mode and blob id, and the bytes hashed for that id (a file's content,
    or a link's target)."""

    mode: str
    blob: str
    data: bytes

    @property
    def entry(self) -> FileEntry:
        return self.mode, self.blob


def file_stamps(root: Path, paths: Sequence[str]) -> dict[str, FileStamp | None]:
    """Each path's stamp now (None: nothing there), taken before git reads the files."""
    return {path: file_stamp(root / path) for path in paths}


def stored_entries(
    root: Path,
    common_dir: Path,
    before: Mapping[str, FileStamp | None],
    staged: Sequence[str],
    *,
    id_length: int,
) -> dict[str, StoredFile] | None:
    """Mode, blob id and bytes of each of ``staged`` (paths ``git add`` was given and staged, none of them
    ignored) as git stored them, from the files under ``root``; None where only git can tell.

    ``before``: the paths' stamps from before ``git add`` read them, which must still be theirs once they
    are read here. The paths were staged onto the index a reset of the copy wrote, so every
    ``.gitattributes`` that index has is in the working tree too, unless it was deleted since: a deleted
    path is among the changed ones, and sends the snapshot to git."""
    objects = common_dir / "objects"
    if _attribute_files(root, common_dir, staged):
        return None
    entries: dict[str, StoredFile] = {}
    total = 0
    for path in staged:
        stamp = before.get(path)
        if stamp is None or path == ".autodev" or path.startswith(".autodev/"):
            return None  # deleted, or not looked at before git read it
        file = root / path
        mode = stamp.mode
        if stat.S_ISLNK(mode):
            data = os.fsencode(os.readlink(file))
            entry_mode = "120000"
        elif stat.S_ISREG(mode):
            total += stamp.size
            if total > _MOST_BYTES:
                return None
            data = file.read_bytes()
            entry_mode = "100755" if mode & stat.S_IXUSR else "100644"
        else:
            return None  # a directory (its files are git's to find) or anything else
        if file_stamp(file) != stamp:
            return None  # written while git or this read it
        blob = object_id(b"blob", data, id_length=id_length)
        if not (objects / blob[:2] / blob[2:]).is_file():
            return None
        entries[path] = StoredFile(entry_mode, blob, data)
    return entries


def _attribute_files(root: Path, common_dir: Path, paths: Sequence[str]) -> bool:
    """Whether any file git reads attributes from when it stores ``paths`` exists."""
    for candidate in _global_attribute_files():
        if os.path.lexists(candidate):
            return True
    if os.path.lexists(common_dir / "info" / "attributes"):
        return True
    directories = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: depth + 1]) for depth in range(len(parts)))
    for directory in directories:
        name = f"{directory}/.gitattributes" if directory else ".gitattributes"
        if os.path.lexists(root / name):
            return True
    return False


def _global_attribute_files() -> list[Path]:
    """The user's attributes file (``core.attributesFile`` is refused before this) and the system's, in
    every place git may have been built to read it from."""
    found: list[Path] = []
    xdg = os.environ.get("XDG_CONFIG_HOME")
    home = os.environ.get("HOME")
    if xdg:
        found.append(Path(xdg) / "git" / "attributes")
    elif home:
        found.append(Path(home) / ".config" / "git" / "attributes")
    found.extend(_system_attribute_files(os.environ.get("PATH")))
    return found


@functools.cache
def _system_attribute_files(search_path: str | None) -> tuple[Path, ...]:
    """The system's attributes file where git built for ``/usr`` reads it, and beside the prefix of the
    git on ``search_path`` (found once for each ``PATH``)."""
    found = [Path("/etc/gitattributes")]
    git = shutil.which("git", path=search_path)
    if git is not None:
        found.append(Path(os.path.realpath(git)).parent.parent / "etc" / "gitattributes")
    return tuple(found)
