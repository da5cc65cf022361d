"""The size of a change read from its patch agrees with git's own ``--numstat`` for every kind of change:
new, deleted, renamed (as AutoDev's diffs show it: a deletion and a new file), mode change, binary, untracked
in a new directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio

from autodev.workspace.change_facts import numstat
from autodev.workspace.git import GitRepo


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_numstat_of_a_working_diff_matches_gits(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "edited.py").write_text("a = 1\nb = 2\nc = 3\n")
    (root / "gone.py").write_text("x = 1\ny = 2\n")
    (root / "moved.py").write_text("".join(f"line {n}\n" for n in range(30)))
    (root / "tool.sh").write_text("echo hi\n")
    (root / "image.bin").write_bytes(bytes(range(256)))
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    base = _git(root, "rev-parse", "HEAD").strip()

    (root / "edited.py").write_text("a = 1\nb = 20\nc = 3\nd = 4\n")
    (root / "gone.py").unlink()
    _git(root, "mv", "moved.py", "renamed.py")
    (root / "tool.sh").chmod(0o755)
    (root / "image.bin").write_bytes(bytes(reversed(range(256))))
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "fresh.py").write_text("z = 1\n")

    diff = anyio.run(GitRepo(root).diff_against, base)
    ours = {path: (added, deleted) for path, added, deleted in numstat(diff.patch)}

    _git(root, "add", "-A")
    theirs = {}
    for line in _git(root, "diff", "--cached", "--numstat", "--no-renames", base).splitlines():
        added, deleted, path = line.split("\t")
        theirs[path] = (None, None) if added == "-" else (int(added), int(deleted))
    assert ours == theirs
    assert ours["image.bin"] == (None, None)
    assert ours["new/deep/fresh.py"] == (1, 0)
    assert ours["tool.sh"] == (0, 0)  # a mode change only
    assert (ours["moved.py"], ours["renamed.py"]) == ((0, 30), (30, 0))
    assert set(ours) == set(diff.files)
