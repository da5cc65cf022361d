"""``executor = "ray"`` on a real local Ray cluster (``conftest.py``), with the scripted platform and real
git and QA tools: the same commits as the local executor, a killed worker continues from the ledger, a
killed head lands a finished change once, a head stopped by SIGTERM cancels its node's flow, an unreachable
cluster stops the run before any agent call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import Recorder, config_for, demo_project, run, script_with
from support.parallel import Spec, entries_for, git_repo, plan_of, save_plan, script_of
from support.parallel import config as parallel_config
from support.ray_cluster import RayCluster, free_port

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.cli.demo import DemoSetup
from autodev.orchestrator import Orchestrator, ProgressEvent
from autodev.orchestrator.execute.ray_executor import ExecutorUnreachableError, RayExecutor
from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths, ensure_state_dir
from autodev.state.plan_manager import PlanManager
from autodev.state.verify import verify_state

pytestmark = pytest.mark.slow

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}
TESTS = Path(__file__).resolve().parents[2]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _history(root: Path) -> list[tuple[str, str, int]]:
    """Each commit of the branch, oldest first: its subject, its tree and how many parents it has."""
    log = _git(root, "log", "--reverse", "--format=%s%x00%T%x00%P")
    return [
        (subject, tree, len(parents.split()))
        for subject, tree, parents in (line.split("\x00") for line in log.splitlines())
    ]


def _ray_config(setup: DemoSetup, address: str, **overrides: Any) -> Any:
    cache = str(setup.repo_root.parent / "clone-cache")  # the nodes' clone cache, the test's own
    settings = {"executor": "ray", "ray.address": address, "ray.clone_cache_dir": cache, **FAST_GATES}
    return config_for(setup.repo_root, **{**settings, **overrides})


def test_the_demo_plan_lands_the_same_commits_as_the_local_executor(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    local = demo_project(tmp_path / "local")
    run(
        Orchestrator(
            local.repo_root,
            config=config_for(local.repo_root, **FAST_GATES),
            adapter=ScriptedAdapter(script=local.script),
        ),
        local.intent,
    )
    remote = demo_project(tmp_path / "remote")
    listener = Recorder()
    # The repository's worktree setup runs in each node's clone (it writes where it ran, outside the clone).
    setups = tmp_path / "setups"
    setups.mkdir()
    setup_command = [
        sys.executable,
        "-c",
        f"import os, pathlib, uuid; pathlib.Path({str(setups)!r}, uuid.uuid4().hex).write_text(os.getcwd())",
    ]
    orchestrator = Orchestrator(
        remote.repo_root,
        config=_ray_config(remote, ray_cluster.address, **{"worktree_setup.command": setup_command}),
        adapter=ScriptedAdapter(script=remote.script),
        listener=listener,
    )

    outcome = run(orchestrator, remote.intent)

    assert [(task.id, task.status) for task in outcome.tasks] == [("1.1", "complete"), ("1.2", "complete")]
    # The same commits, by subject and tree, on a linear history.
    assert _history(remote.repo_root) == _history(local.repo_root)
    assert all(parents <= 1 for _, _, parents in _history(remote.repo_root))
    assert isinstance(orchestrator.executor, RayExecutor)
    assert set(orchestrator.executor.nodes) == {"1.1", "1.2"}
    # The reviewer's request and the second attempt happened on the node and reached the head's display.
    steps = [(event.task_id, event.step) for event in listener.events if event.kind == "step_started"]
    assert steps.count(("1.1", "develop")) == 2
    # Which node ran each task: in the ledger (``autodev status``) and in the live view.
    with PlanManager(remote.repo_root, readonly=True) as manager:
        assert {manager.node_of(task_id) for task_id in ("1.1", "1.2")} == set(
            orchestrator.executor.nodes.values()
        )
    ran_in = [Path(marker.read_text()) for marker in setups.iterdir()]
    scratch_root = remote.repo_root.parent / "clone-cache" / "scratch"  # <owner>-<task>-<random>/repo
    clones = sorted(path.parent.name.split("-")[1] for path in ran_in if path.parent.parent == scratch_root)
    assert clones == ["1.1", "1.2"]  # once in each node's clone (the gates' baseline worktrees get it too)
    notes = [event.message for event in listener.events if event.kind == "note" and event.task_id == "1.1"]
    assert f"on node {orchestrator.executor.nodes['1.1']}" in notes
    assert verify_state(remote.repo_root).ok
    assert _git(remote.repo_root, "status", "--porcelain") == ""
    # A landed task's working state is dropped with it.
    assert _git(remote.repo_root, "for-each-ref", "refs/autodev/working/") == ""


def test_parallel_tasks_on_nodes_land_in_turn_and_a_conflict_goes_back_to_a_node(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """Tasks start on bases other tasks have since moved past (their nodes' clones lack those commits),
    and two of them write the same file: the second to land conflicts, goes back to its developer on the
    new base, and lands after its next attempt on a node."""
    root = git_repo(tmp_path / "repo")
    specs = [Spec(f"1.{n}") for n in range(1, 7)]
    save_plan(root, plan_of(specs))
    shared = [
        {"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"},
        {"path": "src/shared.py", "content": "OWNER = '{task_id}'\n"},
    ]
    entries = [
        *(
            {**entry, "task_id": task_id}
            for task_id in ("1.5", "1.6")
            for entry in entries_for(developer_edits=shared)
            if entry["role"] == "developer"
        ),
        *entries_for(),
    ]
    adapter = ScriptedAdapter(script=script_of(entries, latency_s=0.3))
    orchestrator = Orchestrator(
        root,
        config=parallel_config(
            root,
            3,
            executor="ray",
            **{"ray.address": ray_cluster.address, "ray.clone_cache_dir": str(tmp_path / "clone-cache")},
        ),
        adapter=adapter,
        write_scope="**",
    )

    tasks = anyio.run(orchestrator.execute)

    reasons = [task.blocked_reason for task in tasks if task.blocked_reason]
    assert {task.id: task.status for task in tasks} == {spec.task_id: "complete" for spec in specs}, reasons
    history = _history(root)
    assert sorted(subject for subject, _, _ in history[1:]) == sorted(
        f"autodev: {s.task_id} Task {s.task_id}" for s in specs
    )
    assert all(parents == 1 for _, _, parents in history[1:])
    # One of the two that share a file met the other's change and went back to its developer once.
    assert sorted(task.retry_count for task in tasks if task.id in ("1.5", "1.6")) == [0, 1]
    assert (root / "src" / "shared.py").read_text() in ("OWNER = '1.5'\n", "OWNER = '1.6'\n")
    assert verify_state(root).ok


def test_a_worker_killed_in_a_developer_call_continues_from_the_ledger_and_lands_once(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    setup = demo_project(tmp_path)
    # The second developer attempt of 1.1 (after the reviewer's request) is slow enough to be killed in.
    second = next(
        entry.model_dump(exclude_defaults=True)
        for entry in setup.script.entries
        if entry.role == "developer" and entry.task_id == "1.1" and entry.attempt == 2
    )
    # A scripted reviewer's answers in sequence count per process (a new worker would start the sequence
    # again): keyed by attempt, they are the same wherever the call runs.
    reviews = next(
        entry.model_dump(exclude_defaults=True)["responses"]
        for entry in setup.script.entries
        if entry.role == "reviewer" and entry.task_id == "1.1"
    )
    script = script_with(
        setup,
        {**second, "latency_s": 6.0},
        *(
            {"role": "reviewer", "task_id": "1.1", "attempt": n, **answer}
            for n, answer in enumerate(reviews, 1)
        ),
        drop_roles=(),
    )
    script = script.model_validate(
        {
            "entries": [
                entry.model_dump(exclude_defaults=True)
                for entry in script.entries
                if not (entry.role == "reviewer" and entry.task_id == "1.1" and entry.attempt is None)
            ]
        }
    )
    killed: list[int] = []

    def kill_the_worker() -> None:
        for pid in ray_cluster.worker_pids():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    def listener(event: ProgressEvent) -> None:
        started = (event.kind, event.task_id, event.step, event.attempt)
        if started == ("step_started", "1.1", "develop", 2) and not killed:
            threading.Timer(1.5, kill_the_worker).start()

    orchestrator = Orchestrator(
        setup.repo_root,
        config=_ray_config(setup, ray_cluster.address),
        adapter=ScriptedAdapter(script=script),
        listener=listener,
    )
    outcome = run(orchestrator, setup.intent)

    assert killed, "no worker was running the flow"
    assert [(task.id, task.status) for task in outcome.tasks] == [("1.1", "complete"), ("1.2", "complete")]
    subjects = [subject for subject, _, _ in _history(setup.repo_root)]
    assert subjects.count("autodev: 1.1 Implement slugify") == 1
    with PlanManager(setup.repo_root, readonly=True) as manager:
        task = manager.get_task("1.1")
        # The new worker took over at attempt 2: nothing before it was done again.
        assert task.retry_count == 1
        recorded = [(ref.kind, ref.attempt) for ref in manager.evidence_for("1.1")]
    assert recorded.count(("review", 1)) == 1
    assert recorded.count(("developer", 1)) == 1
    assert recorded.count(("developer", 2)) == 1
    assert verify_state(setup.repo_root).ok


def test_a_task_blocked_on_a_node_keeps_its_change_here_and_a_retry_continues_from_it(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    setup = demo_project(tmp_path)
    root = setup.repo_root
    rejecting = [entry.model_dump(exclude_defaults=True) for entry in setup.script.entries]
    for entry in rejecting:
        if entry["role"] == "reviewer" and entry.get("task_id") == "1.1":
            entry.pop("responses", None)
            entry["text"] = "VERDICT: NEEDS_CHANGES\nISSUES:\n- not yet\n"
    config = _ray_config(setup, ray_cluster.address, qa_retry_limit=2)
    script = Script.model_validate({"entries": rejecting})
    run(Orchestrator(root, config=config, adapter=ScriptedAdapter(script=script)), setup.intent)

    with PlanManager(root, readonly=True) as manager:
        assert manager.get_task("1.1").status == "blocked"
    # The node's last change is kept here, as a local task's is, and only there.
    parked = _git(root, "show", "refs/autodev/blocked/1.1:textutils/slug.py")
    assert "def slugify" in parked
    assert _git(root, "status", "--porcelain") == ""

    # Retried, with a developer that writes nothing this time: what lands is the kept change, which no
    # node has any more.
    approving = [
        {**entry, "text": "VERDICT: APPROVED\nISSUES:\n"}
        if entry["role"] == "reviewer"
        else {**entry, "edits": []}
        if entry["role"] == "developer" and entry.get("task_id") == "1.1"
        else entry
        for entry in rejecting
    ]
    again = Orchestrator(
        root, config=config, adapter=ScriptedAdapter(script=Script.model_validate({"entries": approving}))
    )
    assert again.retry("1.1").status == "in_progress"
    tasks = anyio.run(again.resume)

    assert [task.status for task in tasks] == ["complete", "complete"], [t.blocked_reason for t in tasks]
    landed = _git(root, "log", "--format=%H", "--grep", "autodev: 1.1 ").split()
    assert len(landed) == 1
    assert _git(root, "show", f"{landed[0]}:textutils/slug.py") == parked
    assert _git(root, "for-each-ref", "refs/autodev/blocked/", "refs/autodev/working/") == ""
    assert verify_state(root).ok


def test_a_task_retried_after_others_landed_continues_from_its_kept_change_on_the_new_base(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    rejected = {"role": "reviewer", "task_id": "1.1", "text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- not yet\n"}
    settings = {"ray.address": ray_cluster.address, "ray.clone_cache_dir": str(tmp_path / "clone-cache")}
    config = parallel_config(root, 1, executor="ray", qa_retry_limit=2, **settings)
    first = ScriptedAdapter(script=script_of([rejected, *entries_for()]))
    anyio.run(Orchestrator(root, config=config, adapter=first, write_scope="**").execute)
    with PlanManager(root, readonly=True) as manager:
        assert [manager.get_task(task_id).status for task_id in ("1.1", "1.2")] == ["blocked", "complete"]
    base_then = _git(root, "rev-parse", "refs/autodev/blocked/1.1^").strip()
    assert base_then != _git(root, "rev-parse", "HEAD").strip()  # 1.2 landed since

    # Retried on the new base, with a developer that writes nothing: the kept change, put back into the
    # task's worktree here, is what its node starts from and what lands.
    silent = {"role": "developer", "task_id": "1.1", "text": "continued"}
    again = Orchestrator(
        root,
        config=config,
        adapter=ScriptedAdapter(script=script_of([silent, *entries_for()])),
        write_scope="**",
    )
    assert again.retry("1.1").status == "in_progress"
    tasks = anyio.run(again.resume)

    assert [(task.id, task.status) for task in tasks] == [("1.1", "complete")], tasks[0].blocked_reason
    assert _git(root, "show", "HEAD:src/t_1.1.py") == "VALUE = '1.1'\n"
    assert _git(root, "log", "-1", "--format=%s") == "autodev: 1.1 Task 1.1\n"
    assert verify_state(root).ok


_COPY_KNOWLEDGE = """
import pathlib, sys, uuid
known = pathlib.Path(".autodev", "knowledge.json")
if pathlib.Path.cwd().parent.parent.name == "scratch":  # a node's clone, not a baseline worktree
    pathlib.Path(sys.argv[1], uuid.uuid4().hex).write_text(known.read_text() if known.exists() else "")
"""


def test_lessons_travel_both_ways_between_the_head_and_its_nodes(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    setup = demo_project(tmp_path)
    root = setup.repo_root
    ensure_state_dir(AutodevPaths(root))
    KnowledgeStore(AutodevPaths(root)).add_from_text(
        "LESSON: keep slugs lowercase", role="developer", task_id="0.1"
    )
    teaching = next(
        entry.model_dump(exclude_defaults=True)
        for entry in setup.script.entries
        if entry.role == "developer" and entry.task_id == "1.1" and entry.attempt == 2
    )
    teaching["text"] += "\nLESSON: slugify strips punctuation before joining words\n"
    script = script_with(setup, teaching, drop_roles=())
    seen = tmp_path / "seen"
    seen.mkdir()
    command = [sys.executable, "-c", _COPY_KNOWLEDGE, str(seen)]
    config = _ray_config(setup, ray_cluster.address, **{"worktree_setup.command": command})

    outcome = run(Orchestrator(root, config=config, adapter=ScriptedAdapter(script=script)), setup.intent)

    assert [(task.id, task.status) for task in outcome.tasks] == [("1.1", "complete"), ("1.2", "complete")]
    # What an agent taught on a node is the head's...
    lessons = {lesson.text: lesson.task_id for lesson in KnowledgeStore(AutodevPaths(root)).lessons()}
    assert lessons["keep slugs lowercase"] == "0.1"
    assert lessons["slugify strips punctuation before joining words"] == "1.1"
    # ...and every node starts from the head's lessons: 1.2's node knew both.
    copies = [path.read_text() for path in seen.iterdir()]
    assert len(copies) == 2
    assert all("keep slugs lowercase" in copy for copy in copies)
    assert any("slugify strips punctuation" in copy for copy in copies)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"  # a zombie is dead, only not yet reaped by its new parent


_SLOW_FIRST_SETUP = """
import os, pathlib, subprocess, sys
marker = pathlib.Path(sys.argv[1])
# Slow the first time it runs in a node's clone (the head's worktrees run it too, for the landing).
if "scratch" in pathlib.Path.cwd().parts and not marker.exists():
    marker.write_text("")
    # A tool the setup starts in a session of its own, as agent CLIs and QA tools are started.
    tool = subprocess.Popen(["sleep", "300"], start_new_session=True)
    pathlib.Path(sys.argv[2]).write_text(str(tool.pid))
    tool.wait()
"""


def test_what_a_killed_worker_left_running_is_stopped_and_its_clone_removed(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    setup = demo_project(tmp_path / "project")
    marker, tool_pid = tmp_path / "first-setup-ran", tmp_path / "tool.pid"
    command = [sys.executable, "-c", _SLOW_FIRST_SETUP, str(marker), str(tool_pid)]
    killed: list[int] = []

    def kill_the_worker_once_the_tool_runs() -> None:
        deadline = time.monotonic() + 60
        while not tool_pid.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in ray_cluster.worker_pids():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_the_worker_once_the_tool_runs)
    killer.start()
    config = _ray_config(setup, ray_cluster.address, **{"worktree_setup.command": command})
    outcome = run(
        Orchestrator(setup.repo_root, config=config, adapter=ScriptedAdapter(script=setup.script)),
        setup.intent,
    )
    killer.join()

    assert killed, "no worker was running the flow"
    assert [(task.id, task.status) for task in outcome.tasks] == [("1.1", "complete"), ("1.2", "complete")]
    # The tool outlived the worker that started it; the node's next task stopped it.
    pid = int(tool_pid.read_text())
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid), "the killed worker's tool still runs"
    # No scratch clone is left on the node: the killed worker's was removed, the others' removed by them.
    assert list((Path(config.ray.clone_cache_dir) / "scratch").iterdir()) == []


_HEAD_DIES_BEFORE_LANDING = """
import os, signal, sys
from pathlib import Path

import anyio

sys.path.insert(0, sys.argv[3])
from support.orchestration import config_for

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.ray_executor import RayExecutor

root, address = Path(sys.argv[1]), sys.argv[2]


class DiesBeforeLanding(RayExecutor):
    async def _merge(self, session, task, context):
        os.kill(os.getpid(), signal.SIGKILL)


config = config_for(root, executor="ray", **{
    "ray.address": address, "qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False,
    "ray.clone_cache_dir": str(root.parent / "clone-cache"),
})
adapter = ScriptedAdapter.from_file(root.parent / "script.json")
orchestrator = Orchestrator(root, config=config, adapter=adapter, executor=DiesBeforeLanding(config.ray))
anyio.run(lambda: orchestrator.run(sys.argv[4]))
"""


@pytest.mark.parametrize("resumed_with", ["ray", "local"])
def test_the_head_killed_before_landing_a_finished_flow_lands_it_once_on_resume(
    ray_cluster: RayCluster, tmp_path: Path, resumed_with: str
) -> None:
    """Resumed on the cluster, or here with the local executor: either way the change the node finished
    is landed once, from the files the head kept for it."""
    setup = demo_project(tmp_path)
    (setup.repo_root.parent / "script.json").write_text(setup.script.model_dump_json())
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            _HEAD_DIES_BEFORE_LANDING,
            str(setup.repo_root),
            ray_cluster.address,
            str(TESTS),
            setup.intent,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    with PlanManager(setup.repo_root, readonly=True) as manager:
        assert manager.get_task("1.1").status == "tournamented"  # its node finished; nothing landed
    assert [subject for subject, _, _ in _history(setup.repo_root)] == ["textutils: initial version"]

    config = _ray_config(setup, ray_cluster.address, executor=resumed_with)
    adapter = ScriptedAdapter(script=setup.script)
    resumed = Orchestrator(setup.repo_root, config=config, adapter=adapter)
    tasks = anyio.run(resumed.resume)

    assert [(task.id, task.status) for task in tasks] == [("1.1", "complete"), ("1.2", "complete")]
    assert [subject for subject, _, _ in _history(setup.repo_root)] == [
        "textutils: initial version",
        "autodev: 1.1 Implement slugify",
        "autodev: 1.2 Export slugify from the package",
    ]
    # 1.1 was landed as its node left it, with no agent asked again (a scripted run here keeps its calls).
    assert not [call for call in adapter.calls if call.task_id == "1.1"]
    # What landed is what the node's developer wrote (its second attempt, after the review).
    landed = _git(setup.repo_root, "show", "HEAD~1:textutils/slug.py")
    assert landed.startswith('"""Turning arbitrary text into URL-friendly slugs."""')
    assert verify_state(setup.repo_root).ok


def test_an_unreachable_cluster_stops_the_run_before_any_agent_call(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    adapter = ScriptedAdapter(script=setup.script)
    orchestrator = Orchestrator(setup.repo_root, config=_ray_config(setup, address), adapter=adapter)

    with pytest.raises(ExecutorUnreachableError, match=rf"cannot reach the Ray cluster at '{address}'"):
        run(orchestrator, setup.intent)

    assert adapter.calls == []
    assert not (setup.repo_root / ".autodev" / "ledger.jsonl").exists()


def test_the_cli_says_which_cluster_it_could_not_reach_and_exits_2(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    (setup.repo_root.parent / "script.json").write_text(setup.script.model_dump_json())
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    (setup.repo_root / ".autodev").mkdir(exist_ok=True)
    (setup.repo_root / ".autodev" / "config.toml").write_text(f'[ray]\naddress = "{address}"\n')
    autodev = Path(sys.executable).with_name("autodev")
    result = subprocess.run(
        [
            str(autodev),
            "-C",
            str(setup.repo_root),
            "run",
            setup.intent,
            "--executor",
            "ray",
            "--platform",
            "scripted",
            "--script",
            str(setup.repo_root.parent / "script.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Ray cluster at '{address}'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (setup.repo_root / ".autodev" / "ledger.jsonl").exists()


def test_the_inline_platform_is_refused_before_anything_starts(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    config = _ray_config(setup, "127.0.0.1:1", platform="inline")
    orchestrator = Orchestrator(setup.repo_root, config=config)
    with pytest.raises(Exception, match="cannot run the inline platform"):
        anyio.run(lambda: orchestrator.run(setup.intent))
    assert not (setup.repo_root / ".autodev" / "ledger.jsonl").exists()


def test_one_task_at_a_time_still_lands_from_a_worktree_never_in_the_main_checkout(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    setup = demo_project(tmp_path)
    config = _ray_config(setup, ray_cluster.address, **{"tournaments.execute_max_parallel_tasks": 1})
    listener = Recorder()
    adapter = ScriptedAdapter(script=setup.script)
    orchestrator = Orchestrator(setup.repo_root, config=config, adapter=adapter, listener=listener)

    outcome = run(orchestrator, setup.intent)

    assert [(task.id, task.status) for task in outcome.tasks] == [("1.1", "complete"), ("1.2", "complete")]
    # Each task was given a worktree of its own: a node's files are restored there, not over your checkout.
    started = [event.details for event in listener.events if event.kind == "task_started"]
    assert [details[0].startswith(".autodev/task-worktrees/") for details in started] == [True, True]


def test_changes_that_would_not_land_as_commits_are_refused_before_anything_starts(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    config = _ray_config(setup, "127.0.0.1:1", auto_commit=False)
    orchestrator = Orchestrator(setup.repo_root, config=config, adapter=adapter)
    with pytest.raises(Exception, match="executor = ray lands each task's change as a commit"):
        run(orchestrator, setup.intent)
    assert adapter.calls == []


def test_a_head_stopped_by_sigterm_cancels_the_flow_on_its_node_and_resume_lands_each_task_once(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """SIGTERM to the CLI that drives the cluster (a service manager stopping it): the flow running on a
    node is cancelled, the head exits 143, and `autodev resume` on the cluster finishes what was left."""
    setup = demo_project(tmp_path / "project")
    root = setup.repo_root
    cache = tmp_path / "clone-cache"
    (root / ".autodev").mkdir(exist_ok=True)
    (root / ".autodev" / "config.toml").write_text(
        f'executor = "ray"\n[ray]\naddress = "{ray_cluster.address}"\nclone_cache_dir = "{cache}"\n'
        "[qa_gates.secretscan]\nenabled = false\n[qa_gates.build]\nenabled = false\n"
    )
    developer = next(
        entry.model_dump(exclude_defaults=True)
        for entry in setup.script.entries
        if entry.role == "developer" and entry.task_id == "1.2"
    )
    slow, quick = tmp_path / "slow.json", tmp_path / "quick.json"
    slow.write_text(
        script_with(setup, {**developer, "latency_s": 60.0}).model_dump_json(exclude_defaults=True)
    )
    quick.write_text(setup.script.model_dump_json(exclude_defaults=True))
    autodev = Path(sys.executable).with_name("autodev")
    scripted = ["--platform", "scripted", "--script"]

    def status() -> dict[str, str]:
        shown = subprocess.run(
            [str(autodev), "-C", str(root), "status", "--json"], capture_output=True, text=True, check=True
        )
        return {task["id"]: task["status"] for task in json.loads(shown.stdout)["tasks"]}

    with (tmp_path / "head.err").open("wb") as err:
        head = subprocess.Popen(
            [str(autodev), "-C", str(root), "run", *scripted, str(slow), setup.intent],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while not (status().get("1.1") == "complete" and ray_cluster.worker_pids()):
            assert head.poll() is None and time.monotonic() < deadline, (tmp_path / "head.err").read_text()
            time.sleep(0.3)
        os.kill(head.pid, signal.SIGTERM)
        code = head.wait(timeout=60)
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()

    assert code == 128 + signal.SIGTERM, (tmp_path / "head.err").read_text()
    assert "stopped by SIGTERM" in (tmp_path / "head.err").read_text()
    deadline = time.monotonic() + 30
    while ray_cluster.worker_pids():
        assert time.monotonic() < deadline, "the flow still runs on its node"
        time.sleep(0.2)
    assert verify_state(root).ok

    resumed = subprocess.run(
        [str(autodev), "-C", str(root), "resume", *scripted, str(quick)], capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert status() == {"1.1": "complete", "1.2": "complete"}
    subjects = [subject for subject, _, _ in _history(root)]
    assert subjects.count("autodev: 1.1 Implement slugify") == 1
    assert len([subject for subject in subjects if subject.startswith("autodev: 1.2 ")]) == 1
    with PlanManager(root, readonly=True) as manager:
        # The stop cost 1.2 no attempt.
        assert manager.get_task("1.2").retry_count == 0
