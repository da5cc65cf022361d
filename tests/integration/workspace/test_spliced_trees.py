"""A change put into a branch's tree without git (``autodev.workspace.trees.splice_tree``): for changes
that touch other paths than the branch's own since the base and delete nothing, the tree is the one git's
3-way merge (``git merge-tree --write-tree``) writes, object for object; where it cannot be sure of that
(a packed tree, an entry in the way) it answers None and leaves the merge to git. Real git repositories,
SHA-1 and SHA-256."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.git_trees import Edit, branches, commit, entries_between, object_writer, tree_of, write
from support.parallel import git

from autodev.workspace import trees
from autodev.workspace.trees import paths_meet, read_loose_object, splice_tree


def _git_bytes(root: Path, *args: str, stdin: bytes = b"") -> bytes:
    """git's output as bytes: a tree object's body holds raw object ids."""
    return subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, check=True).stdout


def _repo(tmp_path: Path, *init: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", *init)
    for path in ("README.md", "pkg/core.py", "pkg/sub/deep.py", "a/inner.py", "docs/guide.md"):
        write(root, path, f"# {path}\n")
    write(root, "tool.sh", "echo hi\n")
    write(root, "data.bin", bytes(range(256)))
    commit(root, "base")
    return root


def _spliced_and_merged(root: Path, landing: Edit, task: Edit) -> tuple[str | None, str]:
    base, landed, own = branches(root, landing, task)
    spliced = splice_tree(object_writer(root), tree_of(root, landed), entries_between(root, base, own))
    merged = git(root, "merge-tree", "--write-tree", landed, own).strip()
    return spliced, merged


def _writes(*paths: str, content: str | bytes = "x\n") -> Edit:
    def edit(root: Path) -> None:
        for path in paths:
            write(root, path, content)

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
    git(root, "fsck", "--strict", "--no-dangling")


def test_a_tree_with_a_mode_git_no_longer_writes_is_rewritten_as_gits_merge_rewrites_it(
    tmp_path: Path,
) -> None:
    """Old repositories hold trees with a file mode of 100664; git reads it as 100644, and so writes the
    trees a merge changes. So does the splice."""
    root = _repo(tmp_path)
    listing = git(root, "ls-tree", "HEAD").replace("100644 blob", "100664 blob", 1)
    body = b"".join(
        b"%s %s\0%s" % (meta.split()[0].encode(), name.encode(), bytes.fromhex(meta.split()[2]))
        for line in listing.splitlines()
        for meta, name in [line.split("\t", 1)]
    )
    written = _git_bytes(root, "hash-object", "-t", "tree", "-w", "--literally", "--stdin", stdin=body)
    old_tree = written.decode().strip()
    assert b"100664 README.md" in _git_bytes(root, "cat-file", "tree", old_tree)  # ``-p`` would show 100644
    base = git(root, "commit-tree", old_tree, "-m", "old").strip()
    git(root, "reset", "-q", "--hard", base)
    spliced, merged = _spliced_and_merged(root, _writes("landed.py"), _writes("task.py"))
    assert spliced == merged


def test_a_packed_tree_is_left_togit(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    base, landed, own = branches(root, _writes("pkg/landed.py"), _writes("pkg/t.py"))
    git(root, "repack", "-adq")
    git(root, "prune-packed")
    writer = object_writer(root)
    assert read_loose_object(writer.objects_dir, tree_of(root, landed)) is None
    assert splice_tree(writer, tree_of(root, landed), entries_between(root, base, own)) is None


@pytest.mark.parametrize(
    ("landing", "task"),
    [
        # The branch has a file where the task's file needs a directory, and the other way round.
        (_writes("extra"), _writes("extra/inside.py")),
        (_writes("extra/inside.py"), _writes("extra")),
    ],
    ids=["file in the way", "directory in the way"],
)
def test_an_entry_in_the_way_is_left_togit(tmp_path: Path, landing: Edit, task: Edit) -> None:
    root = _repo(tmp_path)
    base, landed, own = branches(root, landing, task)
    assert splice_tree(object_writer(root), tree_of(root, landed), entries_between(root, base, own)) is None
    merged = subprocess.run(["git", "merge-tree", "--write-tree", landed, own], cwd=root, capture_output=True)
    assert merged.returncode == 1  # git's merge has a conflict to report there


def test_a_deletion_or_a_malformed_entry_is_left_togit(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    writer = object_writer(root)
    tree = tree_of(root, "HEAD")
    blob = git(root, "rev-parse", "HEAD:README.md").strip()
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


def test_the_trees_kept_between_splices_stay_within_their_memory_and_a_dropped_one_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory of thousands of files is kept parsed between landings, each landing into it making
    another version: the versions kept stay within a memory budget, and a splice after its base was
    dropped reads the tree again and writes git's tree all the same."""
    root = _repo(tmp_path)
    for number in range(2000):
        write(root, f"big/file{number:04}.py", f"{number}\n")
    commit(root, "a large directory")
    monkeypatch.setattr(trees._KeptTrees, "_BUDGET", 600_000)  # about two versions of big/
    kept = trees._KeptTrees()
    monkeypatch.setattr(trees, "_kept", kept)
    writer = object_writer(root)
    blob = git(root, "rev-parse", "HEAD:README.md").strip()
    tree = tree_of(root, "HEAD")
    for number in range(6):
        spliced = splice_tree(writer, tree, {f"big/new{number}.py": ("100644", blob)})
        assert spliced is not None
        tree = spliced
        assert kept._size <= 600_000
    listed = git(root, "ls-tree", "-r", "--name-only", tree).split()
    assert len(listed) == 7 + 2000 + 6 and "big/new5.py" in listed
    git(root, "fsck", "--strict", "--no-dangling")
    # The first version of big/ was dropped: splicing onto it again reads it from the store.
    first = tree_of(root, "HEAD")
    assert kept.get(writer.objects_dir, git(root, "rev-parse", "HEAD:big").strip()) is None
    again = splice_tree(writer, first, {"big/new0.py": ("100644", blob)})
    assert again is not None and git(root, "rev-parse", f"{again}:big/new0.py").strip() == blob
