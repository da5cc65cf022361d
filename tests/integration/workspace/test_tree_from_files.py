"""A recycled worktree's snapshot tree written from its files without ``git write-tree``
(``autodev.workspace.stored_files``), checked against git: the same tree ``git add -A`` and ``git write-tree``
give, the commit installing an index that agrees with it, and git asked wherever it may store a file
otherwise than as its bytes. Real git, a real pool of worktrees."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.git_calls import command_names, git_started
from support.parallel import commit_everything as _commit
from support.parallel import git as _git
from support.parallel import own_home, recycled_copy

from autodev.workspace import git as git_module
from autodev.workspace.git import GitRepo

pytestmark = pytest.mark.asyncio

CRLF = b"MOD = 2\r\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    own_home(tmp_path / "home", monkeypatch)
    root = tmp_path.resolve() / "repo"
    (root / "pkg" / "deep").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\n.autodev/\n")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "tool.sh").write_text("echo hi\n")
    (root / "pkg" / "deep" / "mod.py").write_text("MOD = 1\n")
    # Stored as its bytes while nothing converts: the blob of a CRLF file is in the store, so a tree
    # naming it would not be refused for a missing object when git would have stored another blob.
    (root / "crlf.py").write_bytes(CRLF)
    _commit(root, "init")
    return root


def _git_tree(root: Path, paths: tuple[str, ...]) -> str:
    """The tree git itself writes from ``root`` with the files at ``paths`` staged (``git add -A``) onto
    HEAD's tree, in an index of its own: the other files as HEAD has them, as a task's snapshot leaves them
    (a file an attribute would now store otherwise is not staged again)."""
    index = root.parent / f"{root.name}.expected-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    for args in (["read-tree", "HEAD"], ["add", "-A", "--", *paths]):
        _git_env(root, env, *args)
    tree = _git_env(root, env, "write-tree").strip()
    index.unlink()
    return tree


def _git_env(root: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def _write_trees(started: list[tuple[str, ...]]) -> int:
    return command_names(started).count("write-tree")


async def _snapshot(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], object]
) -> tuple[GitRepo, Path, str, int]:
    """A task's recycled worktree after ``edit``: its GitRepo, root, snapshot tree, and how many
    ``git write-tree`` the snapshot started."""
    main, root, base = await recycled_copy(repo)
    copy = GitRepo(root, like=main)
    edit(root)
    started = git_started(monkeypatch)
    diff = await copy.diff_against(base)
    return copy, root, diff.tree, _write_trees(started)


def _edit(root: Path) -> None:
    (root / "app.py").write_text("VALUE = 2\n")


def _new_file_beside_others(root: Path) -> None:
    (root / "pkg" / "deep" / "new.py").write_text("NEW = 1\n")


def _new_file_in_a_new_directory(root: Path) -> None:
    (root / "pkg" / "fresh").mkdir()
    (root / "pkg" / "fresh" / "new.py").write_text("NEW = 1\n")


def _executable(root: Path) -> None:
    (root / "tool.sh").chmod(0o755)


def _link(root: Path) -> None:
    os.symlink("app.py", root / "link.py")


def _binary_and_names(root: Path) -> None:
    (root / "image.bin").write_bytes(bytes(range(256)) * 4)
    (root / "pkg" / "naïve name.py").write_text("X = 'é'\n")
    (root / "pkg" / "deep-er.py").write_text("# sorts beside pkg/deep/\n")


def _crlf_without_attributes(root: Path) -> None:
    (root / "app.py").write_bytes(b"VALUE = 3\r\n")
    (root / "pkg" / "deep" / "mod.py").write_bytes(CRLF)


@pytest.mark.parametrize(
    ("edit", "paths"),
    [
        (_edit, ("app.py",)),
        (_new_file_beside_others, ("pkg/deep/new.py",)),
        (_executable, ("tool.sh",)),
        (_link, ("link.py",)),
        (_binary_and_names, ("image.bin", "pkg/naïve name.py", "pkg/deep-er.py")),
        (_crlf_without_attributes, ("app.py", "pkg/deep/mod.py")),
    ],
    ids=["edit", "new-file", "executable", "link", "binary-and-names", "crlf-kept"],
)
async def test_the_tree_is_gits_own_and_git_writes_none(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], object], paths: tuple[str, ...]
) -> None:
    copy, root, tree, write_trees = await _snapshot(repo, monkeypatch, edit)
    assert write_trees == 0
    assert tree == _git_tree(root, paths)
    _git(root, "fsck", "--strict", "--no-dangling")

    # The commit installs the index the snapshot staged: it agrees with the commit's tree.
    commit = await copy.commit_all("task 1.2")
    assert commit is not None
    assert _git(root, "rev-parse", f"{commit}^{{tree}}").strip() == tree
    assert _git(root, "diff-index", "--cached", "--name-only", "HEAD") == ""
    assert _git(root, "status", "--porcelain", "--untracked-files=all") == ""


async def test_a_new_directory_is_left_to_git(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, _new_file_in_a_new_directory)
    assert tree == _git_tree(root, ("pkg/fresh/new.py",))
    # The watch may name the directory itself: its files are git's to find.
    assert write_trees <= 1


def _attributes_at_the_root(root: Path) -> None:
    (root / ".gitattributes").write_text("*.py text eol=lf\n")
    (root / "app.py").write_bytes(CRLF)


def _attributes_in_the_base(repo: Path) -> None:
    (repo / "pkg" / ".gitattributes").write_text("*.py text\n")
    _commit(repo, "attributes")


def _attributes_of_the_repository(repo: Path) -> None:
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("*.py text\n")


def _attributes_of_the_user(repo: Path) -> None:
    config = Path(os.environ["HOME"]) / ".config" / "git"
    config.mkdir(parents=True)
    (config / "attributes").write_text("*.py text\n")


def _autocrlf(repo: Path) -> None:
    _git(repo, "config", "core.autocrlf", "input")


def _file_mode_off(repo: Path) -> None:
    _git(repo, "config", "core.fileMode", "false")


@pytest.mark.parametrize(
    "setup",
    [
        _attributes_in_the_base,
        _attributes_of_the_repository,
        _attributes_of_the_user,
        _autocrlf,
        _file_mode_off,
    ],
    ids=["gitattributes-in-a-directory", "info-attributes", "user-attributes", "autocrlf", "filemode-off"],
)
async def test_whatever_may_convert_a_file_leaves_the_tree_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch, setup: Callable[[Path], object]
) -> None:
    setup(repo)

    def edit(root: Path) -> None:
        (root / "pkg" / "deep" / "mod.py").write_bytes(CRLF)
        (root / "tool.sh").chmod(0o755)

    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, edit)
    assert write_trees == 1
    assert tree == _git_tree(root, ("pkg/deep/mod.py", "tool.sh"))


async def test_a_gitattributes_written_by_the_agent_leaves_the_tree_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, _attributes_at_the_root)
    assert write_trees == 1
    assert tree == _git_tree(root, (".gitattributes", "app.py"))
    # git converted the file it stored, as the attribute says: the tree is not the file's bytes.
    assert _git(root, "cat-file", "-p", f"{tree}:app.py") == "MOD = 2\n"


async def test_an_ignored_path_a_deletion_or_a_file_written_meanwhile_leaves_the_tree_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ignored(root: Path) -> None:
        (root / "app.py").write_text("VALUE = 4\n")
        (root / "debug.log").write_text("ignored\n")  # named to git, which leaves it out

    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, ignored)
    assert (write_trees, tree) == (1, _git_tree(root, ("app.py",)))

    def deleted(root: Path) -> None:
        (root / "app.py").write_text("VALUE = 5\n")
        (root / "pkg" / "deep" / "mod.py").unlink()

    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, deleted)
    assert (write_trees, tree) == (1, _git_tree(root, ("app.py", "pkg/deep/mod.py")))


async def test_a_file_written_while_git_stages_it_leaves_the_tree_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process the agent left behind writes the file after ``git add`` read it: the tree must be the one
    of the index git staged, which the commit installs, not of the file as it is now."""
    stage = git_module.GitRepo._stage
    written: list[Path] = []

    async def stage_then_write(
        self: GitRepo, paths: list[str] | None, env: dict[str, str] | None = None
    ) -> list[str] | None:
        added = await stage(self, paths, env)
        if "worktrees" in str(self.root):
            # The base's own content: its blob is in the store, so only the files' stamps tell.
            (self.root / "app.py").write_text("VALUE = 1\n")
            written.append(self.root)
        return added

    monkeypatch.setattr(git_module.GitRepo, "_stage", stage_then_write)
    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, _edit)
    assert written and write_trees == 1
    assert _git(root, "cat-file", "-p", f"{tree}:app.py") == "VALUE = 2\n"


async def test_a_conversion_from_a_source_not_looked_at_is_caught_by_the_missing_object(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were git to convert a file through a source of attributes AutoDev does not look at, the blob of the
    file's bytes would not be the one ``git add`` wrote: a tree must not name it."""
    from autodev.workspace import stored_files

    monkeypatch.setattr(stored_files, "_attribute_files", lambda *_: False)
    _attributes_of_the_repository(repo)

    def edit(root: Path) -> None:
        (root / "pkg" / "deep" / "mod.py").write_bytes(b"OTHER = 1\r\n")

    _, root, tree, write_trees = await _snapshot(repo, monkeypatch, edit)
    assert write_trees == 1
    assert tree == _git_tree(root, ("pkg/deep/mod.py",))
