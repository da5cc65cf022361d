"""The makespan's floor: ``bench/makespan.py``'s workload with nothing of a task but its git and its syncs.

The same seeded DAG, agent latency and parallelisms as ``bench/makespan.py``, run by a dispatcher that does
for each task only the operations AutoDev's task costs on its way today, in the same order, with AutoDev's
own primitives: the git commands its task runs (through ``run_git``, with the same configuration and
environment), ledger records appended and synced under the ledger's lock as the plan manager makes them
(ten durable a task, eleven more synced with them), the seven evidence files written atomically and synced
with their directory, and the commit objects written in-process. No orchestration logic runs: no prompt, no
check after a call, no policy, no model copies, no events. Its efficiency is therefore an upper bound of what
AutoDev can reach while a task's path holds these operations: the orchestrator's own work only lowers it.

A task's path here, as in a run of ``bench/makespan.py``: the reset of its pooled worktree to the branch
(``restore``, when the worktree's base is behind), the developer's call, the snapshot (``add`` into a scratch
index, the tree written from the file as ``autodev.workspace.stored_files`` writes it, and the diff against
the base from the same bytes, as ``autodev.workspace.patches`` writes a new file's), the reviewer's and the
test engineer's calls, its commit, the replay onto the branch when the branch moved (prepared before the
integration lock and again under it when another landing came first: the branch's tree with the task's file
put in, written in-process as AutoDev writes it for a change no landing since its base met,
``autodev.workspace.trees``), and under the lock the fast-forward (``restore`` of the main checkout's paths
through git's index lock, the branch written as a loose ref). After the landing, off the path: the main
checkout's ``status`` and the freed worktree's reset.

``--git off`` leaves every git process out (the trees and commits are then fake ids), ``--syncs off`` every
sync: what the floor would be without them. ``--snapshot write-tree`` has ``git write-tree`` write the
snapshot's tree after the ``add`` and ``git diff`` read the change, as AutoDev did before ADR 0053.
``--snapshot in-process`` writes the snapshot's blob and trees without git (the file is known, so this is
exact here, and what a task's path would hold if AutoDev wrote its snapshots so, ``add`` included): what the
next step of ADR 0051 could give. ``--landing in-process`` lands a task in the main checkout without git: its
file written from the bytes the task wrote, and the index written with the file's entry put in
(``index_with_new_file``: exact here, for a new file in an index of git's format 2 or 3 with SHA-1 ids, its
optional extensions dropped, as git rebuilds them), instead of ``git restore`` into a copy of the index: what
an index written by AutoDev could take off the path under the integration lock. Every run ends by asking
``git status`` whether the main checkout is clean; one that is not is a problem of the run. Measurements
only, never a way to run AutoDev.

    python bench/makespan_floor.py [--tasks 60] [--latency 0.5] [--parallelism 4,8] [--runs 3] [--seed 1]
                                   [--git on|off] [--syncs on|off] [--snapshot files|write-tree|in-process]
                                   [--landing restore|in-process] [--quick]
"""

from __future__ import annotations

import argparse
import bisect
import functools
import hashlib
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
from anyio.abc import TaskGroup

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import git_repo
from makespan import (
    add_workload_arguments,
    critical_path,
    dag_plan,
    dispatch_order,
    median_run,
    task_file,
    workload_sizes,
)

from autodev.state.atomic import atomic_write_bytes, fsync_dir
from autodev.state.file_lock import KeptFileLock
from autodev.state.ledger import Ledger
from autodev.state.schemas import Task
from autodev.workspace.changes import FileStamp
from autodev.workspace.git import _write_index, run_git
from autodev.workspace.objects import CommitWriter
from autodev.workspace.patches import Change, added_files_change
from autodev.workspace.stored_files import StoredFile, file_stamps, stored_entries
from autodev.workspace.trees import FileEntry, raw_entries, splice_tree

GIT_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
PATHS_ENV = {**GIT_ENV, "GIT_LITERAL_PATHSPECS": "1"}
FEW_PATHS = ("-c", "core.preloadIndex=false")
FAKE_ID = "0" * 40
IDENT = "bench <bench@invalid> 0 +0000"
# How a task's snapshot tree is written: after ``git add``, from the file (as AutoDev does) or by ``git
# write-tree``; or, ``add`` included, without git.
Snapshot = Literal["files", "write-tree", "in-process"]
# How a landing writes the main checkout: ``git restore`` into a copy of its index, or without git.
Landing = Literal["restore", "in-process"]
_ENTRY_FIXED = 62  # an index entry's bytes before its name (SHA-1 ids, no extended flags)


def index_with_new_file(
    index: bytes, index_mtime_ns: int, name: str, blob: str, stat: os.stat_result
) -> bytes:
    """``index`` (git's index file, format 2 or 3, SHA-1 ids, last written at ``index_mtime_ns``) with
    ``name`` added as a regular file of ``blob`` whose file has ``stat``, as git writes an index:
    - entries sorted by name; each padded with 1 to 8 NUL bytes to a multiple of 8;
    - the new entry's size, and that of every entry modified in the same second as the index it was read
      from or later (which git would take for unchanged on its stamp once the index is newer), written as
      0: git then compares those files' bytes before it trusts them (its "racily clean" rule);
    - its extensions (all optional ones: the cache tree, the untracked cache) dropped, which git rebuilds;
    - the SHA-1 of everything before it at the end.
    For the floor's new files only: a name already in the index, or anything else, fails an assertion."""
    signature, version, count = struct.unpack(">4sLL", index[:12])
    assert signature == b"DIRC" and version in (2, 3)
    names: list[bytes] = []
    entries: list[bytes] = []
    offset = 12
    for _ in range(count):
        (flags,) = struct.unpack(">H", index[offset + 60 : offset + _ENTRY_FIXED])
        assert not flags & 0x4000  # no extended flags (intent to add, skip worktree)
        end = index.index(b"\0", offset + _ENTRY_FIXED)
        size = ((end - offset) // 8 + 1) * 8
        entry = index[offset : offset + size]
        (seconds,) = struct.unpack(">L", entry[8:12])
        if seconds >= index_mtime_ns // 10**9:  # whole seconds, as a git built without nanoseconds compares
            entry = entry[:36] + b"\0\0\0\0" + entry[40:]
        names.append(index[offset + _ENTRY_FIXED : end])
        entries.append(entry)
        offset += size
    raw_name = name.encode()
    assert raw_name not in names
    fixed = struct.pack(
        ">10L",
        int(stat.st_ctime) & 0xFFFFFFFF,
        stat.st_ctime_ns % 10**9,
        int(stat.st_mtime) & 0xFFFFFFFF,
        stat.st_mtime_ns % 10**9,
        stat.st_dev & 0xFFFFFFFF,
        stat.st_ino & 0xFFFFFFFF,
        0o100644,
        stat.st_uid,
        stat.st_gid,
        0,
    )
    entry = fixed + bytes.fromhex(blob) + struct.pack(">H", min(len(raw_name), 0xFFF)) + raw_name
    entry += b"\0" * (8 - len(entry) % 8)
    at = bisect.bisect(names, raw_name)
    entries.insert(at, entry)
    body = struct.pack(">4sLL", b"DIRC", version, count + 1) + b"".join(entries)
    return body + hashlib.sha1(body).digest()


@dataclass
class Worktree:
    """A pooled worktree, its index and the branch commit its files are at."""

    path: Path
    index: Path
    base: str


@dataclass
class Floor:
    """One run's repository, ledger, evidence directory and integration lock."""

    root: Path
    git: bool
    syncs: bool
    snapshot: Snapshot
    landing: Landing
    head: str
    ledger: Ledger
    lock: KeptFileLock
    writer: CommitWriter
    scratch: Path
    land_lock: anyio.Lock = field(default_factory=anyio.Lock)
    landed: dict[str, list[str]] = field(default_factory=dict)  # each landed commit -> its paths, in order
    trees: dict[str, str] = field(default_factory=dict)  # each commit written -> its tree
    git_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    async def run(
        self, cwd: Path, *args: str, env: dict[str, str] = GIT_ENV, stdin: str | None = None
    ) -> str:
        if not self.git:
            return FAKE_ID
        started = time.perf_counter()
        done = await run_git(
            list(args), cwd=cwd, env=env, timeout_s=120, stdin=None if stdin is None else stdin.encode()
        )
        command = next(arg for arg in args if not arg.startswith("-") and "=" not in arg)
        self.git_ms[command].append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            raise RuntimeError(f"git {command} failed: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode()

    def record(self, op: str, task_id: str, *, durable: bool = True) -> None:
        self.lock.acquire(timeout=-1, poll_interval=0.005)
        try:
            self.ledger.append(op, {"task_id": task_id}, durable=durable and self.syncs)
        finally:
            self.lock.release()

    def evidence(self, task_id: str, kind: str, data: bytes) -> None:
        path = self.root / ".autodev" / "evidence" / task_id / f"{kind}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data, durable=self.syncs)
        if self.syncs:
            fsync_dir(path.parent)
        self.record("evidence_recorded", task_id, durable=False)

    def commit(self, tree: str, parent: str, task_id: str) -> str:
        if not self.git:
            return FAKE_ID
        commit = self.writer.write(tree, parent, f"autodev: {task_id}")
        assert commit is not None  # full ids of one format: the writer always writes them
        self.trees[commit] = tree
        return commit

    async def reset(self, worktree: Worktree) -> None:
        """The worktree's files and index brought to the branch, on the paths landed since its base."""
        head, paths = self.head, self.paths_since(worktree.base)
        if paths:
            await self.run(
                worktree.path,
                *FEW_PATHS,
                "restore",
                f"--source={head}",
                "--staged",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                env=PATHS_ENV,
                stdin="\0".join(paths),
            )
        worktree.base = head

    def paths_since(self, base: str) -> list[str]:
        found: list[str] = []
        for commit in reversed(self.landed):
            if commit == base:
                break
            found.extend(self.landed[commit])
        return sorted(found)

    async def agent(self, task_id: str, latency: float) -> None:
        self.record("delegation_decided", task_id, durable=False)
        await anyio.sleep(latency)
        self.record("usage_recorded", task_id)

    async def task(self, task_id: str, worktree: Worktree, latency: float) -> None:
        if worktree.base != self.head:
            await self.reset(worktree)
        base, path = worktree.base, task_file(task_id)
        self.record("task_status", task_id)
        await self.agent(task_id, latency)
        content = f"def task_{task_id.replace('.', '_')}() -> int:\n    return 1\n".encode()
        (worktree.path / path).parent.mkdir(parents=True, exist_ok=True)
        (worktree.path / path).write_bytes(content)
        if self.snapshot == "in-process" and self.git:
            tree, change = await anyio.to_thread.run_sync(self.snapshot_in_process, base, path, content)
        else:
            tree, change = await self.snapshot_by_git(worktree, task_id, path, base)
        if change is not None:
            # A new text file: its diff written from the bytes the tree was, as AutoDev writes it.
            patch = change.patch
            [(_, (mode, object_id))] = change.entries
        else:
            patch = await self.run(
                worktree.path,
                "diff",
                "-z",
                "--patch-with-raw",
                "--binary",
                "--full-index",
                "--no-renames",
                "--no-abbrev",
                base,
                tree,
                "--",
                ".",
                ":(exclude).autodev",
            )
            # The raw part (up to the first empty field) names the task's one file: its mode and blob.
            mode, object_id = raw_entries(patch[: patch.find("\0\0") + 1])[path] if self.git else ("", "")
        self.evidence(task_id, "developer", patch.encode())
        self.evidence(task_id, "developer_patch", patch.encode())
        self.record("task_status", task_id)
        self.evidence(task_id, "gates", b"{}")
        self.record("task_status", task_id)
        await self.agent(task_id, latency)
        self.evidence(task_id, "review", b"{}")
        self.record("task_status", task_id)
        await self.agent(task_id, latency)
        self.evidence(task_id, "tests", b"{}")
        self.record("task_status", task_id)
        self.evidence(task_id, "tournament", b"{}")
        self.record("task_status", task_id)
        commit = self.commit(tree, base, task_id)
        onto = self.head
        own = {path: (mode, object_id)}
        if onto != base:
            commit = await self.replay(own, onto, task_id)
        async with self.land_lock:
            if self.head != onto:
                commit = await self.replay(own, self.head, task_id)
            await self.fast_forward(commit, path, content, object_id)
        self.evidence(task_id, "patch", patch.encode())
        self.record("task_status", task_id)

    def snapshot_in_process(self, base: str, path: str, content: bytes) -> tuple[str, Change | None]:
        """The snapshot's tree with its blob and trees written in-process (``--snapshot in-process``), and
        its diff."""
        blob = self.writer.write_object(b"blob", content, id_length=len(base))
        stored = {path: StoredFile("100644", blob, content)}
        tree = splice_tree(self.writer, self.trees[base], {path: stored[path].entry})
        assert tree is not None  # a new file of its own in a tree written here: nothing in the way
        return tree, added_files_change(self.writer.objects_dir, self.trees[base], stored)

    async def snapshot_by_git(
        self, worktree: Worktree, task_id: str, path: str, base: str
    ) -> tuple[str, Change | None]:
        """The snapshot's tree as AutoDev's task makes it: ``add`` into a scratch index, then the tree and
        the diff from the file (``--snapshot write-tree``: the tree from the index, by ``git write-tree``,
        and no diff: git's)."""
        index = self.scratch / f"index-{task_id}"
        await anyio.to_thread.run_sync(shutil.copyfile, worktree.index, index)
        staged = {**PATHS_ENV, "GIT_INDEX_FILE": str(index)}
        # Stamped before git reads the file, as AutoDev stamps it, where the tree is written from it.
        before = file_stamps(worktree.path, [path]) if self.snapshot == "files" and self.git else {}
        await self.run(
            worktree.path,
            *FEW_PATHS,
            "add",
            "-A",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            env=staged,
            stdin=path,
        )
        if self.snapshot == "files" and self.git:
            read = functools.partial(self.tree_from_files, worktree.path, before, path, base)
            return await anyio.to_thread.run_sync(read)
        written = await self.run(
            worktree.path, "write-tree", "--missing-ok", env={**GIT_ENV, "GIT_INDEX_FILE": str(index)}
        )
        return written.strip(), None

    def tree_from_files(
        self, root: Path, before: dict[str, FileStamp | None], path: str, base: str
    ) -> tuple[str, Change | None]:
        files = stored_entries(root, self.root / ".git", before, [path], id_length=len(base))
        assert files is not None  # a new file, no attributes: git stored it as its bytes
        tree = splice_tree(self.writer, self.trees[base], {name: file.entry for name, file in files.items()})
        assert tree is not None  # a new file of its own in a tree written here: nothing in the way
        return tree, added_files_change(self.writer.objects_dir, self.trees[base], files)

    async def replay(self, files: dict[str, FileEntry], onto: str, task_id: str) -> str:
        if not self.git:
            return FAKE_ID
        tree = await anyio.to_thread.run_sync(splice_tree, self.writer, self.trees[onto], files)
        assert tree is not None  # every task adds a file of its own: nothing meets, nothing is deleted
        return self.commit(tree, onto, task_id)

    async def fast_forward(self, commit: str, path: str, content: bytes, blob: str) -> None:
        if self.git and self.landing == "in-process":
            await anyio.to_thread.run_sync(self.land_in_process, path, content, blob)
            self.move_branch(commit)
        elif self.git:
            git_dir = self.root / ".git"
            index_lock = git_dir / "index.lock"
            shutil.copyfile(git_dir / "index", index_lock)
            await self.run(
                self.root,
                *FEW_PATHS,
                "restore",
                f"--source={commit}",
                "--staged",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                env={**PATHS_ENV, "GIT_INDEX_FILE": str(index_lock)},
                stdin=path,
            )
            os.replace(index_lock, git_dir / "index")
            self.move_branch(commit)
        self.landed[commit] = [path]
        self.head = commit

    def move_branch(self, commit: str) -> None:
        branch = self.root / ".git" / "refs" / "heads" / "main"
        branch.with_name("main.lock").write_text(commit + "\n")
        os.replace(branch.with_name("main.lock"), branch)

    def land_in_process(self, path: str, content: bytes, blob: str) -> None:
        """The main checkout's part of a landing without git (``--landing in-process``): the task's file
        written, then the index with its entry, replaced under git's index lock."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        git_dir = self.root / ".git"
        index = git_dir / "index"
        written = index_with_new_file(
            index.read_bytes(), os.stat(index).st_mtime_ns, path, blob, os.stat(target)
        )
        # Nothing else writes this index during a floor run: it is read before git's lock is taken, and
        # replaced under it as AutoDev replaces an index.
        _write_index(git_dir, written)

    async def after_landing(
        self, path: str, worktree: Worktree, pool: list[Worktree], wake: Callable[[], None]
    ) -> None:
        await self.run(
            self.root,
            *FEW_PATHS,
            "status",
            "--porcelain",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--",
            path,
            env=PATHS_ENV,
        )
        await self.reset(worktree)
        pool.append(worktree)
        wake()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


async def measure(
    tasks: Sequence[Task],
    latency: float,
    parallelism: int,
    *,
    git: bool,
    syncs: bool,
    snapshot: Snapshot = "files",
    landing: Landing = "restore",
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        _git(root, "branch", "-M", "main")
        state = root / ".autodev"
        state.mkdir()
        (root / ".git" / "info" / "exclude").write_text(".autodev/\n")
        ledger = Ledger(state / "ledger.jsonl")
        ledger.open()
        writer = CommitWriter.from_git(root / ".git" / "objects", IDENT, IDENT, {}, GIT_ENV)
        assert writer is not None
        floor = Floor(
            root,
            git,
            syncs,
            snapshot,
            landing,
            _git(root, "rev-parse", "HEAD"),
            ledger,
            KeptFileLock(state / "lock"),
            writer,
            Path(tempfile.mkdtemp(dir=tmp)),
        )
        floor.landed[floor.head] = []
        floor.trees[floor.head] = _git(root, "rev-parse", "HEAD^{tree}")
        pool: list[Worktree] = []
        for n in range(parallelism + 1):
            path = state / f"pool-{n}"
            _git(root, "worktree", "add", "-q", "--detach", str(path), floor.head)
            pool.append(
                Worktree(path, Path(_git(path, "rev-parse", "--absolute-git-dir")) / "index", floor.head)
            )
        deps = {task.id: set(task.depends_on) for task in tasks}
        pending, done, running = dispatch_order(tasks, parallelism), set[str](), 0
        started: dict[str, float] = {}
        finished: dict[str, float] = {}
        freed = anyio.Event()

        def wake() -> None:
            freed.set()  # the dispatcher's event of the moment, not the one current when a task began

        async def one(task_id: str, worktree: Worktree, group: TaskGroup) -> None:
            nonlocal running
            started[task_id] = time.perf_counter()
            await floor.task(task_id, worktree, latency)
            finished[task_id] = time.perf_counter()
            done.add(task_id)
            running -= 1
            group.start_soon(floor.after_landing, task_file(task_id), worktree, pool, wake)
            wake()

        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            while len(done) < len(tasks):
                ready = [task_id for task_id in pending if deps[task_id] <= done]
                while ready and pool and running < parallelism:
                    task_id = ready.pop(0)
                    pending.remove(task_id)
                    running += 1
                    group.start_soon(one, task_id, pool.pop(0), group)
                freed = anyio.Event()
                if len(done) < len(tasks):
                    await freed.wait()
            measured = time.perf_counter() - began
        committed = set(_git(root, "ls-tree", "-r", "--name-only", "HEAD").splitlines()) if git else set()
        # Whatever wrote it, the main checkout must be what git itself would have left: HEAD's files.
        unclean = _git(root, "status", "--porcelain") if git else ""
        ledger.close()
        floor.lock.close()
    work = {task.id: 3 * latency for task in tasks}
    path_work, _ = critical_path(tasks, work)
    ideal = max(path_work, sum(work.values()) / parallelism)
    in_task = [finished[t] - started[t] - work[t] for t in finished]
    missing = [task.id for task in tasks if git and task_file(task.id) not in committed]
    return {
        "measured_s": round(measured, 3),
        "ideal_s": round(ideal, 3),
        "efficiency": round(ideal / measured, 3),
        "median_in_task_ms": round(statistics.median(in_task) * 1000, 1),
        "git_ms_median": {name: round(statistics.median(times), 1) for name, times in floor.git_ms.items()},
        "git_processes_per_task": round(sum(map(len, floor.git_ms.values())) / len(tasks), 2),
        "problems": [f"{task_id}: its file is not in HEAD" for task_id in missing]
        + ([f"the main checkout is not clean: {unclean.splitlines()[:3]}"] if unclean else []),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, parallelism=[4, 8], runs=3)
    parser.add_argument("--git", choices=("on", "off"), default="on")
    parser.add_argument("--syncs", choices=("on", "off"), default="on")
    parser.add_argument("--snapshot", choices=get_args(Snapshot), default="files")
    parser.add_argument("--landing", choices=get_args(Landing), default="restore")
    args = parser.parse_args()
    n_tasks, latency, repeats = workload_sizes(parser, args, runs=3)
    tasks = dag_plan(n_tasks, args.seed).iter_tasks()
    runs: dict[str, Any] = {}
    for parallelism in args.parallelism:
        print(f"parallelism {parallelism} ...", file=sys.stderr, flush=True)
        run = functools.partial(
            measure,
            tasks,
            latency,
            parallelism,
            git=args.git == "on",
            syncs=args.syncs == "on",
            snapshot=args.snapshot,
            landing=args.landing,
        )
        repeated = [anyio.run(run) for _ in range(repeats)]
        runs[str(parallelism)] = median_run(repeated)
    print(
        json.dumps(
            {
                "benchmark": "makespan_floor",
                "seed": args.seed,
                "tasks": n_tasks,
                "latency_s": latency,
                "git": args.git,
                "syncs": args.syncs,
                "snapshot": args.snapshot,
                "landing": args.landing,
                "runs": runs,
            },
            indent=2,
        )
    )
    if any(run["problems"] for run in runs.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
