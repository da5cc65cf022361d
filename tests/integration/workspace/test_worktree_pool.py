"""WorktreePool and WorktreeManager's per-task calls on a real git repository: warm start, recycling to an
exactly clean tree, overflow, concurrent claims, crash leftovers, cleanup; claim, release, adopt, prune."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from support.git_calls import git_started
from support.parallel import commit_everything as _commit
from support.parallel import git as _git

from autodev.workspace.worktree import Worktree, WorktreeError, WorktreeManager
from autodev.workspace.worktree_pool import WorktreePool


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "repo"  # git reports resolved paths
    (root / "pkg").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "pkg" / "gone.py").write_text("GONE = False\n")
    _commit(root, "init")
    return root


def _head(path: Path) -> str:
    return _git(path, "rev-parse", "HEAD").strip()


def _dirt(path: Path) -> str:
    """Every difference from HEAD, untracked and ignored files included; empty when exactly clean."""
    return _git(path, "status", "--porcelain", "--ignored", "--untracked-files=all")


def _registered(root: Path) -> list[Path]:
    listing = _git(root, "worktree", "list", "--porcelain").splitlines()
    return [Path(line.removeprefix("worktree ")) for line in listing if line.startswith("worktree ")]


def _scribble(worktree: Worktree) -> None:
    """What a task leaves behind: edits, a new file, ignored build output, a deletion and a commit."""
    (worktree.path / "app.py").write_text("VALUE = 99\n")
    (worktree.path / "new.py").write_text("NEW = True\n")
    (worktree.path / "debug.log").write_text("noise\n")
    (worktree.path / "build").mkdir()
    (worktree.path / "build" / "out.o").write_bytes(b"\0\1")
    (worktree.path / "pkg" / "gone.py").unlink()
    _git(worktree.path, "commit", "-q", "-am", "a task's own commit")
    (worktree.path / "app.py").write_text("VALUE = 100\n")


def _pool(repo: Path, size: int) -> WorktreePool:
    return WorktreePool(repo, repo / ".autodev" / "worktrees", size)


@pytest.mark.asyncio
async def test_cold_start_creates_n_registered_worktrees_at_the_baseline_once(repo: Path) -> None:
    pool = _pool(repo, 3)
    created = await pool.cold_start()
    baseline = _head(repo)
    assert pool.baseline == baseline
    assert sorted(worktree.name for worktree in created) == ["pool-0", "pool-1", "pool-2"]
    assert set(_registered(repo)) == {repo, *(worktree.path for worktree in created)}
    for worktree in created:
        assert worktree.base == baseline and _head(worktree.path) == baseline and _dirt(worktree.path) == ""
    assert await pool.cold_start() == []
    assert len(_registered(repo)) == 4 and len(pool.active) == 3
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_claimed_worktree_is_exactly_clean_after_a_previous_claimer_dirtied_it(repo: Path) -> None:
    pool = _pool(repo, 1)
    await pool.cold_start()
    first = await pool.claim("1.1")
    _scribble(first)
    await pool.release(first)
    second = await pool.claim("1.2")
    assert second.path == first.path  # recycled, not recreated
    assert _head(second.path) == pool.baseline and _dirt(second.path) == ""
    assert (second.path / "app.py").read_text() == "VALUE = 1\n"
    assert (second.path / "pkg" / "gone.py").exists()
    assert not (second.path / "debug.log").exists() and not (second.path / "build").exists()
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_claim_at_another_base_gives_that_commit_clean_and_the_next_claim_the_baseline(
    repo: Path,
) -> None:
    older = _head(repo)
    (repo / "app.py").write_text("VALUE = 2\n")
    baseline = _commit(repo, "second")
    pool = _pool(repo, 1)
    await pool.cold_start()
    worktree = await pool.claim("2.1", older)
    assert worktree.base == older and _head(worktree.path) == older and _dirt(worktree.path) == ""
    assert (worktree.path / "app.py").read_text() == "VALUE = 1\n"
    _scribble(worktree)
    await pool.release(worktree)  # queued as it is: the claim that lends it out again resets it
    again = await pool.claim("2.2")
    assert again.path == worktree.path and again.base == baseline
    assert _head(again.path) == baseline and _dirt(again.path) == ""
    assert [(held.name, held.base) for held in pool.active] == [("pool-0", baseline)]
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_overflow_worktrees_beyond_the_pool_are_removed_on_release(repo: Path) -> None:
    pool = _pool(repo, 2)
    await pool.cold_start()
    claimed = [await pool.claim(task_id) for task_id in ("a", "b", "c", "d")]
    assert sorted(worktree.name for worktree in claimed) == ["pool-0", "pool-1", "task-c", "task-d"]
    assert len(_registered(repo)) == 5
    for worktree in claimed:
        await pool.release(worktree)
    assert sorted(worktree.name for worktree in pool.active) == ["pool-0", "pool-1"]
    assert len(_registered(repo)) == 3 and not (repo / ".autodev" / "worktrees" / "task-c").exists()
    # The queue holds two, not four: a third claim overflows again.
    again = [await pool.claim(task_id) for task_id in ("e", "f", "g")]
    assert sorted(worktree.name for worktree in again) == ["pool-0", "pool-1", "task-g"]
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_without_cold_start_claims_overflow_at_the_main_head(repo: Path) -> None:
    pool = _pool(repo, 2)
    worktree = await pool.claim("x")
    assert worktree.name == "task-x" and _head(worktree.path) == _head(repo)
    await pool.release(worktree)
    assert pool.active == [] and len(_registered(repo)) == 1


@pytest.mark.asyncio
async def test_releasing_twice_never_queues_a_worktree_twice(repo: Path) -> None:
    pool = _pool(repo, 1)
    await pool.cold_start()
    worktree = await pool.claim("1")
    await pool.release(worktree)
    await pool.release(worktree)
    first, second = await pool.claim("2"), await pool.claim("3")
    assert (first.name, second.name) == ("pool-0", "task-3")
    await pool.release(worktree)  # a stale handle: must not reset pool-0, now lent to task 2
    (first.path / "work.py").write_text("IN_PROGRESS = True\n")
    await pool.release(worktree)
    assert (first.path / "work.py").exists()
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_worktree_that_cannot_be_reset_is_made_anew(repo: Path) -> None:
    pool = _pool(repo, 1)
    await pool.cold_start()
    worktree = await pool.claim("1")
    git_dir = Path(_git(worktree.path, "rev-parse", "--absolute-git-dir").strip())
    (git_dir / "index.lock").write_text("")  # as a git killed mid-command leaves it
    await pool.release(worktree)
    claimed = await pool.claim("2")
    fresh_git_dir = Path(_git(claimed.path, "rev-parse", "--absolute-git-dir").strip())
    assert claimed.name == "pool-0" and not (fresh_git_dir / "index.lock").exists()
    assert _dirt(claimed.path) == "" and _head(claimed.path) == pool.baseline
    assert [held.name for held in pool.active] == ["pool-0"] and len(_registered(repo)) == 2
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_concurrent_claims_never_share_a_worktree(repo: Path) -> None:
    size = 3
    pool = _pool(repo, size)
    await pool.cold_start()
    paths: list[Path] = []

    async def task(task_id: str) -> None:
        worktree = await pool.claim(task_id)
        (worktree.path / "owner.txt").write_text(task_id)
        await anyio.sleep(0.05)
        assert (worktree.path / "owner.txt").read_text() == task_id
        paths.append(worktree.path)
        await pool.release(worktree)

    async with anyio.create_task_group() as group:
        for i in range(2 * size):
            group.start_soon(task, str(i))
    assert len(paths) == len(set(paths)) == 2 * size
    assert sorted(worktree.name for worktree in pool.active) == ["pool-0", "pool-1", "pool-2"]
    reclaimed = [await pool.claim(f"again-{i}") for i in range(size)]
    assert sorted(worktree.name for worktree in reclaimed) == ["pool-0", "pool-1", "pool-2"]
    assert all(_dirt(worktree.path) == "" for worktree in reclaimed)
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_started_pool_makes_its_worktrees_as_claims_need_them(repo: Path) -> None:
    pool = _pool(repo, 2)
    await pool.warm_up(2)
    assert pool.active == [] and pool.baseline == _head(repo)
    first = await pool.claim("a")
    assert first.name == "pool-0" and _registered(repo) == [repo, first.path]
    _scribble(first)
    await pool.release(first)
    again, second = await pool.claim("b"), await pool.claim("c")
    assert (again.name, second.name) == ("pool-0", "pool-1") and _dirt(again.path) == ""
    overflow = await pool.claim("d")
    assert overflow.name == "task-d"
    for worktree in (again, second, overflow):
        await pool.release(worktree)
    assert sorted(worktree.name for worktree in pool.active) == ["pool-0", "pool-1"]
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_winding_down_removes_the_idle_worktrees_now_and_the_claimed_ones_as_they_come_back(
    repo: Path,
) -> None:
    pool = _pool(repo, 3)
    created = await pool.cold_start()
    claimed = [await pool.claim("a"), await pool.claim("b")]
    (idle,) = [worktree for worktree in created if worktree.name not in {w.name for w in claimed}]

    await pool.wind_down()

    assert not idle.path.exists() and set(_registered(repo)) == {repo, *(w.path for w in claimed)}
    first = pool.active[0]
    _scribble(first)
    await pool.release(first)
    assert not first.path.exists() and len(pool.active) == 1
    # A task that starts after all is served as before, at the base it asks for, and ends the wind-down.
    late = await pool.claim("late", _head(repo))
    assert late.name.startswith("pool-") and _dirt(late.path) == "" and _head(late.path) == _head(repo)
    await pool.release(late)
    assert late.path.exists() and len(pool.active) == 2
    await pool.cleanup_all()
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_a_worktree_that_cannot_be_removed_in_a_wind_down_stops_neither_it_nor_a_release(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(repo, 2)
    await pool.cold_start()
    held = await pool.claim("a")

    async def refused(worktree: Worktree) -> None:
        raise WorktreeError(f"cannot remove {worktree.name}")

    monkeypatch.setattr(WorktreeManager, "remove", lambda self, worktree: refused(worktree))
    await pool.wind_down()
    await pool.release(held)

    monkeypatch.undo()
    await pool.cleanup_all()
    await WorktreeManager(repo, repo / ".autodev" / "worktrees").prune_stale()
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_a_manager_has_nothing_to_wind_down_and_removes_on_release_as_before(repo: Path) -> None:
    manager = WorktreeManager(repo, repo / ".autodev" / "worktrees")
    held = await manager.claim("a", _head(repo))
    await manager.wind_down()
    assert held.path.exists() and _registered(repo) == [repo, held.path]
    await manager.release(held)
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_cleanup_all_removes_everything_and_can_run_again(repo: Path) -> None:
    root_dir = repo / ".autodev" / "worktrees"
    pool = _pool(repo, 2)
    await pool.cold_start()
    await pool.claim("a")
    await pool.claim("b")
    await pool.claim("c")  # overflow
    await pool.cleanup_all()
    assert _registered(repo) == [repo] and not root_dir.exists() and pool.active == []
    await pool.cleanup_all()
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_leftovers_of_a_crashed_run_do_not_break_cold_start(repo: Path) -> None:
    root_dir = repo / ".autodev" / "worktrees"
    crashed = _pool(repo, 1)
    await crashed.cold_start()
    _scribble(await crashed.claim("1"))  # the run dies holding pool-0
    (root_dir / "pool-1").mkdir()  # and half-way through creating pool-1
    (root_dir / "pool-1" / "junk.txt").write_text("junk")

    pool = _pool(repo, 2)
    created = await pool.cold_start()
    assert sorted(worktree.name for worktree in created) == ["pool-0", "pool-1"]
    for worktree in created:
        assert _head(worktree.path) == pool.baseline and _dirt(worktree.path) == ""
    assert len(_registered(repo)) == 3
    await pool.cleanup_all()
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_manager_claim_replaces_a_crashed_tasks_worktree_and_release_removes_it(repo: Path) -> None:
    base = _head(repo)
    root_dir = repo / ".autodev" / "worktrees"
    _scribble(await WorktreeManager(repo, root_dir).claim("1.2", base))  # then the run dies

    manager = WorktreeManager(repo, root_dir)
    worktree = await manager.claim("1.2", base)
    assert worktree.name == "task-1.2" and _head(worktree.path) == base and _dirt(worktree.path) == ""
    assert manager.active == [worktree]
    await manager.release(worktree)
    assert manager.active == [] and not worktree.path.exists() and len(_registered(repo)) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("then", ["claim", "prune"])
async def test_a_worktree_add_killed_half_way_blocks_neither_a_claim_nor_a_prune(
    repo: Path, then: str
) -> None:
    """`git worktree add` registers the worktree locked ("initializing") before it creates the directory:
    a kill in between leaves a missing, locked entry that plain `add` and `remove` refuse."""
    base = _head(repo)
    root_dir = repo / ".autodev" / "worktrees"
    path = root_dir / "task-1.2"
    _git(repo, "worktree", "add", "--detach", "-q", str(path), base)
    (repo / ".git" / "worktrees" / "task-1.2" / "locked").write_text("initializing\n")
    shutil.rmtree(path)
    manager = WorktreeManager(repo, root_dir)
    if then == "claim":
        worktree = await manager.claim("1.2", base)
        assert _head(worktree.path) == base and _dirt(worktree.path) == ""
        await manager.release(worktree)
    else:
        await manager.prune_stale()
    assert len(_registered(repo)) == 1


@pytest.mark.asyncio
async def test_prune_stale_keeps_a_resumed_tasks_worktree_which_adopt_then_tracks(repo: Path) -> None:
    base = _head(repo)
    root_dir = repo / ".autodev" / "worktrees"
    crashed = WorktreeManager(repo, root_dir)
    resumed, abandoned = await crashed.claim("3", base), await crashed.claim("4", base)
    (resumed.path / "progress.py").write_text("DONE = 1\n")

    manager = WorktreeManager(repo, root_dir)
    assert await manager.prune_stale(keep=[root_dir / ".." / "worktrees" / "task-3"]) == [abandoned.path]
    adopted = manager.adopt(resumed.path, base)
    assert adopted == Worktree("task-3", resumed.path, base) and manager.active == [adopted]
    assert (adopted.path / "progress.py").read_text() == "DONE = 1\n"
    assert await manager.prune_stale() == []  # adopted counts as ours
    with pytest.raises(WorktreeError, match="cannot adopt"):
        manager.adopt(repo, base)  # never the main tree: release would delete it
    await manager.cleanup_all()
    assert _registered(repo) == [repo] and manager.active == []


@pytest.mark.asyncio
async def test_pool_adopts_a_resumed_worktree_and_removes_it_on_release(repo: Path) -> None:
    root_dir = repo / ".autodev" / "worktrees"
    crashed = _pool(repo, 1)
    await crashed.cold_start()
    resumed = await crashed.claim("7")  # pool-0, recorded in the ledger, then the run dies

    pool = _pool(repo, 1)
    assert await pool.prune_stale(keep=[resumed.path]) == []
    adopted = pool.adopt(resumed.path, resumed.base)
    created = await pool.cold_start()
    assert [worktree.name for worktree in created] == ["pool-1"]  # the adopted pool-0 is left alone
    await pool.release(adopted)
    assert not adopted.path.exists() and [worktree.name for worktree in pool.active] == ["pool-1"]
    await pool.cleanup_all()
    assert not root_dir.exists()


def _land(repo: Path, name: str) -> str:
    """A commit on the main branch, as a task's landing makes one: its id."""
    (repo / f"{name}.py").write_text(f"LANDED = {name!r}\n")
    (repo / "app.py").write_text(f"VALUE = {name!r}\n")
    _commit(repo, f"land {name}")
    return _head(repo)


@pytest.mark.asyncio
async def test_a_landing_readies_the_worktree_the_next_claim_takes_and_that_claim_starts_no_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(repo, 2)
    await pool.warm_up(2)
    first = await pool.claim("a")
    _scribble(first)
    await pool.release(first)
    landed = _land(repo, "landed")

    await pool.advance(landed)

    assert _head(first.path) == landed and _dirt(first.path) == ""
    started = git_started(monkeypatch)
    claimed = await pool.claim("b", landed)
    assert claimed.name == first.name and claimed.base == landed
    assert started == []  # the claim's reset found nothing left to do
    assert _dirt(claimed.path) == "" and (claimed.path / "app.py").read_text() == "VALUE = 'landed'\n"
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_what_is_written_in_a_readied_worktree_before_its_claim_does_not_reach_the_task(
    repo: Path,
) -> None:
    pool = _pool(repo, 1)
    await pool.warm_up(1)
    first = await pool.claim("a")
    await pool.release(first)
    landed = _land(repo, "landed")
    await pool.advance(landed)
    # An agent of another task, or anyone, writes in the idle worktree between the landing and the claim.
    (first.path / "app.py").write_text("VALUE = 'forged'\n")
    (first.path / "stray.py").write_text("STRAY = 1\n")
    (first.path / "debug.log").write_text("noise\n")

    claimed = await pool.claim("b", landed)

    assert claimed.name == first.name and _head(claimed.path) == landed and _dirt(claimed.path) == ""
    assert (claimed.path / "app.py").read_text() == "VALUE = 'landed'\n"
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_claim_while_a_worktree_is_readied_waits_for_it_and_gets_its_own_base(repo: Path) -> None:
    pool = _pool(repo, 1)
    await pool.warm_up(1)
    first = await pool.claim("a")
    _scribble(first)
    await pool.release(first)
    baseline = pool.baseline
    assert baseline is not None
    landed = _land(repo, "landed")
    claims: list[Worktree] = []

    async def claim_at_the_old_base() -> None:
        claims.append(await pool.claim("b", baseline))

    async with anyio.create_task_group() as group:
        group.start_soon(pool.advance, landed)
        group.start_soon(claim_at_the_old_base)

    (claimed,) = claims
    assert claimed.name == first.name  # not a second worktree made beside the one being readied
    assert _head(claimed.path) == baseline and _dirt(claimed.path) == ""
    assert (claimed.path / "app.py").read_text() == "VALUE = 1\n" and not (
        claimed.path / "landed.py"
    ).exists()
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_with_none_idle_a_landing_makes_a_spare_within_the_pools_size(repo: Path) -> None:
    pool = _pool(repo, 2)
    await pool.warm_up(2)
    first = await pool.claim("a")
    landed = _land(repo, "landed")

    await pool.advance(landed)  # every worktree is claimed: the spare is made at the landed commit

    assert sorted(worktree.name for worktree in pool.active) == ["pool-0", "pool-1"]
    spare = await pool.claim("b", landed)
    assert spare.name == "pool-1" and _head(spare.path) == landed and _dirt(spare.path) == ""
    again = _land(repo, "again")
    await pool.advance(again)  # the pool is full, and none is idle: nothing more is made
    assert len(pool.active) == 2 and len(_registered(repo)) == 3
    for worktree in (first, spare):
        await pool.release(worktree)
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_landing_after_the_wind_down_readies_and_makes_nothing(repo: Path) -> None:
    pool = _pool(repo, 2)
    await pool.warm_up(2)
    first = await pool.claim("a")
    await pool.wind_down()

    await pool.advance(_land(repo, "landed"))

    assert [worktree.name for worktree in pool.active] == [first.name]
    assert _head(first.path) == pool.baseline
    await pool.release(first)
    assert pool.active == [] and _registered(repo) == [repo]
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_worktree_that_cannot_be_readied_is_removed_and_the_next_claim_makes_one(repo: Path) -> None:
    pool = _pool(repo, 1)
    await pool.warm_up(1)
    first = await pool.claim("a")
    git_dir = Path(_git(first.path, "rev-parse", "--absolute-git-dir").strip())
    (git_dir / "index.lock").write_text("")  # as a git killed mid-command leaves it
    await pool.release(first)
    landed = _land(repo, "landed")

    await pool.advance(landed)  # logged, not raised: the landing goes on

    assert pool.active == [] and not first.path.exists()
    claimed = await pool.claim("b", landed)
    assert claimed.name == "pool-0" and _head(claimed.path) == landed and _dirt(claimed.path) == ""
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_claim_during_a_cold_start_takes_a_worktree_it_makes_instead_of_making_another(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(repo, 3)
    started = git_started(monkeypatch)
    claimed: list[Worktree] = []

    async with anyio.create_task_group() as group:
        group.start_soon(pool.cold_start, 2)
        await (
            anyio.lowlevel.checkpoint()
        )  # the cold start has begun, and reads the baseline before making anything
        claimed.append(await pool.claim("1.1"))

    assert claimed[0].name in {"pool-0", "pool-1"}
    assert _head(claimed[0].path) == _head(repo) and _dirt(claimed[0].path) == ""
    # The two worktrees the cold start made, once each: the claim made none of its own.
    assert len([args for args in started if "worktree" in args and "add" in args]) == 2
    assert sorted(worktree.name for worktree in pool.active) == ["pool-0", "pool-1"]
    await pool.release(claimed[0])
    await pool.cleanup_all()
    assert _registered(repo) == [repo]


@pytest.mark.asyncio
async def test_a_claim_beyond_the_worktrees_a_cold_start_makes_makes_its_own_at_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(repo, 3)
    first_made = anyio.Event()
    create = WorktreeManager.create

    async def held(
        self: WorktreeManager, name: str, base: str, patch: str = "", *, replace: bool = False
    ) -> Worktree:
        if name == "pool-0":
            await first_made.wait()  # the cold start's worktree takes its time (a large checkout)
        return await create(self, name, base, patch, replace=replace)

    monkeypatch.setattr(WorktreeManager, "create", held)
    claimed: dict[str, Worktree] = {}

    async def claim(task_id: str) -> None:
        claimed[task_id] = await pool.claim(task_id)

    async with anyio.create_task_group() as group:
        group.start_soon(pool.cold_start, 1)
        await anyio.lowlevel.checkpoint()
        group.start_soon(claim, "1.1")  # waits for the worktree the cold start is making
        group.start_soon(claim, "1.2")  # nothing left to wait for: makes its own
        for _ in range(500):
            if "1.2" in claimed:
                break
            await anyio.sleep(0.01)
        assert "1.2" in claimed and "1.1" not in claimed, "the second claim waited for the first's worktree"
        first_made.set()

    assert claimed["1.1"].name == "pool-0" and claimed["1.2"].name == "pool-1"
    await pool.cleanup_all()
