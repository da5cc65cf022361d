"""A change that only adds text files, diffed without ``git diff`` (``autodev.workspace.patches``), checked
against git byte for byte: the same paths, modes, object ids and patch, and git asked for everything else.
Real git, a real pool of worktrees."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.git_calls import command_names, git_started
from support.parallel import commit_everything as _commit
from support.parallel import git as _git
from support.parallel import own_home, recycled_copy

from autodev.workspace.git import GitRepo, WorkingDiff
from autodev.workspace.objects import patch_settings


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _repository(tmp_path, monkeypatch)


def _repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, object_format: str = "sha1") -> Path:
    own_home(tmp_path / "home", monkeypatch)
    root = tmp_path.resolve() / "repo"
    (root / "pkg" / "deep").mkdir(parents=True)
    _git(root, "init", "-q", f"--object-format={object_format}")
    (root / ".gitignore").write_text(".autodev/\n")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "pkg" / "deep" / "mod.py").write_text("MOD = 1\n")
    _commit(root, "init")
    return root


def _git_diff(root: Path, base: str, tree: str) -> tuple[tuple[str, ...], str, list[tuple[str, str, str]]]:
    """What git itself says of the change, asked as AutoDev asks it: the paths, the patch, and each path's
    new mode and id."""
    options = ["-z", "--patch-with-raw", "--binary", "--full-index", "--no-renames", "--no-abbrev"]
    options += ["--no-color", "--src-prefix=a/", "--dst-prefix=b/", f"-O{os.devnull}"]
    out = subprocess.run(
        ["git", "diff", *options, base, tree, "--", ".", ":(exclude).autodev"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8", errors="surrogateescape")
    raw, _, patch = out.partition("\0\0")
    fields = raw.split("\0")
    pairs = zip(fields[::2], fields[1::2], strict=True)
    entries = sorted((path, meta.split(" ")[1], meta.split(" ")[3]) for meta, path in pairs)
    return tuple(path for path, _, _ in entries), patch, entries


async def _diff(
    repo: Path, monkeypatch: pytest.MonkeyPatch | None, edit: Callable[[Path], object]
) -> tuple[WorkingDiff, Path, str, list[str]]:
    """A task's recycled worktree after ``edit``: its diff against the base, the worktree, the base, and the
    git commands the diff started (recorded through ``monkeypatch`` when given)."""
    main, root, base = await recycled_copy(repo)
    edit(root)
    started = git_started(monkeypatch) if monkeypatch is not None else []
    diff = await GitRepo(root, like=main).diff_against(base)
    return diff, root, base, command_names(started)


def _assert_gits_own(diff: WorkingDiff, root: Path, base: str) -> None:
    names, patch, entries = _git_diff(root, base, diff.tree)
    assert diff.files == names
    assert diff.patch == patch
    assert [(path, mode, blob) for path, (mode, blob) in diff.entries] == entries


def _one_new_file(root: Path) -> None:
    (root / "pkg" / "deep" / "new.py").write_text("NEW = 1\n")


def _several_new_files(root: Path) -> None:
    (root / "notes.txt").write_text("first\n\nthird line, after a blank one\n")
    (root / "pkg" / "deep-er.py").write_text("# sorts before pkg/deep/ in git's order\n")
    (root / "pkg" / "deep" / "z.py").write_text("Z = 26\n")
    (root / "pkg" / "a.py").write_text("A = 1\n")


def _edge_contents(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    (root / "one_line_no_newline.txt").write_bytes(b"no newline")
    (root / "lines_no_newline.txt").write_bytes(b"one\ntwo")
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n\r\n")
    (root / "blank_lines.txt").write_bytes(b"\n\n\n")
    (root / "latin1.txt").write_bytes("caf\xe9 na\xefve\n".encode("latin-1"))
    (root / "utf8.txt").write_text("café ✓\n", encoding="utf-8")
    (root / "cut_utf8.txt").write_bytes("✓".encode()[:2])
    (root / "backslash.txt").write_bytes(b"\\ No newline at end of file\n")


def _executable(root: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)


@pytest.mark.parametrize(
    "edit",
    [_one_new_file, _several_new_files, _edge_contents, _executable],
    ids=["one-file", "several-files-in-git-order", "edge-contents", "executable"],
)
@pytest.mark.asyncio
async def test_new_text_files_are_diffed_as_git_diffs_them_and_git_is_not_asked(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], object]
) -> None:
    diff, root, base, started = await _diff(repo, monkeypatch, edit)
    assert "diff" not in started
    assert "write-tree" not in started
    _assert_gits_own(diff, root, base)


@pytest.mark.asyncio
async def test_new_text_files_in_a_sha256_repository_are_diffed_as_git_diffs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repository(tmp_path, monkeypatch, object_format="sha256")

    def edit(root: Path) -> None:
        _several_new_files(root)
        _edge_contents(root)

    diff, root, base, started = await _diff(repo, monkeypatch, edit)
    assert len(base) == 64 and "diff" not in started
    _assert_gits_own(diff, root, base)


def _edit_beside_a_new_file(root: Path) -> None:
    (root / "app.py").write_text("VALUE = 2\n")
    (root / "new.py").write_text("NEW = 1\n")


def _binary(root: Path) -> None:
    (root / "image.bin").write_bytes(b"PNG\0" + bytes(range(256)))


def _nul_late_in_the_file(root: Path) -> None:
    # git looks for a NUL in the first 8,000 bytes only: this one is text to it.
    (root / "late.txt").write_bytes(b"x" * 8000 + b"\0tail\n")


def _link(root: Path) -> None:
    os.symlink("app.py", root / "link.py")


def _names_git_quotes(root: Path) -> None:
    (root / "with space.py").write_text("A = 1\n")
    (root / "naïve.py").write_text("B = 2\n")
    (root / 'quote".py').write_text("C = 3\n")


@pytest.mark.parametrize(
    ("edit", "asks_git"),
    [
        (_edit_beside_a_new_file, True),
        (_binary, True),
        (_nul_late_in_the_file, False),
        (_link, True),
        (_names_git_quotes, True),
    ],
    ids=["an-edit", "binary", "nul-after-8000-bytes", "link", "quoted-names"],
)
@pytest.mark.asyncio
async def test_anything_but_new_plain_text_files_is_diffed_by_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], object], asks_git: bool
) -> None:
    diff, root, base, started = await _diff(repo, monkeypatch, edit)
    assert ("diff" in started) == asks_git
    _assert_gits_own(diff, root, base)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("diff.suppressBlankEmpty", "true"),
        ("diff.newSettingOfAFutureGit", "true"),
        ("core.bigFileThreshold", "4"),
    ],
)
@pytest.mark.asyncio
async def test_a_setting_that_may_change_the_patch_leaves_it_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str
) -> None:
    _git(repo, "config", key, value)

    def edit(root: Path) -> None:
        (root / "pkg" / "new.py").write_text("NEW = 1\n\nOTHER = 2\n")

    diff, root, base, started = await _diff(repo, monkeypatch, edit)
    assert "diff" in started
    _assert_gits_own(diff, root, base)


@pytest.mark.asyncio
async def test_settings_that_leave_the_patch_as_autodev_asks_for_it_keep_it_in_process(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {
        "diff.algorithm": "histogram",
        "diff.context": "1",
        # Every patch AutoDev records names its prefixes, asks for no colour and for git's order (an order
        # file named relative to the main checkout is not even there for a linked worktree); git runs at
        # the top of the working tree, where relative paths are whole ones.
        "diff.noPrefix": "true",
        "diff.mnemonicPrefix": "true",
        "diff.srcPrefix": "from/",
        "color.ui": "always",
        "diff.relative": "true",
        "diff.orderFile": ".git/order",
    }
    (repo / ".git" / "order").write_text("pkg/*\n")
    for key, value in settings.items():
        _git(repo, "config", key, value)
    diff, root, base, started = await _diff(repo, monkeypatch, _several_new_files)
    assert "diff" not in started
    _assert_gits_own(diff, root, base)
    assert diff.patch.startswith("diff --git a/notes.txt b/notes.txt\n")


@pytest.mark.asyncio
async def test_a_patch_git_writes_is_one_git_apply_takes_whatever_the_users_diff_settings(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit is git's to diff: the patch still has the a/ and b/ prefixes and no colour codes, under the
    settings that would take them away, so that the change can be applied again (a retry's old change, a
    parked one)."""
    for key, value in (("diff.noPrefix", "true"), ("color.ui", "always"), ("diff.mnemonicPrefix", "true")):
        _git(repo, "config", key, value)
    diff, root, _, started = await _diff(repo, monkeypatch, _edit_beside_a_new_file)
    assert "diff" in started
    assert diff.patch.startswith("diff --git a/app.py b/app.py\n") and "\x1b" not in diff.patch
    reverse = await anyio.run_process(
        ["git", "apply", "--check", "--reverse", "--binary", "-"],
        cwd=root,
        input=diff.patch.encode("utf-8", errors="surrogateescape"),
        check=False,
    )
    assert reverse.returncode == 0, reverse.stderr


def test_which_settings_change_a_new_files_patch() -> None:
    assert patch_settings({"diff.algorithm": "patience", "diff.external": "", "color.diff": "auto"}) == []
    # A driver's settings apply only through an attribute (looked for separately).
    assert patch_settings({"diff.python.xfuncname": "^def"}) == []
    # What every patch AutoDev records sets itself: prefixes, colour, order.
    set_by_autodev = {"diff.noprefix": "true", "color.diff": "always", "diff.orderfile": "order"}
    assert patch_settings(set_by_autodev) == []
    others = {"diff.suppressblankempty": "true", "diff.newfangled": "1", "core.bigfilethreshold": "1k"}
    assert patch_settings(others) == ["diff.suppressblankempty", "diff.newfangled", "core.bigFileThreshold"]


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-+@", min_size=1, max_size=8).filter(
    lambda name: name not in (".", "..", "pkg", "deep", "app.py", "mod.py") and not name.startswith(".git")
)
# Into directories the base has: a new directory is named whole by the watch, and left to git.
_PATH = st.tuples(st.sampled_from(["", "pkg/", "pkg/deep/"]), _NAME).map("".join)
_TEXT = st.binary(max_size=300).map(lambda data: data.replace(b"\0", b"\n"))


@pytest.mark.asyncio
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(_PATH, _TEXT, min_size=1, max_size=4))
async def test_any_new_text_files_are_diffed_as_git_diffs_them(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes]
) -> None:
    repo = _repository(tmp_path_factory.mktemp("added"), monkeypatch)

    def edit(root: Path) -> None:
        for path, data in files.items():
            (root / path).write_bytes(data)

    diff, root, base, _ = await _diff(repo, None, edit)
    _assert_gits_own(diff, root, base)
