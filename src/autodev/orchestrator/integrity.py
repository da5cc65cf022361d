"""What an agent did besides its change: found out from git and the files, never from the agent's words.

Before every agent call AutoDev takes a ``RepositoryView``: the main checkout's HEAD, every branch, tag and
``refs/autodev/`` ref, the HEAD of the agent's working copy, git's control files (config, hooks, info,
alternates) and AutoDev's own configuration file. After the call it compares:

- Commits the agent made on top of its working copy are *folded into the task's change* (``git reset
  --soft`` back to where the copy was, files untouched): the task's change is still reviewed and committed
  as one (ADR 0013).
- Any other ref movement (a branch rewound or switched, a tag or an AutoDev ref moved, the copy's HEAD
  moved anywhere but forward) stops the run with a ``RepositoryChangedError`` naming the refs; nothing is
  moved back, the user decides. A commit AutoDev recorded as landed that left the branch stops it too.
- Files git itself would execute or obey (``.git/config``, hooks, ``info/``, alternates) and AutoDev's
  ``.autodev/config.toml`` are put back as they were: they are AutoDev's to guard, not the agent's. So is
  the ledger: it keeps the bytes it verified and wrote and a stamp of the file as it left them, so the
  check after a call is one ``lstat`` however long the plan; a file that is no longer as AutoDev wrote it
  is compared whole and, when it differs, replaced by those bytes. Files AutoDev derives from its memory
  (``plan.json``, ``knowledge.json``) are written again from it when their stamp changed during the call.
- While a task works in its own worktree, new changes in the main checkout are writes outside the task's
  working copy: the run stops and names them (they may be the user's own edits; nothing is discarded). The
  checkout is scanned after each call; the next call starts from what that scan found.

Refs AutoDev itself moves meanwhile (other tasks landing in a parallel run) are told apart through
``GitRepo.moved_by_autodev``: the value AutoDev last gave each ref, or the one before it while a move is
under way.

A call can end without the check after it: the process was killed, or an inline delegation suspended the
run until an agent session answers. So the view is also written to ``.autodev/calls/`` for the length of
the call, and the next start compares the repository with every view a call left there
(``check_interrupted``). Across that gap AutoDev cannot tell the agent's doings from the user's, so it
puts nothing back: changed refs and control files stop the run once, named, and the user decides.
Branches that moved forward only through AutoDev's own task commits are not changes; commits on top of
the working copy are folded as after a call.

A checked call's record file is emptied and kept open for the next call's view: a new file costs an
inode, on some file systems up to a millisecond of processor time, and an empty file stands for no call.
It is written through the descriptor AutoDev opened, and only while its name in ``.autodev/calls/`` still
names that file and is its only name (an agent may replace or link anything there).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio

from autodev.errors import EXIT_SUSPENDED, AutodevError, StateError
from autodev.files import STAMP_SETTLED_NS, read_bounded
from autodev.logging import get_logger
from autodev.state.atomic import atomic_write_bytes
from autodev.state.ledger import Ledger
from autodev.workspace.git import GitError, GitRepo, read_head_file

__all__ = [
    "AgentWatch",
    "CallRecord",
    "CallReport",
    "RepositoryChangedError",
    "RepositoryView",
]

_log = get_logger("autodev.integrity")
_WATCHED_REFS = ("refs/heads/", "refs/tags/", "refs/autodev/")
# Git's control files an agent could use to make git run its programs or hide files, relative to the
# common git directory. Hook directories are listed whole.
_CONTROL_FILES = ("config", "config.worktree", "info/exclude", "info/attributes", "objects/info/alternates")
_CONTROL_DIRS = ("hooks", "info")
_CONTROL_FILE_LIMIT = 1 << 20
_SHOWN = 10
# Only branches and tags are compared across an interrupted call: AutoDev's own refs under refs/autodev/
# are cleared and rebuilt by every start anyway.
_INTERRUPTED_REFS = ("refs/heads/", "refs/tags/")
_RECORD_LIMIT = 64 << 20
# Record files of checked calls kept open for the next calls: one for each call that may be in flight.
_SPARE_RECORDS = 16
# What identifies a file's or a directory's content without reading it: inode, size, modification and
# change times.
_Stamp = tuple[int, int, int, int]
_T = TypeVar("_T")


class RepositoryChangedError(AutodevError):
    """An agent moved refs or wrote outside its working copy; the run stops until the user has looked.

    Nothing is undone on the user's behalf; ``autodev resume`` continues once the repository is as the
    user wants it (the message says what changed and how to put it back).
    """

    exit_code = EXIT_SUSPENDED


@dataclass(frozen=True, slots=True)
class RepositoryView:
    """What an agent call must leave as it found it (see the module docstring)."""

    main_head: str
    refs: Mapping[str, str]
    copy_key: str
    copy_head: str | None
    control: Mapping[str, bytes]
    main_dirty: frozenset[str] | None
    # How each file AutoDev derives from its memory looked (inode, size, times): any write changes it.
    derived: Mapping[Path, _Stamp | None] = field(default_factory=dict)


@dataclass(slots=True)
class CallReport:
    """What AutoDev found and put right after one call: for the task's evidence and the progress notes."""

    folded_commits: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    # The main checkout's commit as the check read it (None when detached or unborn): for ``check_landed``.
    main_tip: str | None = None

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.folded_commits:
            notes.append(
                f"the agent made {len(self.folded_commits)} commit(s) itself "
                f"({', '.join(c[:10] for c in self.folded_commits[:_SHOWN])}); they are folded into the "
                "task's change, which is reviewed and committed as one"
            )
        if self.restored:
            notes.append(
                "the agent changed files that are AutoDev's to guard; they were put back: "
                + ", ".join(self.restored[:_SHOWN])
            )
        return notes


def _shown(items: list[str]) -> str:
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


@dataclass(frozen=True, slots=True)
class CallRecord:
    """The file in ``.autodev/calls/`` that holds a call's view until its check has run, as AutoDev made
    it: open, with the device and inode it had."""

    path: Path
    fd: int
    device: int
    inode: int

    def still_ours(self) -> bool:
        """Whether ``path`` still names the file AutoDev made, as its only name: nothing replaced it with
        another file or a link, and nothing linked it elsewhere."""
        try:
            found = os.lstat(self.path)
        except OSError:
            return False
        return (
            stat.S_ISREG(found.st_mode)
            and (found.st_dev, found.st_ino) == (self.device, self.inode)
            and found.st_nlink == 1
        )


class AgentWatch:
    """Takes a ``RepositoryView`` before an agent call and checks the repository against it after."""

    def __init__(
        self,
        main: GitRepo,
        config_file: Path,
        *,
        calls_dir: Path | None = None,
        ledger: Callable[[], Ledger | None] | None = None,
        derived: Mapping[Path, Callable[[], None]] | None = None,
        keep_records: int = _SPARE_RECORDS,
    ) -> None:
        """``keep_records``: how many checked calls' record files to keep open for the next calls (none for
        a watch whose end nobody tells, see ``release_records``)."""
        self.main = main
        self.config_file = config_file
        self.calls_dir = calls_dir
        # The run's ledger (None before there is one): it knows what it wrote and how the file looked then.
        self._ledger = ledger or (lambda: None)
        # Files written from AutoDev's memory, each with what writes it again.
        self._derived = dict(derived or {})
        # Commits recorded as landed that were already found on the branch, and the tip they were found at:
        # while the branch only moves forward from that tip they need no new look.
        self._landed_tip: str | None = None
        self._landed_checked: set[str] = set()
        # The last listing of landed commits found all on the branch: the plan manager hands out the same
        # object until a commit is recorded or withdrawn, so most calls have nothing new to look at.
        self._landed_listing: Mapping[str, str] | None = None
        # The main checkout's dirty paths as the last check after a call found them (under the main tree's
        # lock): while tasks work in their own worktrees nothing may change there, so the next call's view
        # starts from it instead of scanning the checkout again. A change in between is found all the same.
        self._main_dirty_seen: frozenset[str] | None = None
        self._guarded = GuardedFiles()
        # Record files of checked calls, emptied and kept open for the next calls' views (module docstring).
        self._spare_records: list[CallRecord] = []
        self._keep_records = keep_records

    async def _control_files(self) -> dict[str, bytes]:
        common = await self.main.common_dir()
        found: dict[str, bytes] = {}
        # Plain strings, not ``Path``s: this runs twice per agent call, and path objects were most of it.
        root = os.fspath(common)
        candidates = [(f"{root}/{name}", f".git/{name}") for name in _CONTROL_FILES]
        for directory in _CONTROL_DIRS:
            candidates += self._guarded.files_below(root, directory)
        for path, name in candidates:
            content = self._guarded.read(path)
            if content is not None:
                found[name] = content
        config = self._guarded.read(self.config_file)
        if config is not None:
            found[".autodev/config.toml"] = config
        return found

    def _path_of(self, name: str, common: Path) -> Path:
        if name == ".autodev/config.toml":
            return self.config_file
        return common / name.removeprefix(".git/")

    async def _head_of(self, copy: GitRepo, key: str, refs: Mapping[str, str]) -> str | None:
        # A branch's commit is in the refs just listed: no git call needed for it.
        return refs[key] if key in refs else await copy.head()

    async def before(self, copy: GitRepo) -> RepositoryView:
        isolated = copy.root.resolve() != self.main.root.resolve()
        refs = await self.main.refs_under_all(_WATCHED_REFS)
        copy_key = await copy.head_ref_key()
        return RepositoryView(
            main_head=read_head_file(await self.main.git_dir()),
            refs=refs,
            copy_key=copy_key,
            copy_head=await self._head_of(copy, copy_key, refs),
            control=await self._control_files(),
            main_dirty=await self._main_dirty_before() if isolated else None,
            derived={path: _stamp_of(path) for path in self._derived},
        )

    async def after(
        self, view: RepositoryView, copy: GitRepo, *, who: str, main_tree_lock: anyio.Lock | None = None
    ) -> CallReport:
        """Check the repository after ``who``'s call (e.g. "the developer of task 1.2"); see the module
        docstring for what is put back, folded or stopped for. ``main_tree_lock`` is what AutoDev holds
        while it changes the main checkout (merging a parallel task): the main checkout is looked at under
        it, never half way through a merge."""
        await self._refuse_unusable_heads(copy, who)
        report = CallReport()
        report.restored = await self._restore_control(view)
        if self.guard_ledger():
            report.restored.append(".autodev/ledger.jsonl")
        for path, rewrite in self._derived.items():
            # AutoDev may have written it meanwhile too: writing it from memory again is right either way.
            if _stamp_of(path) != view.derived.get(path):
                rewrite()
                report.restored.append(f".autodev/{path.name}")
        moved: list[str] = []
        main_head = read_head_file(await self.main.git_dir())
        if main_head != view.main_head:
            symbolic = main_head.startswith("ref: ") or view.main_head.startswith("ref: ")
            own = self.main.moved_by_autodev(await self.main.head_ref_key(), main_head)
            if symbolic or (copy.root.resolve() != self.main.root.resolve() and not own):
                moved.append(f"HEAD of {self.main.root} {view.main_head!r} -> {main_head!r}")
        now = await self.main.refs_under_all(_WATCHED_REFS)
        if main_head.startswith("ref: "):
            report.main_tip = now.get(main_head.removeprefix("ref: ").strip())
        copy_head = await self._head_of(copy, view.copy_key, now)
        for ref in sorted(set(view.refs) | set(now)):
            before, after = view.refs.get(ref), now.get(ref)
            if before == after or self.main.moved_by_autodev(ref, after):
                continue
            if ref == view.copy_key and before is not None and after is not None:
                continue  # the working copy's own branch: judged below, with the copy's HEAD
            moved.append(f"{ref} {_short(before)} -> {_short(after)}")
        if copy_head != view.copy_head and not self.main.moved_by_autodev(view.copy_key, copy_head):
            if (
                view.copy_head is not None
                and copy_head is not None
                and await copy.head_ref_key() == view.copy_key
                and await copy.is_ancestor(view.copy_head, copy_head)
            ):
                report.folded_commits = await copy.commits_since(view.copy_head, copy_head)
                await copy.reset_soft(view.copy_head)
            else:
                moved.append(f"HEAD of {copy.root} {_short(view.copy_head)} -> {_short(copy_head)}")
        if moved:
            raise RepositoryChangedError(
                f"{who} moved git refs AutoDev did not move: {_shown(moved)}; nothing was moved back. "
                "Put them where you want them (`git reflog` shows where they were, `git update-ref <ref> "
                "<commit>` moves one), then run `autodev resume`"
            )
        if view.main_dirty is not None:
            dirty = frozenset(await self._main_dirty(main_tree_lock, view.main_dirty))
            written = sorted(dirty - view.main_dirty)
            if not written:
                self._main_dirty_seen = dirty
            else:
                raise RepositoryChangedError(
                    f"{who} works in its own worktree but files changed in the main checkout "
                    f"{self.main.root}: {_shown(written)}; they are left as they are. Keep or remove them "
                    "(`git status` lists them), then run `autodev resume`"
                )
        if report.folded_commits or report.restored:
            _log.warning(
                "integrity.after_call", who=who, folded=report.folded_commits, restored=report.restored
            )
        return report

    async def _refuse_unusable_heads(self, copy: GitRepo, who: str) -> None:
        """Stop before any git call when a HEAD file is no regular file: git would block on a FIFO."""
        for git_dir in {await self.main.git_dir(), await copy.git_dir()}:
            head = git_dir / "HEAD"
            try:
                regular = stat.S_ISREG(os.stat(head).st_mode)
            except OSError:
                regular = False
            if not regular:
                raise RepositoryChangedError(
                    f"{who} replaced {head} with something that is not a regular file; git cannot work "
                    "with it (it would wait forever on a FIFO). Put it back (`git symbolic-ref HEAD "
                    "refs/heads/<branch>` after removing it), then run `autodev resume`"
                )

    def rescan_main_checkout(self) -> None:
        """Scan the main checkout again at the next call: the user may have changed it between runs."""
        self._main_dirty_seen = None

    async def _main_dirty_before(self) -> frozenset[str]:
        if self._main_dirty_seen is None:
            self._main_dirty_seen = frozenset(await self.main.dirty_paths())
        return self._main_dirty_seen

    async def _main_dirty(self, lock: anyio.Lock | None, before: frozenset[str]) -> list[str]:
        # Nothing written, staged or moved in the main checkout since git last looked, and nothing new
        # there: a merge that holds the lock has not touched the checkout yet, so there is no need to wait
        # for it. Anything else is looked at under the lock, never half way through a merge.
        known = self.main.known_dirty_paths()
        if known is not None and before.issuperset(known):
            return known
        owner = lock.statistics().owner if lock is not None else None
        if lock is None or (owner is not None and owner == anyio.get_current_task()):
            return await self.main.dirty_paths()
        async with lock:
            return await self.main.dirty_paths()

    async def _restore_control(self, view: RepositoryView) -> list[str]:
        now = await self._control_files()
        if now == view.control:
            return []
        common = await self.main.common_dir()
        restored = []
        for name in sorted(set(now) | set(view.control)):
            before, after = view.control.get(name), now.get(name)
            if before == after:
                continue
            path = self._path_of(name, common)
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write_bytes(path, before)
            restored.append(name)
        return restored

    def guard_ledger(self, *, whole: bool = False) -> bool:
        """Whether the ledger had to be put back (see the module docstring). After a call its stamp is
        enough; ``whole`` compares every byte (at the end of a phase: a kernel without fine-grained change
        times can give a same-size rewrite within one clock tick of AutoDev's append the stamp AutoDev
        took). Synchronous on purpose: no append of AutoDev's can come between the check and the rewrite."""
        ledger = self._ledger()
        if ledger is None or ledger.head.seq == 0 or (not whole and ledger.as_written()):
            return False  # the usual case: one lstat, however long the ledger
        if ledger.matches_file():
            return False
        ledger.restore_as_written()
        _log.warning("integrity.ledger_restored", path=str(ledger.path))
        return True

    async def check_landed(self, commits: Mapping[str, str], *, tip: str | None = None) -> None:
        """Stop when a commit recorded as landed (``{task id: commit}``) is no longer on the branch.

        The branch is read after ``commits`` were, unless ``tip`` (the branch's commit read after them, as
        ``CallReport.main_tip``) is given: a parallel run lands commits all the time, and each is on the
        branch before it is recorded."""
        tip = tip or await self.main.head()
        if tip is None or not commits:
            return
        last = self._landed_tip
        # Forward along AutoDev's own landings (the usual case), known in a few steps without git.
        if last is not None and last != tip and self.main.made_since(last, tip) is None:
            behind = self.main.made_since(tip, last)
            if behind:
                # ``tip`` is a branch read before the last check's (another task's check came in between),
                # or the branch went back to it. The commits checked then are on ``tip`` too, but for
                # AutoDev's own commits after it: only those, and the ones never checked, are looked at.
                listed = set(commits.values())
                await self._check_on(tip, commits, (listed - self._landed_checked) | (listed & behind))
                return
            if not await self.main.is_ancestor(last, tip):
                self._landed_checked.clear()
                self._landed_listing = None
        self._landed_tip = tip
        if commits is self._landed_listing:
            return
        # A set difference in C, not a loop over every landed task: this runs after every agent call, and
        # all but the newest commits were checked before.
        await self._check_on(tip, commits, set(commits.values()) - self._landed_checked)
        self._landed_listing = commits

    async def _check_on(self, tip: str, commits: Mapping[str, str], unchecked: set[str]) -> None:
        """Raise, naming the tasks, when any of ``unchecked`` (among ``commits``) is not on ``tip``; those
        found there need no new look while the branch only moves forward."""
        gone: set[str] = set()
        for commit in sorted(unchecked):
            if await self.main.is_ancestor(commit, tip):
                self._landed_checked.add(commit)
            else:
                gone.add(commit)
        if not gone:
            return
        missing = [
            f"task {task_id} ({commit[:10]})" for task_id, commit in sorted(commits.items()) if commit in gone
        ]
        raise RepositoryChangedError(
            f"commits AutoDev recorded as landed are no longer on {await self.main.head_ref_key()}: "
            f"{_shown(missing)}; something rewrote the branch. Put it back (`git reflog` shows where it "
            "was, `git update-ref <ref> <commit>` moves it), then run `autodev resume`"
        )

    # --- calls that ended without the check after them -------------------------------------------------

    def remember(self, view: RepositoryView, copy: GitRepo, who: str) -> CallRecord | None:
        """Write ``view`` to ``calls_dir`` until the call's check has run (see the module docstring)."""
        if self.calls_dir is None:
            return None
        record = {
            "who": who,
            "copy_root": str(copy.root.resolve()),
            "main_head": view.main_head,
            "refs": {ref: commit for ref, commit in view.refs.items() if ref.startswith(_INTERRUPTED_REFS)},
            "copy_key": view.copy_key,
            "copy_head": view.copy_head,
            # Digests, not contents: nothing is put back across the gap, only named.
            "control": {name: _digest(data) for name, data in view.control.items()},
            "main_dirty": sorted(view.main_dirty) if view.main_dirty is not None else None,
        }
        kept = self._spare_record() or self._new_record(self.calls_dir)
        # Not fsync'd: what it guards against is a killed process, whose writes the page cache keeps, and
        # it costs every agent call (a record lost with the machine only means one check fewer). The file
        # is empty until this one write: a process killed before it had not started the call.
        data = json.dumps(record).encode("utf-8")
        written = 0
        while written < len(data):  # one write for a regular file, unless the disk is full
            written += os.pwrite(kept.fd, data[written:], written)
        return kept

    def _spare_record(self) -> CallRecord | None:
        while self._spare_records:
            kept = self._spare_records.pop()
            if kept.still_ours():
                return kept
            os.close(kept.fd)  # replaced, removed or linked meanwhile: never written through again
        return None

    @staticmethod
    def _new_record(calls_dir: Path) -> CallRecord:
        calls_dir.mkdir(parents=True, exist_ok=True)
        path = calls_dir / f"{secrets.token_hex(8)}.json"
        # A new name, made here: whatever an agent put in the directory is neither followed nor reused.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        made = os.fstat(fd)
        return CallRecord(path, fd, made.st_dev, made.st_ino)

    def forget(self, record: CallRecord | None) -> None:
        """The call's check has run: its view is no longer needed. The file is emptied and kept for the
        next call's view while it is still AutoDev's; otherwise whatever has its name goes, as before."""
        if record is None:
            return
        if record.still_ours() and len(self._spare_records) < self._keep_records:
            os.ftruncate(record.fd, 0)
            self._spare_records.append(record)
            return
        os.close(record.fd)
        record.path.unlink(missing_ok=True)

    def release_records(self) -> None:
        """The public call that used this watch is over: the kept record files are closed and removed."""
        while self._spare_records:
            kept = self._spare_records.pop()
            if kept.still_ours():
                kept.path.unlink(missing_ok=True)
            os.close(kept.fd)

    async def check_interrupted(self, task_subjects: Collection[str]) -> None:
        """Compare the repository with every view a call left behind; stop once when anything changed.

        ``task_subjects`` are the subjects of AutoDev's own task commits: a branch that moved forward
        through those only moved for AutoDev. Each view is used once: the run stops naming what changed
        and the next start goes on, whatever the user decided.
        """
        if self.calls_dir is None or not self.calls_dir.is_dir():
            return
        findings: list[str] = []
        folded: list[str] = []
        for path in sorted(self.calls_dir.glob("*.json")):
            if _empty_file(path):  # a checked call's record kept for the next one: no call to check
                path.unlink(missing_ok=True)
                continue
            record = _load_record(path)
            if record is None:
                # Something damaged what the check needs: that is no "nothing changed".
                findings.append(f"{path.name} cannot be read, so what its call did could not be checked")
            else:
                changed, record_folded = await self._interrupted_changes(record, task_subjects)
                if changed:
                    findings.append(f"{record['who']}: {_shown(changed)}")
                folded += record_folded
            path.unlink(missing_ok=True)
        if folded:
            _log.warning("integrity.interrupted_call_commits_folded", commits=folded)
        if findings:
            raise RepositoryChangedError(
                "an agent call ended without AutoDev's check after it (the run was killed, or it waited for "
                f"an inline answer), and meanwhile git changed: {'; '.join(findings)}. Nothing was put back: "
                "it may have been the agent or you. Look at them (`git reflog`, `git config --list "
                "--local`, `ls .git/hooks`), put back what you did not do, then run `autodev resume`"
            )

    async def _interrupted_changes(
        self, record: Mapping[str, object], task_subjects: Collection[str]
    ) -> tuple[list[str], list[str]]:
        """What changed since ``record`` was taken, and the agent commits folded into the working copy."""
        changed: list[str] = []
        before_control = _strings(record.get("control"))
        now_control = {name: _digest(data) for name, data in (await self._control_files()).items()}
        for name in sorted(set(before_control) | set(now_control)):
            before, after = before_control.get(name), now_control.get(name)
            if before != after:
                changed.append(
                    f"{name} {'added' if before is None else 'removed' if after is None else 'changed'}"
                )
        main_head = read_head_file(await self.main.git_dir())
        recorded_head = str(record.get("main_head", ""))
        if main_head != recorded_head and (
            main_head.startswith("ref: ")
            or recorded_head.startswith("ref: ")
            or not await self._moved_for_autodev(self.main, recorded_head, main_head, task_subjects)
        ):
            changed.append(f"HEAD of {self.main.root} {recorded_head!r} -> {main_head!r}")
        copy_root = Path(str(record.get("copy_root", self.main.root)))
        isolated = copy_root != self.main.root.resolve()
        copy_key = str(record.get("copy_key", ""))
        copy_head = record.get("copy_head")
        before_refs = _strings(record.get("refs"))
        now_refs = await self.main.refs_under_all(_INTERRUPTED_REFS)
        for ref in sorted(set(before_refs) | set(now_refs)):
            before_ref, after_ref = before_refs.get(ref), now_refs.get(ref)
            if before_ref == after_ref or (not isolated and ref == copy_key):
                continue  # the working copy's own branch is judged below
            if not await self._moved_for_autodev(self.main, before_ref, after_ref, task_subjects):
                changed.append(f"{ref} {_short(before_ref)} -> {_short(after_ref)}")
        folded: list[str] = []
        copy = await self._copy_still_at(copy_root, copy_key)
        if copy is not None and isinstance(copy_head, str):
            now_head = await copy.head()
            if now_head is not None and now_head != copy_head:
                own = await self._moved_for_autodev(copy, copy_head, now_head, task_subjects)
                ahead = not own and await copy.is_ancestor(copy_head, now_head)
                if ahead and not await _any_task_commit(copy, copy_head, now_head, task_subjects):
                    folded = await copy.commits_since(copy_head, now_head)
                    await copy.reset_soft(copy_head)
                elif not own:
                    changed.append(f"HEAD of {copy_root} {_short(copy_head)} -> {_short(now_head)}")
        main_dirty = record.get("main_dirty")
        if isolated and isinstance(main_dirty, list):
            written = sorted(set(await self.main.dirty_paths()) - {str(path) for path in main_dirty})
            changed += [f"{path} changed in the main checkout" for path in written]
        return changed, folded

    async def _copy_still_at(self, root: Path, key: str) -> GitRepo | None:
        """The working copy a record names, when it still is one on the same branch (or detached)."""
        if not await anyio.Path(root).is_dir():
            return None
        copy = GitRepo(root, like=self.main)
        try:
            return copy if await copy.head_ref_key() == key else None
        except GitError:
            return None  # a task worktree removed meanwhile

    @staticmethod
    async def _moved_for_autodev(
        repo: GitRepo, before: str | None, after: str | None, task_subjects: Collection[str]
    ) -> bool:
        """Whether a ref went from ``before`` to ``after`` only through AutoDev's own task commits."""
        if before is None or after is None or not await repo.is_ancestor(before, after):
            return False
        subjects = await repo.first_parent_subjects(before, after)
        return bool(subjects) and all(subject in task_subjects for subject in subjects)


async def _any_task_commit(repo: GitRepo, base: str, tip: str, task_subjects: Collection[str]) -> bool:
    return any(subject in task_subjects for subject in await repo.first_parent_subjects(base, tip))


def _empty_file(path: Path) -> bool:
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == 0


def _load_record(path: Path) -> dict[str, object] | None:
    """A view a call left, or None (logged) when it cannot be read: it is evidence, not state."""
    try:
        data = json.loads(
            read_bounded(
                path,
                limit=_RECORD_LIMIT,
                what="an agent call's record",
                follow_symlinks=False,
                error=StateError,
            )
        )
    except (StateError, OSError, ValueError) as exc:
        _log.warning("integrity.call_record_unreadable", path=str(path), error=str(exc))
        return None
    return data if isinstance(data, dict) else None


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(key): str(item) for key, item in value.items()}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _short(commit: str | None) -> str:
    return commit[:10] if commit else "(none)"


def _stamp_of(path: str | Path) -> _Stamp | None:
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


class GuardedFiles:
    """The bytes of the files an agent call must leave alone, read again only when a file's stamp changed.

    A stamp (inode, size, modification and change times) changes with every write, but the change time
    comes from a coarse clock: a file written within a tick of AutoDev's read could keep the stamp that
    read saw (git's "racy" index entries). So a stamp is trusted only for a file whose change time was
    already well in the past when AutoDev read it; any later write gives it a newer one. The change time
    cannot be set from user space, unlike the modification time.
    """

    def __init__(self) -> None:
        self._known: dict[str, tuple[_Stamp, bytes | None]] = {}
        # Each directory's files and subdirectories as last listed, under the same rule: a directory's
        # stamp changes with every entry added, removed or renamed in it.
        self._listed: dict[str, tuple[_Stamp, tuple[list[str], list[str]] | None]] = {}

    def files_below(self, root: str, directory: str) -> list[tuple[str, str]]:
        """Every entry below ``root/directory`` that is no directory, sorted, each with its name relative
        to ``root`` behind ``.git/``; symbolic links to directories are neither entered nor listed (what
        ``Path.rglob`` lists). A directory is listed again only when its stamp changed."""
        found: list[tuple[str, str]] = []
        pending = [directory]
        while pending:
            relative = pending.pop()
            listing = self._listing(f"{root}/{relative}")
            if listing is None:
                continue
            files, subdirectories = listing
            found += [(f"{root}/{relative}/{name}", f".git/{relative}/{name}") for name in files]
            pending += [f"{relative}/{name}" for name in subdirectories]
        return sorted(found)

    def _listing(self, directory: str) -> tuple[list[str], list[str]] | None:
        return self._remembered(self._listed, directory, lambda: _list_directory(directory))

    def read(self, path: str | Path) -> bytes | None:
        """``_read_small(path)``, from memory while the file is as it was when last read."""
        key = os.fspath(path)
        return self._remembered(self._known, key, lambda: _read_small(Path(key)))

    def _remembered(
        self, memory: dict[str, tuple[_Stamp, _T | None]], key: str, load: Callable[[], _T | None]
    ) -> _T | None:
        """``load()`` for the file or directory ``key``, from ``memory`` while its stamp is the one it had
        when last loaded; None when there is nothing at ``key``."""
        stamp = _stamp_of(key)
        if stamp is None:
            memory.pop(key, None)
            return None
        known = memory.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        read_at = time.time_ns()
        value = load()
        if _stamp_of(key) == stamp and stamp[3] < read_at - STAMP_SETTLED_NS:
            memory[key] = (stamp, value)
        else:
            memory.pop(key, None)
        return value


def _list_directory(directory: str) -> tuple[list[str], list[str]] | None:
    """The names of ``directory``'s entries that are no directories and of its subdirectories (symbolic
    links to directories are neither); None when it cannot be listed."""
    files: list[str] = []
    subdirectories: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            files.append(entry.name)
        elif not entry.is_symlink():
            subdirectories.append(entry.name)
    return files, subdirectories


def _read_small(path: Path, limit: int = _CONTROL_FILE_LIMIT) -> bytes | None:
    """A guarded file's bytes, None when it is absent, a marker when it is no regular file or too large:
    an agent may have put anything there, so a link is not followed and nothing is read past ``limit``."""
    if not os.path.lexists(path):
        return None
    try:
        return read_bounded(path, limit=limit, what="a guarded file", follow_symlinks=False, error=StateError)
    except (StateError, OSError) as exc:
        return f"<unreadable: {exc}>".encode()
