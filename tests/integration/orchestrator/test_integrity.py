"""What an agent did besides its change, found from a real repository before and after its call."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import MappingProxyType

import anyio
import pytest
from support.projects import git, mini_project

from autodev.gitsafety import missing_landed_commits
from autodev.orchestrator.integrity import AgentWatch, RepositoryChangedError
from autodev.state.ledger import Ledger
from autodev.state.ledger import _stamp_of as ledger_stamp
from autodev.workspace.git import GitRepo, _without_drivers


def _watch(root: Path) -> tuple[GitRepo, AgentWatch]:
    repo = GitRepo(root)
    return repo, AgentWatch(repo, root / ".autodev" / "config.toml")


def test_files_git_obeys_are_put_back_and_named(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    (root / ".autodev").mkdir()
    (root / ".autodev" / "config.toml").write_text("qa_retry_limit = 3\n")
    repo, watch = _watch(root)

    async def scenario() -> list[str]:
        view = await watch.before(repo)
        git(root, "config", "core.fsmonitor", "touch /tmp/pwned")
        (root / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
        (root / ".autodev" / "config.toml").write_text("[qa_gates.test]\nenabled = false\n")
        return (await watch.after(view, repo, who="the developer")).restored

    restored = anyio.run(scenario)

    assert restored == [".autodev/config.toml", ".git/config", ".git/hooks/pre-commit"]
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert (root / ".autodev" / "config.toml").read_text() == "qa_retry_limit = 3\n"


def test_a_hook_rewritten_in_place_with_its_old_size_and_times_is_still_put_back(tmp_path: Path) -> None:
    """The guarded files are read again only when their stamp changed: an agent that keeps a hook's size
    and sets its times back (``touch -r``) still changes its change time, which it cannot set."""
    root = mini_project(tmp_path / "repo")
    hook = root / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\nexit 0\n")
    os.utime(hook, ns=(1_000_000_000, 1_000_000_000))
    time.sleep(0.15)  # its change time well in the past: the stamp is trusted and its bytes kept
    before = os.stat(hook)
    repo, watch = _watch(root)

    async def scenario() -> list[str]:
        first = await watch.before(repo)
        assert (await watch.after(first, repo, who="the developer")).restored == []
        view = await watch.before(repo)  # answered from the kept bytes
        with hook.open("r+b") as handle:
            handle.write(b"#!/bin/sh\nexit 1\n")
        os.utime(hook, ns=(before.st_atime_ns, before.st_mtime_ns))
        return (await watch.after(view, repo, who="the developer")).restored

    assert anyio.run(scenario) == [".git/hooks/pre-push"]
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_hook_directories_listed_from_memory_still_show_every_file_added_or_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook directory whose stamp is settled is not listed again; an agent that adds a file to it, to a
    directory below it, or removes one changes a directory's stamp, so every change is still found."""
    root = mini_project(tmp_path / "repo")
    hooks = root / ".git" / "hooks"
    (hooks / "nested").mkdir()
    (hooks / "nested" / "kept").write_text("kept\n")
    (hooks / "doomed.sample").write_text("sample\n")
    time.sleep(0.15)  # every directory's change time well in the past: its listing is kept
    repo, watch = _watch(root)
    listings: list[str] = []
    real_scandir = os.scandir

    def counted_scandir(path: str) -> object:
        if os.fspath(path).startswith((str(hooks), str(root / ".git" / "info"))):
            listings.append(os.fspath(path))
        return real_scandir(path)

    async def scenario() -> list[str]:
        first = await watch.before(repo)
        assert (await watch.after(first, repo, who="the developer")).restored == []
        monkeypatch.setattr(os, "scandir", counted_scandir)
        view = await watch.before(repo)
        assert listings == []  # nothing changed: every listing came from memory
        (hooks / "nested" / "post-merge").write_text("#!/bin/sh\ntouch pwned\n")
        (hooks / "doomed.sample").unlink()
        (root / ".git" / "info" / "sparse-checkout").write_text("*\n")
        return (await watch.after(view, repo, who="the developer")).restored

    restored = anyio.run(scenario)

    assert restored == [
        ".git/hooks/doomed.sample",
        ".git/hooks/nested/post-merge",
        ".git/info/sparse-checkout",
    ]
    assert (hooks / "doomed.sample").read_text() == "sample\n"
    assert not (hooks / "nested" / "post-merge").exists()
    assert not (root / ".git" / "info" / "sparse-checkout").exists()
    assert (hooks / "nested" / "kept").read_text() == "kept\n"


def test_commits_on_top_of_the_working_copy_are_folded_in_and_anything_else_stops(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    base = git(root, "rev-parse", "HEAD").strip()
    repo, watch = _watch(root)

    async def folds() -> list[str]:
        view = await watch.before(repo)
        (root / "new.py").write_text("X = 1\n")
        git(root, "add", "new.py")
        git(root, "commit", "-qm", "agent")
        return (await watch.after(view, repo, who="the developer")).folded_commits

    folded = anyio.run(folds)
    assert len(folded) == 1
    assert git(root, "rev-parse", "HEAD").strip() == base
    assert (root / "new.py").read_text() == "X = 1\n"  # the work stays, as a change

    async def rewinds() -> None:
        git(root, "tag", "v1")
        view = await watch.before(repo)
        elsewhere = git(root, "commit-tree", "HEAD^{tree}", "-m", "elsewhere").strip()
        git(root, "tag", "-f", "v1", elsewhere)

        await watch.after(view, repo, who="the developer")

    with pytest.raises(RepositoryChangedError, match="refs/tags/v1"):
        anyio.run(rewinds)


def test_refs_autodev_moved_itself_are_not_taken_for_the_agents(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    head = git(root, "rev-parse", "HEAD").strip()
    repo, watch = _watch(root)

    async def scenario() -> None:
        view = await watch.before(repo)
        await repo.set_ref("refs/autodev/tasks/1.1", head)
        await watch.after(view, repo, who="the developer")

    anyio.run(scenario)


def _two_commits(root: Path) -> tuple[str, str]:
    """A project with a second commit on top of its first: (first, second)."""
    mini_project(root)
    first = git(root, "rev-parse", "HEAD").strip()
    (root / "b.py").write_text("B = 2\n")
    git(root, "add", "b.py")
    git(root, "commit", "-qm", "second")
    return first, git(root, "rev-parse", "HEAD").strip()


def test_recorded_commits_off_the_branch_are_named(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first, second = _two_commits(root)
    git(root, "reset", "-q", "--hard", first)
    _, watch = _watch(root)

    assert missing_landed_commits(root, {"1.1": first, "1.2": second}) == [f"1.2 ({second[:10]})"]
    with pytest.raises(RepositoryChangedError, match=r"task 1\.2"):
        anyio.run(watch.check_landed, {"1.1": first, "1.2": second})


def test_a_listing_found_on_the_branch_is_looked_at_again_once_the_branch_is_rewritten(
    tmp_path: Path,
) -> None:
    """The same listing object is not checked twice while the branch only moves forward; a branch moved
    anywhere else makes it checked again, and what left the branch is named."""
    root = tmp_path / "repo"
    first, second = _two_commits(root)
    repo, watch = _watch(root)
    listing = MappingProxyType({"1.1": first, "1.2": second})
    asked: list[tuple[str, str]] = []
    is_ancestor = repo.is_ancestor

    async def counted(ancestor: str, descendant: str) -> bool:
        asked.append((ancestor, descendant))
        return await is_ancestor(ancestor, descendant)

    repo.is_ancestor = counted  # type: ignore[method-assign]
    anyio.run(watch.check_landed, listing)
    looked = len(asked)
    (root / "c.py").write_text("C = 3\n")
    git(root, "add", "c.py")
    git(root, "commit", "-qm", "third")
    anyio.run(watch.check_landed, listing)  # forward from the tip it was found at: one look at the tip
    assert len(asked) == looked + 1
    git(root, "reset", "-q", "--hard", first)
    with pytest.raises(RepositoryChangedError, match=r"task 1\.2"):
        anyio.run(watch.check_landed, listing)


def test_a_branch_read_before_the_last_check_looks_only_at_what_is_new(tmp_path: Path) -> None:
    """Two tasks' checks finish out of order: the later one carries the branch as it was read before the
    earlier one's. Nothing checked before is looked at again (a run of thousands of tasks would look at
    every landed commit once per such check), what is new is looked at on the older branch, and a branch
    that went back behind a recorded commit still stops the run."""
    root = tmp_path / "repo"
    base, _ = _two_commits(root)
    repo, watch = _watch(root)
    asked: list[tuple[str, str]] = []
    is_ancestor = repo.is_ancestor

    async def counted(ancestor: str, descendant: str) -> bool:
        asked.append((ancestor, descendant))
        return await is_ancestor(ancestor, descendant)

    async def landings(count: int) -> list[str]:
        tree = await repo.tree_of(base)
        made = [base]
        for number in range(count):
            made.append(await repo.commit_tree(tree, made[-1], f"autodev: 1.{number} landed"))
        return made[1:]

    made = anyio.run(landings, 40)
    repo.is_ancestor = counted  # type: ignore[method-assign]
    early = {f"1.{number}": commit for number, commit in enumerate(made[:30])}
    anyio.run(partial(watch.check_landed, MappingProxyType(dict(early)), tip=made[-1]))
    assert len(asked) == 30

    asked.clear()
    later = MappingProxyType({**early, "1.30": made[30]})
    anyio.run(partial(watch.check_landed, later, tip=made[35]))  # read before the branch reached made[-1]
    assert asked == [(made[30], made[35])]

    asked.clear()
    anyio.run(partial(watch.check_landed, later, tip=made[-1]))  # the newest tip again: nothing new
    anyio.run(partial(watch.check_landed, later, tip=made[-1]))
    assert asked == []

    # The branch went back to made[35] while made[38] is recorded as landed: named, as before.
    recorded = MappingProxyType({**later, "1.38": made[38]})
    with pytest.raises(RepositoryChangedError, match=r"task 1\.38"):
        anyio.run(partial(watch.check_landed, recorded, tip=made[35]))


def test_diffing_commands_run_without_external_drivers() -> None:
    assert _without_drivers(["diff", "--cached"]) == ["diff", "--no-ext-diff", "--no-textconv", "--cached"]
    assert _without_drivers(["-c", "a=b", "log", "-1"])[:4] == ["-c", "a=b", "log", "--no-ext-diff"]
    assert _without_drivers(["status", "--porcelain"]) == ["status", "--porcelain"]


def _watch_with_records(root: Path) -> tuple[GitRepo, AgentWatch]:
    repo = GitRepo(root)
    return repo, AgentWatch(repo, root / ".autodev" / "config.toml", calls_dir=root / ".autodev" / "calls")


def test_a_call_that_ended_unchecked_is_checked_by_the_next_start_once(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    repo, watch = _watch_with_records(root)

    async def killed_mid_call() -> None:
        # The process dies after the agent acted and before the check: only the record survives it.
        watch.remember(await watch.before(repo), repo, "the developer of task 1.1")
        (root / ".git" / "hooks" / "post-commit").write_text("#!/bin/sh\ntouch pwned\n")
        git(root, "branch", "agent-was-here")

    anyio.run(killed_mid_call)
    _, next_start = _watch_with_records(root)

    with pytest.raises(RepositoryChangedError) as stopped:
        anyio.run(next_start.check_interrupted, set())

    message = str(stopped.value)
    assert "the developer of task 1.1" in message
    assert ".git/hooks/post-commit added" in message
    assert "refs/heads/agent-was-here (none) ->" in message
    assert (root / ".git" / "hooks" / "post-commit").exists()  # nothing put back: the user decides
    assert list((root / ".autodev" / "calls").iterdir()) == []
    anyio.run(next_start.check_interrupted, set())  # told once; the user has decided


def _records(root: Path) -> list[Path]:
    return sorted((root / ".autodev" / "calls").iterdir())


def test_a_checked_calls_record_is_emptied_and_kept_for_the_next_calls_view(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    repo, watch = _watch_with_records(root)

    async def two_calls() -> None:
        first = watch.remember(await watch.before(repo), repo, "the developer of task 1.1")
        assert first is not None and b'"the developer of task 1.1"' in first.path.read_bytes()
        watch.forget(first)
        assert _records(root) == [first.path] and first.path.read_bytes() == b""
        second = watch.remember(await watch.before(repo), repo, "the reviewer of task 1.1")
        # The same file, no new one: only the second call's view is in it.
        assert second is not None and second.path == first.path and _records(root) == [first.path]
        assert b"reviewer" in second.path.read_bytes() and b"developer" not in second.path.read_bytes()
        watch.forget(second)

    anyio.run(two_calls)
    # A process that ends without releasing them (killed) leaves emptied records: no call to name.
    _, next_start = _watch_with_records(root)
    anyio.run(next_start.check_interrupted, set())
    assert _records(root) == []


def test_the_kept_records_go_when_the_call_that_used_the_watch_is_over(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    repo, watch = _watch_with_records(root)

    async def one_call() -> int:
        record = watch.remember(await watch.before(repo), repo, "the developer of task 1.1")
        assert record is not None
        watch.forget(record)
        return record.fd

    fd = anyio.run(one_call)
    watch.release_records()

    assert _records(root) == []
    try:  # closed: the number is free, or another file's by now
        still_open = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        still_open = ""
    assert str(root / ".autodev" / "calls") not in still_open


def test_a_kept_record_an_agent_replaced_or_linked_is_never_written_through(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    repo, watch = _watch_with_records(root)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")

    async def calls() -> None:
        kept = watch.remember(await watch.before(repo), repo, "the developer of task 1.1")
        assert kept is not None
        watch.forget(kept)
        kept.path.unlink()
        kept.path.symlink_to(victim)  # the agent of a later call swaps the kept record for a link
        second = watch.remember(await watch.before(repo), repo, "the reviewer of task 1.1")
        assert second is not None and second.path != kept.path
        watch.forget(second)
        elsewhere = tmp_path / "elsewhere.json"
        os.link(second.path, elsewhere)  # or links the kept record to a name of its own
        third = watch.remember(await watch.before(repo), repo, "the test engineer of task 1.1")
        assert third is not None and third.path not in (kept.path, second.path)
        assert elsewhere.read_bytes() == b""
        watch.forget(third)

    anyio.run(calls)
    assert victim.read_text() == "the user's file\n"


def test_a_call_interrupted_in_a_kept_record_is_checked_by_the_next_start(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    repo, watch = _watch_with_records(root)

    async def killed_in_the_second_call() -> None:
        watch.forget(watch.remember(await watch.before(repo), repo, "the developer of task 1.1"))
        watch.remember(await watch.before(repo), repo, "the reviewer of task 1.1")
        git(root, "branch", "agent-was-here")

    anyio.run(killed_in_the_second_call)
    _, next_start = _watch_with_records(root)

    with pytest.raises(RepositoryChangedError, match=r"the reviewer of task 1\.1.*agent-was-here"):
        anyio.run(next_start.check_interrupted, set())
    assert _records(root) == []


def test_after_an_interrupted_call_autodevs_own_commits_pass_and_the_agents_are_folded(
    tmp_path: Path,
) -> None:
    root = mini_project(tmp_path / "repo")
    base = git(root, "rev-parse", "HEAD").strip()
    repo, watch = _watch_with_records(root)

    async def interrupted(subject: str) -> None:
        watch.remember(await watch.before(repo), repo, "the developer of task 1.1")
        (root / f"{len(subject)}.py").write_text("X = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", subject)

    anyio.run(interrupted, "autodev: 1.1 Add triple")
    anyio.run(watch.check_interrupted, {"autodev: 1.1 Add triple"})
    landed = git(root, "rev-parse", "HEAD").strip()
    assert landed != base  # AutoDev's own task commit stays

    anyio.run(interrupted, "wip from the agent")
    anyio.run(watch.check_interrupted, {"autodev: 1.1 Add triple"})
    assert git(root, "rev-parse", "HEAD").strip() == landed  # the agent's commit is folded
    assert "18.py" in git(root, "status", "--porcelain")


def test_a_damaged_record_of_an_interrupted_call_is_no_all_clear(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    calls = root / ".autodev" / "calls"
    calls.mkdir(parents=True)
    (calls / "0123abcd.json").write_text("{not json")
    _, watch = _watch_with_records(root)

    with pytest.raises(RepositoryChangedError, match=r"0123abcd.json cannot be read, so what its call did"):
        anyio.run(watch.check_interrupted, set())

    anyio.run(watch.check_interrupted, set())  # named once


def test_the_ledger_is_checked_by_its_stamp_after_a_call_and_whole_at_a_phase_end(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "repo")
    path = root / ".autodev" / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.open()
    for index in range(3):
        ledger.append("note", {"index": index})
    written = path.read_bytes()
    repo = GitRepo(root)
    watch = AgentWatch(repo, root / ".autodev" / "config.toml", ledger=lambda: ledger)

    async def call(change: Callable[[], object]) -> list[str]:
        view = await watch.before(repo)
        change()
        return (await watch.after(view, repo, who="the developer")).restored

    assert anyio.run(call, lambda: None) == []
    assert anyio.run(call, lambda: path.write_bytes(written.replace(b'"index":1', b'"index":8'))) == [
        ".autodev/ledger.jsonl"
    ]
    assert path.read_bytes() == written
    # A rewrite the stamp cannot tell (an older kernel's coarse change times): the whole comparison can.
    path.write_bytes(written.replace(b'"index":2', b'"index":9'))
    ledger._stamp = ledger_stamp(path)
    assert anyio.run(call, lambda: None) == []
    assert watch.guard_ledger(whole=True)
    assert path.read_bytes() == written
    assert not watch.guard_ledger(whole=True)


def test_the_main_checkout_is_scanned_once_per_call_and_a_write_there_between_calls_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(tmp_path / "repo")
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "task"))
    main, copy = GitRepo(root), GitRepo(tmp_path / "task")
    watch = AgentWatch(main, root / ".autodev" / "config.toml")
    scans: list[Path] = []
    original = GitRepo.dirty_paths

    async def counted(repo: GitRepo) -> list[str]:
        scans.append(repo.root)
        return await original(repo)

    monkeypatch.setattr(GitRepo, "dirty_paths", counted)

    async def call(write: Callable[[], object]) -> None:
        view = await watch.before(copy)
        write()
        await watch.after(view, copy, who="the developer of task 1.1")

    anyio.run(call, lambda: (tmp_path / "task" / "own.py").write_text("x = 1\n"))
    anyio.run(call, lambda: None)
    assert scans == [root, root, root]  # the first view, then one scan after each call
    (root / "stray.py").write_text("written between two calls\n")
    with pytest.raises(RepositoryChangedError, match=r"stray\.py"):
        anyio.run(call, lambda: None)
    watch.rescan_main_checkout()
    anyio.run(call, lambda: None)  # a new run starts from the checkout as it is


def test_a_fast_forward_under_way_while_another_call_is_checked_is_not_taken_for_the_agents(
    tmp_path: Path,
) -> None:
    root = mini_project(tmp_path / "repo")
    base = git(root, "rev-parse", "HEAD").strip()
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    first, second, foreign = (
        git(root, "commit-tree", tree, "-p", base, "-m", message).strip() for message in ("a", "b", "c")
    )
    branch = git(root, "symbolic-ref", "HEAD").strip()
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "task"))
    main, copy = GitRepo(root), GitRepo(tmp_path / "task")
    watch = AgentWatch(main, root / ".autodev" / "config.toml")

    async def scenario() -> None:
        view = await watch.before(copy)
        assert await main.fast_forward(first)  # another task landed during the call
        assert not await main.fast_forward(second)  # not a fast-forward: nothing moved, nothing noted
        assert not main.moved_by_autodev(branch, second)
        # The next task's merge has been noted but git has not moved the branch yet.
        main._note_own_move(branch, foreign)
        await watch.after(view, copy, who="the developer of task 1.1")
        view = await watch.before(copy)
        git(root, "update-ref", branch, second)  # neither where AutoDev put it nor where it had
        await watch.after(view, copy, who="the developer of task 1.2")

    with pytest.raises(RepositoryChangedError, match=r"task 1\.2 moved git refs"):
        anyio.run(scenario)


async def _with_the_lock_held_elsewhere(
    lock: anyio.Lock, check: Callable[[], Awaitable[object]], before_release: Callable[[], None]
) -> None:
    """Run ``check`` while another task holds ``lock`` (a merge under way); ``before_release`` runs once
    ``check`` has either finished or blocked, and the lock is released after it."""
    held, release = anyio.Event(), anyio.Event()

    async def merger() -> None:
        async with lock:
            held.set()
            await release.wait()

    async def checked() -> None:
        try:
            await check()
        finally:
            release.set()  # a check that waited for the lock must still end

    async with anyio.create_task_group() as group:
        group.start_soon(merger)
        await held.wait()
        group.start_soon(checked)
        await anyio.wait_all_tasks_blocked()
        before_release()
        release.set()


def _checked_while_a_merge_holds_the_lock(
    tmp_path: Path, write: Callable[[Path], object]
) -> tuple[list[str], BaseException | None]:
    """An agent call of a task in its own worktree, checked while another task's merge holds the main
    tree's lock (the main checkout watched); ``write`` gets the main checkout's root and writes during the
    call. In which order the check and the lock's release came, and the check's error if it raised."""
    root = mini_project(tmp_path / "repo")
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "task"))
    main, copy = GitRepo(root), GitRepo(tmp_path / "task")
    watch = AgentWatch(main, root / ".autodev" / "config.toml")
    lock = anyio.Lock()
    finished: list[str] = []

    async def scenario() -> None:
        assert await main.watch()
        try:
            view = await watch.before(copy)

            async def check() -> None:
                write(root)
                try:
                    await watch.after(view, copy, who="the developer of task 1.1", main_tree_lock=lock)
                finally:
                    finished.append("checked")

            await _with_the_lock_held_elsewhere(lock, check, lambda: finished.append("released"))
        finally:
            main.unwatch()

    try:
        anyio.run(scenario)
    except BaseExceptionGroup as group:
        return finished, group.exceptions[0]
    return finished, None


def test_a_check_does_not_wait_for_a_merge_that_has_not_touched_the_main_checkout(tmp_path: Path) -> None:
    def the_agents_own_work(_root: Path) -> None:
        (tmp_path / "task" / "own.py").write_text("x = 1\n")

    finished, error = _checked_while_a_merge_holds_the_lock(tmp_path, the_agents_own_work)

    assert finished == ["checked", "released"]  # it ended while the lock was still held: it never waited
    assert error is None


def test_a_write_in_the_main_checkout_is_looked_at_after_the_merge_under_way(tmp_path: Path) -> None:
    def stray(root: Path) -> None:
        (root / "stray.py").write_text("written in the main checkout\n")

    finished, error = _checked_while_a_merge_holds_the_lock(tmp_path, stray)

    assert finished == ["released", "checked"]  # it waited for the lock, then looked
    assert isinstance(error, RepositoryChangedError) and "stray.py" in error.message
