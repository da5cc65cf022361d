"""A change as ``git diff`` shows it, and the diff of a change that only adds text files, written without git.

A task's change is read after its developer's call as one ``git diff -z --patch-with-raw --no-abbrev``
between its base and its snapshot's tree, with the options of every patch AutoDev records (binary, whole
object ids, no renames, no colour, the ``a/`` and ``b/`` prefixes, whole paths in git's order): the paths,
each one's new mode and object id, and the patch the reviewer reads and the task's record keeps. It is a
process on the way from the developer's answer to the reviewer's call. When the snapshot's tree was
written without git (its files read and hashed, ``autodev.workspace.stored_files``) and every path of the
change is a file its base does not have, that output has one form, which ``added_files_change`` writes
from the bytes that were hashed:

    diff --git a/<path> b/<path>
    new file mode <mode>
    index <zeros>..<blob id>
    --- /dev/null
    +++ b/<path>
    @@ -0,0 +1,<lines> @@          ("+1" for one line; no hunk, and no "---"/"+++", for an empty file)
    +<each line>
    \\ No newline at end of file   (when the last line has none)

in git's path order (the bytes of the whole path, which is the order of git's trees). It is exact for:

- regular files (``100644``, ``100755``), not links or submodules;
- text as git tells it: no NUL byte in the first 8,000 bytes (else git writes a binary patch);
- paths of printable ASCII without a space, ``"`` or ``\\`` (git quotes other names, and follows a name with
  a space by a tab in the ``---``/``+++`` lines);
- a configuration that changes none of that form beyond what those options set
  (``autodev.workspace.objects.patch_settings``: a ``diff.*`` setting not known to leave it alone, a
  big-file threshold) and no attributes (no diff driver applies: the attribute files were looked for
  before the tree was written).

Anything else is left to git.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autodev.workspace.stored_files import StoredFile
from autodev.workspace.trees import ABSENT_MODE, FileEntry, entries_at

__all__ = ["Change", "added_files_change"]

# How much of a file git looks at for a NUL byte to call it binary (``FIRST_FEW_BYTES``).
_BINARY_PROBE = 8000
_TEXT_FILE_MODES = frozenset({"100644", "100755"})
_PLAIN_PATH_BYTES = frozenset(range(0x21, 0x7F)) - {ord('"'), ord("\\")}


@dataclass(frozen=True, slots=True)
class Change:
    """The paths a change touches, its binary patch, and each path's new mode and object id (mode
    "000000": deleted), as one ``git diff --raw`` showed them."""

    names: tuple[str, ...]
    patch: str
    entries: tuple[tuple[str, FileEntry], ...]

    @property
    def deletes(self) -> bool:
        return any(mode == ABSENT_MODE for _, (mode, _) in self.entries)


def added_files_change(objects_dir: Path, base_tree: str, files: Mapping[str, StoredFile]) -> Change | None:
    """The change between ``base_tree`` and that tree with ``files`` put in (as ``git diff`` between the
    two shows it, see the module docstring), when every one of them is a text file the base does not have;
    None otherwise, or when a tree of the base cannot be read here."""
    if not files or not all(_plain_path(path) for path in files):
        return None
    for stored in files.values():
        if stored.mode not in _TEXT_FILE_MODES or b"\0" in stored.data[:_BINARY_PROBE]:
            return None
    in_base = entries_at(objects_dir, base_tree, files)
    if in_base is None or any(entry is not None for entry in in_base.values()):
        return None
    zeros = "0" * len(base_tree)
    names = tuple(sorted(files))  # plain ASCII: the order of git's trees
    pieces: list[bytes] = []
    for name in names:
        stored = files[name]
        path = name.encode("ascii")
        pieces.append(b"diff --git a/%s b/%s\nnew file mode %s\n" % (path, path, stored.mode.encode()))
        pieces.append(b"index %s..%s\n" % (zeros.encode(), stored.blob.encode()))
        if stored.data:
            pieces.append(_added_lines(path, stored.data))
    patch = b"".join(pieces).decode("utf-8", errors="surrogateescape")
    return Change(names, patch, tuple((name, (files[name].mode, files[name].blob)) for name in names))


def _added_lines(path: bytes, data: bytes) -> bytes:
    lines = data.split(b"\n")
    complete = not lines[-1]
    if complete:
        lines.pop()
    header = b"--- /dev/null\n+++ b/%s\n" % path
    hunk = b"@@ -0,0 +1 @@\n" if len(lines) == 1 else b"@@ -0,0 +1,%d @@\n" % len(lines)
    body = b"".join(b"+%s\n" % line for line in lines)
    return header + hunk + body + (b"" if complete else b"\\ No newline at end of file\n")


def _plain_path(path: str) -> bool:
    return path.isascii() and all(ord(char) in _PLAIN_PATH_BYTES for char in path)
