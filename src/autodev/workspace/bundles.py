"""A task's commits and working state carried between machines as git bundles.

A remote worker (``autodev.orchestrator.execute.ray_executor``) clones the task's base commit from its
node's ``CloneCache``, which receives from the head a bundle of only the commits it lacks, and sends back
the task's *working state*: a commit of every file of its working copy (tracked and untracked; ignored files
and ``.autodev/`` excepted) whose first parent is the base and whose second is the task's previous working
state, under ``refs/autodev/working/<task>``, in a bundle holding only what the base lacks (so every earlier
state's tree travels too: later steps diff against them). The head keeps the newest one per task, so a
worker that dies is replaced by one that continues from the files of the last recorded step, and the head
lands the change from the same files.

These functions are synchronous: the worker's replica calls them from inside a plan-manager method, and the
head calls them in a worker thread.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from filelock import FileLock

from autodev.workspace.git import GitError, run_git_now

__all__ = [
    "WORKING_REF_PREFIX",
    "CloneCache",
    "bundle_refs",
    "existing_commits",
    "keep_working_state",
    "restore_working_state",
    "unbundle",
    "working_ref",
    "working_state",
    "working_tree",
]

WORKING_REF_PREFIX = "refs/autodev/working/"
# Working-state commits never land (the landing makes the task's own commit): any identity will do, and
# one of ours works where the node's git has none.
_IDENTITY = ("-c", "user.name=AutoDev", "-c", "user.email=autodev@localhost")
_TIMEOUT_S = 600.0


def working_ref(task_id: str) -> str:
    """Where a task's newest working state is kept."""
    return f"{WORKING_REF_PREFIX}{task_id}"


def _git(
    root: Path,
    *args: str,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> bytes:
    full_env = {**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    result = run_git_now(args, cwd=root, env=full_env, timeout_s=_TIMEOUT_S, stdin=stdin)
    if check and result.returncode != 0:
        detail = " ".join(result.stderr.decode("utf-8", errors="replace").split())[:300]
        raise GitError(f"git {' '.join(args[:2])} failed in {root}: {detail or result.returncode}")
    return result.stdout


def bundle_refs(root: Path, refs: Sequence[str], *, exclude: Sequence[str] = ()) -> bytes:
    """A bundle of ``refs`` and what they need, less what ``exclude`` (commits the receiver has) holds."""
    return _git(root, "bundle", "create", "-q", "-", *refs, *(f"^{commit}" for commit in exclude))


def unbundle(root: Path, data: bytes) -> dict[str, str]:
    """Write a bundle's objects into ``root``'s repository; its refs as ``{ref: commit}`` (none moved).

    A small bundle's objects are written loose, as ``git fetch`` does below ``transfer.unpackLimit``: a
    run receives a few such bundles per task, and as many packs would soon pass ``gc.autoPackLimit`` and
    set git repacking the whole repository. A large one is kept as the pack it is."""
    header, pack = _split_bundle(data)
    if pack is not None and len(pack) >= _PACK_HEADER and _object_count(pack) <= _UNPACK_LIMIT:
        prerequisites = [line[1:].split()[0] for line in header if line.startswith("-")]
        missing = set(prerequisites) - set(existing_commits(root, prerequisites))
        if missing:
            raise GitError(f"a bundle needs commits {root} lacks: {', '.join(sorted(missing))[:300]}")
        _git(root, "unpack-objects", "-q", stdin=pack)
    else:
        with tempfile.NamedTemporaryFile(prefix="autodev-", suffix=".bundle") as file:
            file.write(data)
            file.flush()
            _git(root, "bundle", "unbundle", file.name)  # checks the prerequisites itself
    refs: dict[str, str] = {}
    for line in header:
        if line[:1] not in ("#", "-", "@", ""):
            commit, _, ref = line.partition(" ")
            if ref:
                refs[ref] = commit
    return refs


# Git's default ``transfer.unpackLimit``, and the size of a pack's header (signature, version, count).
_UNPACK_LIMIT = 100
_PACK_HEADER = 12


def _split_bundle(data: bytes) -> tuple[list[str], bytes | None]:
    """A bundle's header lines (version, capabilities, prerequisites, refs) and its pack."""
    end = data.find(b"\n\n")
    if end < 0 or not data.startswith(b"# v"):
        return [], None
    return data[:end].decode("utf-8", errors="replace").splitlines(), data[end + 2 :]


def _object_count(pack: bytes) -> int:
    return int.from_bytes(pack[8:_PACK_HEADER], "big")


class CloneCache:
    """A node's store of one repository's objects, shared by the clones of every task that runs there.

    A bare repository (``<directory>/<key>.git``, ``key`` naming the repository by its first commit)
    that keeps each base commit it received under ``refs/autodev/have/``: a task whose base the node has
    clones at once, and one whose base is new asks for a bundle of only the commits the node lacks
    (``bundle_refs(..., exclude=cache.haves())``). Clones borrow the objects (``objects/info/alternates``), so
    nothing here is ever pruned: the cache runs git with automatic maintenance off. Several tasks on a node
    write to it at once; git writes objects and refs safely, and a lock keeps two from creating it.
    """

    HAVES_SENT = 32

    def __init__(self, directory: Path, key: str) -> None:
        self.root = directory / f"{key}.git"

    def ensure(self) -> None:
        """Create the bare repository unless it exists (under a lock: tasks start side by side)."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root) + ".lock", timeout=_TIMEOUT_S):
            if not (self.root / "HEAD").exists():
                staging = self.root.with_name(f"{self.root.name}.{os.getpid()}.new")
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir()
                _git(staging, "init", "-q", "--bare")
                _git(staging, "config", "gc.auto", "0")
                _git(staging, "config", "maintenance.auto", "false")
                staging.rename(self.root)

    def has(self, commit: str) -> bool:
        """Whether the cache holds ``commit`` (a base it received, or one such a base reaches)."""
        found = _git(self.root, "rev-parse", "-q", "--verify", f"{commit}^{{commit}}", check=False)
        return found.decode().strip() == commit

    def haves(self) -> list[str]:
        """The newest base commits the cache holds (the head excludes what they reach from a bundle)."""
        listed = _git(
            self.root,
            "for-each-ref",
            "--sort=-committerdate",
            f"--count={self.HAVES_SENT}",
            "--format=%(objectname)",
            "refs/autodev/have/",
        )
        return listed.decode().split()

    def obtain(self, base: str, fetch: Callable[[list[str]], bytes]) -> None:
        """Make sure the cache holds ``base``: when it does not, ``fetch`` is given the haves and returns a
        bundle holding ``base``, which is received.

        Under a lock, because tasks on one node start side by side, often on the same new base. Without
        it the second could find the base missing, then list it among its haves once the first received
        it (and the head's bundle of the base less itself is empty, which git refuses to make), or find
        the base's commit while the first still unpacks its trees, and clone from missing objects."""
        with FileLock(str(self.root) + ".receive.lock", timeout=_TIMEOUT_S):
            if not self.has(base):
                self.receive(fetch(self.haves()), base)

    def receive(self, data: bytes, base: str) -> None:
        """Store a bundle holding ``base``, and remember ``base`` as had."""
        unbundle(self.root, data)
        _git(self.root, "update-ref", f"refs/autodev/have/{base}", base)

    def clone(self, root: Path, commit: str) -> None:
        """A working copy at ``root`` checked out at ``commit`` (detached), borrowing the cache's objects.

        Made as ``git clone --shared`` would make it, less the copy of the cache's refs: a new repository
        whose ``objects/info/alternates`` names the cache's objects. ``git clone`` of the cache took time
        in proportion to the bases it had received (200 ms after 200 tasks), this takes a constant 25."""
        _git(root.parent, "init", "-q", str(root))
        alternates = root / ".git" / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(f"{(self.root / 'objects').resolve()}\n", encoding="utf-8")
        _git(root, "checkout", "-q", "--detach", commit)


def existing_commits(root: Path, commits: Sequence[str]) -> list[str]:
    """Those of ``commits`` that ``root``'s repository holds as commits (one git call)."""
    if not commits:
        return []
    listed = _git(
        root, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="\n".join(commits).encode()
    )
    return [line.split()[0] for line in listed.decode().splitlines() if line.endswith(" commit")]


def working_tree(root: Path, base: str, *, index: Path | None = None) -> str:
    """The tree of every file of ``root``'s working copy (ignored files and ``.autodev/`` excepted), made
    with an index of its own: the working copy's index and HEAD stay as they are. ``index``: keep that
    index file between calls (started from ``base`` when missing), so each later call only looks at what
    changed since the last; without it a temporary one is used."""
    if index is not None:
        return _tree_with_index(root, base, index)
    git_dir = Path(_git(root, "rev-parse", "--absolute-git-dir").decode().strip())
    temporary = git_dir / f"autodev-working-{os.getpid()}.index"
    try:
        return _tree_with_index(root, base, temporary)
    finally:
        temporary.unlink(missing_ok=True)


def _tree_with_index(root: Path, base: str, index: Path) -> str:
    env = {"GIT_INDEX_FILE": str(index)}
    if not index.exists():
        _git(root, "read-tree", base, env=env)
    _git(root, "add", "-A", env=env)
    return _git(root, "write-tree", env=env).decode().strip()


def keep_working_state(root: Path, base: str, task_id: str, tree: str) -> str:
    """Commit ``tree`` on top of ``base`` as the task's newest working state, under ``working_ref``."""
    message = f"AutoDev working state of {task_id}"
    parents = ["-p", base]
    previous = _git(root, "rev-parse", "-q", "--verify", f"{working_ref(task_id)}^{{commit}}", check=False)
    if previous.strip():
        # The task's earlier states stay reachable (second parent): later steps diff against the trees
        # earlier ones recorded (what the reviewer saw), wherever the task continues.
        parents += ["-p", previous.decode().strip()]
    made = _git(root, *_IDENTITY, "commit-tree", tree, *parents, "-m", message).decode().strip()
    _git(root, "update-ref", working_ref(task_id), made)
    return made


def working_state(root: Path, base: str, task_id: str) -> tuple[str, str]:
    """``working_tree`` kept by ``keep_working_state``: its ``(tree, commit)``."""
    tree = working_tree(root, base)
    return tree, keep_working_state(root, base, task_id, tree)


def restore_working_state(root: Path, base: str, commit: str, task_id: str) -> None:
    """Make ``root``'s working copy the files of ``commit`` with HEAD and the index at ``base``, as an
    agent's edits leave them, and ``commit`` the task's newest working state there. Untracked files that
    are not ignored go; ignored ones (build outputs) stay."""
    _git(root, "clean", "-fdq", "-e", ".autodev")
    _git(root, "checkout", "-q", "--detach", "--force", commit)
    _git(root, "reset", "-q", base)
    _git(root, "update-ref", working_ref(task_id), commit)
