"""A change put into a branch's tree without git (``autodev.workspace.trees.splice_tree``): for changes
that touch other paths than the branch's own since the base and delete nothing, the tree is the one git's
3-way merge (``git merge-tree --write-tree``) writes, object for object; where it cannot be sure of that
(a packed tree, an entry in the way) it answers None and leaves the merge to git. Real git repositories,
SHA-1 and SHA-256."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from autodev.workspace.objects import CommitWriter
from autodev.workspace.trees import FileEntry, paths_meet, read_loose_object, splice_tree

_IDENT = "Jane Q. Developer <jane@example.com> 1700000000 +0000"

Edit = Callable[[Path], None]


def _git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
        input=stdin,
    )
    return done.stdout.decode("utf-8", errors="surrogateescape")


def _write(root: Path, path: str, content: str | bytes = "x\n") -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "--allow-empty", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()


def _repo(tmp_path: Path, *init: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", *init)
    for path in ("README.md", "pkg/core.py", "pkg/sub/deep.py", "a/inner.py", "docs/guide.md"):
        _write(root, path, f"# {path}\n")
    _write(root, "tool.sh", "echo hi\n")
    _write(root, "data.bin", bytes(range(256)))
    _commit(root, "base")
    return root


def _branches(root: Path, landing: Edit, task: Edit) -> tuple[str, str, str]:
    """The base, a landing on it (the branch moved) and a task's commit on the base."""
    base = _git(root, "rev-parse", "HEAD").strip()
    landing(root)
    landed = _commit(root, "landing")
    _git(root, "checkout", "-q", "--detach", base)
    task(root)
    own = _commit(root, "task")
    return base, landed, own


def _entries(root: Path, old: str, new: str) -> dict[str, FileEntry]:
    """Each changed path's new mode and object id, as AutoDev reads them from ``git diff --raw``."""
    fields = _git(root, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new).split("\0")
    entries: dict[str, FileEntry] = {}
    for meta, path in zip(fields[::2], fields[1::2], strict=False):
        parts = meta.split(" ")
        if path and len(parts) == 5:
            entries[path] = (parts[1], parts[3])
    return entries


def _writer(root: Path) -> CommitWriter:
    objects = Path(_git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "objects"
    writer = CommitWriter.from_git(objects, _IDENT, _IDENT, {}, os.environ)
    assert writer is not None
    return writer


def _tree(root: Path, commit: str) -> str:
    return _git(root, "rev-parse", f"{commit}^{{tree}}").strip()


def _spliced_and_merged(root: Path, landing: Edit, task: Edit) -> tuple[str | None, str]:
    base, landed, own = _branches(root, landing, task)
    spliced = splice_tree(_writer(root), _tree(root, landed), _entries(root, base, own))
    merged = _git(root, "merge-tree", "--write-tree", landed, own).strip()
    return spliced, merged


def _writes(*paths: str, content: str | bytes = "x\n") -> Edit:
    def edit(root: Path) -> None:
        for path in paths:
            _write(root, path, content)

    return edit


def _each(*edits: Edit) -> Edit:
    def edit(root: Path) -> None:
        for one in edits:
            one(root)

    return edit


def _executable(path: str) -> Edit:
    return lambda root: (root / path).chmod(0o755)


def _link(path: str, target: str) -> Edit:
    return lambda root: os.symlink(target, root / path)


CASES: dict[str, tuple[Edit, Edit]] = {
    "files in new nested directories on both sides": (
        _writes("lib/one/two/landed.py"),
        _writes("src/three/four/new.py"),
    ),
    "both add and edit in the same directories": (
        _each(_writes("pkg/landed.py"), _writes("pkg/sub/deep.py", content="landed\n")),
        _each(_writes("pkg/added.py", "pkg/sub/x.py"), _writes("pkg/core.py", content="edited\n")),
    ),
    # git orders a directory as if its name ended in "/": "a-b" and "a.txt" sort before "a/", "a0" after.
    "names that sort around a directory's": (
        _writes("a/landed.py"),
        _writes("a-b", "a.txt", "a0", "a/task.py"),
    ),
    "a mode change, a link, a binary file": (
        _writes("docs/landed.md"),
        _each(
            _executable("tool.sh"),
            _link("link.py", "pkg/core.py"),
            _writes("data.bin", content=bytes(reversed(range(256)))),
        ),
    ),
    "names with spaces and accents": (
        _writes("docs/über landed.md"),
        _writes("docs/ünïcödé name.md"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_spliced_tree_is_the_tree_gits_merge_writes(tmp_path: Path, case: str, object_format: str) -> None:
    root = _repo(tmp_path, f"--object-format={object_format}")
    landing, task = CASES[case]
    spliced, merged = _spliced_and_merged(root, landing, task)
    assert spliced == merged
    # Every tree it wrote is one git reads as sound.
    _git(root, "fsck", "--strict", "--no-dangling")


def test_a_tree_with_a_mode_git_no_longer_writes_is_rewritten_as_gits_merge_rewrites_it(
    tmp_path: Path,
) -> None:
    """Old repositories hold trees with a file mode of 100664; git reads it as 100644, and so writes the
    trees a merge changes. So does the splice."""
    root = _repo(tmp_path)
    listing = _git(root, "ls-tree", "HEAD").replace("100644 blob", "100664 blob", 1)
    body = b"".join(
        b"%s %s\0%s" % (meta.split()[0].encode(), name.encode(), bytes.fromhex(meta.split()[2]))
        for line in listing.splitlines()
        for meta, name in [line.split("\t", 1)]
    )
    old_tree = _git(root, "hash-object", "-t", "tree", "-w", "--literally", "--stdin", stdin=body).strip()
    assert "100664 README.md" in _git(root, "cat-file", "tree", old_tree)  # as stored (``-p`` shows 100644)
    base = _git(root, "commit-tree", old_tree, "-m", "old", stdin=b"").strip()
    _git(root, "reset", "-q", "--hard", base)
    spliced, merged = _spliced_and_merged(root, _writes("landed.py"), _writes("task.py"))
    assert spliced == merged


def test_a_packed_tree_is_left_to_git(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    base, landed, own = _branches(root, _writes("pkg/landed.py"), _writes("pkg/t.py"))
    _git(root, "repack", "-adq")
    _git(root, "prune-packed")
    writer = _writer(root)
    assert read_loose_object(writer.objects_dir, _tree(root, landed)) is None
    assert splice_tree(writer, _tree(root, landed), _entries(root, base, own)) is None


@pytest.mark.parametrize(
    ("landing", "task"),
    [
        # The branch has a file where the task's file needs a directory, and the other way round.
        (_writes("extra"), _writes("extra/inside.py")),
        (_writes("extra/inside.py"), _writes("extra")),
    ],
    ids=["file in the way", "directory in the way"],
)
def test_an_entry_in_the_way_is_left_to_git(tmp_path: Path, landing: Edit, task: Edit) -> None:
    root = _repo(tmp_path)
    base, landed, own = _branches(root, landing, task)
    assert splice_tree(_writer(root), _tree(root, landed), _entries(root, base, own)) is None
    merged = subprocess.run(["git", "merge-tree", "--write-tree", landed, own], cwd=root, capture_output=True)
    assert merged.returncode == 1  # git's merge has a conflict to report there


def test_a_deletion_or_a_malformed_entry_is_left_to_git(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    writer = _writer(root)
    tree = _tree(root, "HEAD")
    blob = _git(root, "rev-parse", "HEAD:README.md").strip()
    assert splice_tree(writer, tree, {"README.md": ("000000", "0" * 40)}) is None
    assert splice_tree(writer, tree, {"pkg/../x": ("100644", blob)}) is None
    assert splice_tree(writer, tree, {"x": ("040000", tree)}) is None
    assert splice_tree(writer, tree, {}) == tree


@pytest.mark.parametrize(
    ("ours", "theirs", "meet"),
    [
        (["pkg/a.py"], ["pkg/b.py"], False),
        (["pkg/a.py"], ["pkg/a.py"], True),
        (["pkg"], ["pkg/a.py"], True),
        (["pkg/a.py"], ["pkg"], True),
        (["pkg/a.py"], ["pk"], False),
        (["pkg-a/x"], ["pkg/x"], False),
        (["a/b/c"], ["a/b"], True),
    ],
)
def test_paths_meet_where_a_merge_has_to_decide(ours: list[str], theirs: list[str], meet: bool) -> None:
    assert paths_meet(ours, theirs) is meet
    assert paths_meet(theirs, ours) is meet
