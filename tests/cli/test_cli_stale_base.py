"""A checkout behind its base: `autodev run` fetches the base, says how far behind it is, and asks rather
than acts (exit 3, nothing recorded, no agent called); `--stale-base-ok` builds on it as it is, recorded and
told to the agents; `autodev refresh-base` is a strict fast-forward. The installed executable, a real on-disk
remote, scripted agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.cli import RunCli, assert_clean_error
from support.orchestration import Recorder, config_for, git_log
from support.remotes import bare_origin_of, push_from_elsewhere

from autodev.adapters.scripted import ScriptedAdapter
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.orchestrator import Orchestrator
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

THRESHOLD = {"AUTODEV_BASE_BEHIND_THRESHOLD": "2"}


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    setup = prepare_demo(tmp_path / "project")
    origin = bare_origin_of(setup.repo_root, tmp_path / "origin.git")
    push_from_elsewhere(origin, tmp_path / "elsewhere", 3)
    return setup


def _ops(root: Path) -> list[tuple[str, dict[str, Any]]]:
    path = AutodevPaths(root).ledger
    if not path.exists():
        return []
    ledger = Ledger(path, readonly=True)
    ledger.open(repair=False)
    try:
        return [(entry.op, entry.payload) for entry in ledger.entries()]
    finally:
        ledger.close()


def test_a_run_behind_its_base_asks_before_any_agent_and_records_nothing(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    result = run_cli("-C", root, "run", *agents, demo.intent, env=THRESHOLD)

    assert_clean_error(result, 3)
    flat = " ".join(result.err.split())
    assert "is 3 commit(s) behind origin/" in flat and "fetched just now" in flat
    assert "`autodev refresh-base`" in flat and "--stale-base-ok" in flat
    assert not any(op == "plan_init" for op, _ in _ops(demo.repo_root))

    # Without a fetch the ref at hand is not behind, and the run says it may be out of date.
    unfetched = run_cli("-C", root, "run", "--no-fetch", "--confirm-plan", *agents, demo.intent)
    assert unfetched.code == 3, unfetched.out + unfetched.err  # it stops for the plan's approval instead


def test_stale_base_ok_builds_on_it_as_it_is_recorded_once_and_told_to_the_agents(
    run_cli: RunCli, demo: DemoSetup, agents: list[str], tmp_path: Path
) -> None:
    root = str(demo.repo_root)
    ran = run_cli("-C", root, "run", "--stale-base-ok", *agents, demo.intent, env=THRESHOLD)
    assert ran.code == 0, ran.out + ran.err
    assert len(git_log(demo.repo_root)) == 3  # the base's own commit and the two tasks', none of upstream's
    checked = [payload for op, payload in _ops(demo.repo_root) if op == "base_checked"]
    assert len(checked) == 1 and checked[0]["accepted"] is True
    assert checked[0]["check"]["behind"] == 3 and checked[0]["check"]["stale"] is True
    # A resume of the same run on the same base does not ask again.
    assert run_cli("-C", root, "resume", *agents, env=THRESHOLD).code == 0


def test_the_agents_are_told_the_checkout_is_behind(demo: DemoSetup) -> None:
    adapter = ScriptedAdapter(script=demo.script)
    config = config_for(demo.repo_root, base_behind_threshold=2)
    orch = Orchestrator(
        demo.repo_root,
        config=config,
        adapter=adapter,
        listener=Recorder(),
        write_scope="**",
        stale_base_ok=True,
    )
    anyio.run(lambda: orch.run(demo.intent))
    developer = next(call for call in adapter.calls if call.role == "developer")
    assert "The checkout is 3 commit(s) behind origin/" in developer.prompt
    assert "do not pull, fetch, merge or rebase" in developer.prompt


def test_refresh_base_fast_forwards_a_clean_checkout_and_refuses_a_dirty_one(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    readme = demo.repo_root / "README.md"
    original = readme.read_text() if readme.exists() else None
    readme.write_text("edited\n")
    dirty = run_cli("-C", root, "refresh-base")
    assert_clean_error(dirty, 2)
    assert "uncommitted changes" in dirty.err and "README.md" in dirty.err
    if original is None:
        readme.unlink()
    else:
        readme.write_text(original)

    refreshed = run_cli("-C", root, "refresh-base")
    assert refreshed.code == 0, refreshed.err
    assert refreshed.out.startswith("Fast-forwarded 3 commit(s) to origin/")
    again = run_cli("-C", root, "refresh-base")
    assert again.code == 0 and "Already up to date" in again.out
    ran = run_cli("-C", root, "run", *agents, demo.intent, env=THRESHOLD)
    assert ran.code == 0, ran.out + ran.err
    status = json.loads(run_cli("-C", root, "status", "--json").out)
    assert {task["status"] for task in status["tasks"]} == {"complete"}
