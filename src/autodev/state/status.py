"""The status object of ``autodev status --json``: a pure function of the replayed state
(``status_from_state``); ``autodev.state.status_reader`` finds that state on disk.

Beyond the originally designed shape, the object says what runs in parallel and why the rest waits:

- every task carries ``worktree`` (its isolated git worktree relative to the repo, or None);
- every *pending* task carries ``waiting_on``: the sorted ids it waits for. Its unfinished dependencies
  (not complete or skipped) when it has any, otherwise the in-flight tasks holding one of its files; an
  empty list means it may start now. Tasks in any other status have no ``waiting_on`` key, so an empty
  list always means "ready";
- ``totals["in_flight"]`` counts the tasks in flight, and the top-level ``in_flight`` lists them in plan
  order with their ``status``, ``worktree``, ``step``, ``retry_count``, ``progress`` (what the agent did
  last), ``family`` (role and area of the newest policy decision about its calls), ``lifecycle``
  (``running``, ``queued`` for a worker, ``waiting`` for an approval or an inline answer) and ``waiting``
  (what for, else None);
- ``baseline`` is the base commit's own gate results the last execute phase started from (its
  pre-existing failures, which no task is blamed for), or None;
- ``results`` lists the plan's accepted results in the order they were accepted: each a record with its
  ``id`` (``E<seq>``, what ``autodev execute --evidence`` names), task, commit, files, line counts, verdict
  and the developer's first line;
- every task carries ``adoption``: None, or its verified change that could not land by itself (``state``
  ``pending_adoption``, ``adopted`` or ``discarded``, the ``commit`` that keeps it, ``reason``, ``since``);
  a task in flight whose change waits shows ``lifecycle`` ``waiting`` for ``adoption: <reason>``, and every
  task in flight names its ``checkout`` (its worktree, else ``.``: the main checkout);
- every task carries ``proof``: its newest completion contract in brief (``verdict``, ``revision``, the
  ``base_commit`` it was made on, the platforms it was ``implemented_on`` and ``verified_on``, and its
  ``checks`` by status), None before its first;
- every task carries ``cost``: ``usd`` (its calls' known cost, None when none is known), ``estimated_usd``
  (the part AutoDev estimated from tokens) and ``unknown_calls`` (calls nobody priced); the top-level
  ``cost`` sums the plan's calls the same way, plan phase included;
- ``waiting_for`` names the inline delegation a suspended run waits for: ``task_id``, ``role``, ``step``,
  the ``delegation`` file with the instructions and the ``response`` file its answer goes to; None when
  no run is suspended on one. An ``inline-state.json`` that is not valid JSON counts as none; one that
  is not a regular file (a link, a FIFO, a device) or is larger than ``MAX_STATE_FILE_BYTES`` is an
  ``InlineStateError``, as ``autodev resume`` would report it.
"""

from __future__ import annotations

import json
from typing import Any

from autodev.errors import InlineStateError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.state.paths import AutodevPaths
from autodev.state.vocabulary import DONE_STATUSES, IN_FLIGHT_STATUSES, TASK_STATUSES

__all__ = [
    "status_from_state",
    "waiting_for",
]

_IN_FLIGHT = frozenset(IN_FLIGHT_STATUSES)
# The role or step a task in flight is at, by its recorded status.
STEP_OF_STATUS = {
    "in_progress": "developer",
    "coded": "gates",
    "auto_gated": "reviewer",
    "reviewed": "test_engineer",
    "tested": "tournament",
    "tournamented": "merge",
}


def status_from_state(state: dict[str, Any]) -> dict[str, Any]:
    """The status object of a JSON-mode dump of ``PlanState``; its task dicts are annotated in place."""
    totals: dict[str, int] = dict.fromkeys(TASK_STATUSES, 0)
    plan = state.get("plan")
    if plan is None:
        totals["total"] = 0
        totals["in_flight"] = 0
        return {
            "baseline": state.get("baseline"),
            "plan": None,
            "session_id": state.get("session_id"),
            "tasks": [],
            "totals": totals,
            "in_flight": [],
            "policy": _policy({}, []),
            "results": [],
        }
    tasks = [task for phase in plan["phases"] for task in phase["tasks"]]
    costs = state.get("cost_usd_by_task") or {}
    usage = state.get("usage_by_task") or {}
    done: set[str] = set()
    pending: list[dict[str, Any]] = []
    in_flight: list[dict[str, Any]] = []
    holders: dict[str, list[str]] = {}
    decisions = state.get("last_decisions") or {}
    evidence = state.get("evidence") or {}
    adoptions = state.get("adoptions") or {}
    nodes = state.get("nodes") or {}
    for task in tasks:
        status = task["status"]
        totals[status] += 1
        task["cost"] = _task_cost(costs.get(task["id"]), usage.get(task["id"]))
        # The proof card in brief: the newest completion contract's verdict, revision, binding and checks.
        task["proof"] = _latest_summary(evidence.get(task["id"]) or [], "completion")
        adoption = adoptions.get(task["id"])
        task["adoption"] = adoption
        # A plan.json written before worktrees existed lacks the key; replay would give None.
        worktree = task.setdefault("worktree", None)
        if status == "pending":
            pending.append(task)
        elif status in DONE_STATUSES:
            done.add(task["id"])
        elif status in _IN_FLIGHT:
            lifecycle = _lifecycle(decisions.get(task["id"]))
            if adoption is not None and adoption["state"] == "pending_adoption":
                lifecycle = {
                    **lifecycle,
                    "lifecycle": "waiting",
                    "waiting": f"adoption: {adoption['reason']}",
                }
            in_flight.append(
                {
                    "id": task["id"],
                    "status": status,
                    "worktree": worktree,
                    # Where its writers work: its own worktree, else the main checkout.
                    "checkout": worktree or ".",
                    # The cluster node its flow runs on (executor = ray); None: here.
                    "node": nodes.get(task["id"]),
                    "step": STEP_OF_STATUS.get(status, status),
                    "retry_count": task.get("retry_count", 0),
                    # What the task's agent did last: filled in by ``read_status`` from the transcripts.
                    "progress": None,
                    **lifecycle,
                    # What git showed after its newest developer run (None before one).
                    "repository": _latest_summary(evidence.get(task["id"]) or [], "developer"),
                }
            )
            for path in task["files"]:
                holders.setdefault(path, []).append(task["id"])
    # Linear in tasks, dependency edges and files, with no set or sort for the common case of a task that
    # waits on nothing or on one task: status must stay fast on plans of thousands of tasks.
    for task in pending:
        # An id missing from the plan never completes, so it keeps the task waiting as the scheduler would.
        waiting = [dep for dep in task["depends_on"] if dep not in done] if task["depends_on"] else []
        if not waiting and holders:
            for path in task["files"]:
                if path in holders:
                    waiting += holders[path]
        task["waiting_on"] = sorted(set(waiting)) if len(waiting) > 1 else waiting
    totals["total"] = len(tasks)
    totals["in_flight"] = len(in_flight)
    return {
        "baseline": state.get("baseline"),
        "plan": {
            "plan_id": plan["plan_id"],
            "spec_hash": plan["spec_hash"],
            "phases": len(plan["phases"]),
            "title": plan["title"],
            "created_at": plan["created_at"],
            "updated_at": plan["updated_at"],
        },
        "session_id": state.get("session_id"),
        "tasks": tasks,
        "totals": totals,
        "in_flight": in_flight,
        "cost": {
            "usd": round(float(state.get("cost_usd_total", 0.0)), 6),
            "estimated_usd": round(sum(float(u.get("estimated_cost_usd", 0.0)) for u in usage.values()), 6),
            "unknown_calls": int(state.get("unknown_cost_calls", 0)),
        },
        "policy": _policy(state, tasks),
        "results": state.get("results") or [],
    }


def _latest_summary(refs: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The summary of the newest evidence of ``kind`` among a task's ``refs`` (None: none, or none kept)."""
    for ref in reversed(refs):
        if ref.get("kind") == kind:
            summary: dict[str, Any] | None = ref.get("summary")
            return summary
    return None


def _lifecycle(decision: dict[str, Any] | None) -> dict[str, Any]:
    """A task in flight's family, lifecycle (``running``, ``queued`` for a worker, ``waiting`` for an
    approval) and what it waits for, from the newest policy decision about its calls."""
    if decision is None:
        return {"family": None, "lifecycle": "running", "waiting": None}
    route, reason = decision["route"], decision["reason"]
    if route == "queue":
        return {"family": decision["family"], "lifecycle": "queued", "waiting": f"a worker: {reason}"}
    if route == "require_approval":
        return {"family": decision["family"], "lifecycle": "waiting", "waiting": f"an approval: {reason}"}
    return {"family": decision["family"], "lifecycle": "running", "waiting": None}


def _policy(state: dict[str, Any], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The delegation policy's side of the run: the scope the user authorized (declarations and accepted
    approvals), the approval requests, the write workers holding a grant, and the pending tasks that wait
    on a person: those a pending request names, and every pending task depending on one of them."""
    approvals = list((state.get("approvals") or {}).values())
    waiting = {
        task_id: approval["id"]
        for approval in approvals
        if approval["status"] == "pending"
        for task_id in approval["task_ids"]
    }
    if waiting:
        # Plan order lists a task after what it depends on within its phase, but not across phases: walk
        # the dependents from each waiting task.
        dependents: dict[str, list[str]] = {}
        status_of = {task["id"]: task["status"] for task in tasks}
        for task in tasks:
            for dep in task["depends_on"]:
                dependents.setdefault(dep, []).append(task["id"])
        todo = [task_id for task_id in waiting if status_of.get(task_id) == "pending"]
        while todo:
            current = todo.pop()
            for child in dependents.get(current, []):
                if child not in waiting and status_of.get(child) == "pending":
                    waiting[child] = waiting[current]
                    todo.append(child)
    # The holds the run recorded say since when; a task the derivation finds that no run held yet has none.
    held = state.get("blocked_on_human") or {}
    blocked_on_human = [
        {
            "task_id": task["id"],
            "approval": waiting[task["id"]],
            "since": (held.get(task["id"]) or {}).get("since"),
        }
        for task in tasks
        if task["id"] in waiting and task["status"] == "pending"
    ]
    scope: list[str] = []
    for declaration in state.get("write_scopes") or []:
        scope += declaration["patterns"]
    for approval in approvals:
        if approval["status"] == "accepted":
            scope += approval["scope"]
    return {
        "write_scope": list(dict.fromkeys(scope)),
        "approvals": [
            {
                **{key: approval[key] for key in ("id", "status", "scope", "task_ids", "reason")},
                "waiting_since": approval.get("waiting_since"),
            }
            for approval in approvals
        ],
        "blocked_on_human": blocked_on_human,
        "workers": [
            {key: grant[key] for key in ("task_id", "tier", "write_mode", "units")}
            for grant in (state.get("workers") or {}).values()
        ],
    }


def _task_cost(cost_usd: float | None, usage: dict[str, Any] | None) -> dict[str, Any]:
    """A task's cost as far as it is known: ``usd`` None when no call of it had a known cost."""
    usage = usage or {}
    return {
        "usd": None if cost_usd is None else round(float(cost_usd), 6),
        "estimated_usd": round(float(usage.get("estimated_cost_usd", 0.0)), 6),
        "unknown_calls": int(usage.get("unknown_cost_calls", 0)),
    }


def waiting_for(paths: AutodevPaths) -> dict[str, Any] | None:
    """The inline delegation a suspended run waits for, from ``inline-state.json`` (None when none)."""
    path = paths.inline_state
    try:
        data = read_bounded(
            path,
            limit=MAX_STATE_FILE_BYTES,
            what="the inline suspend state",
            follow_symlinks=False,
            error=led_by(path, InlineStateError),
        )
        state = json.loads(data)
        return {
            "task_id": str(state["pending_task_id"]),
            "role": str(state["pending_role"]),
            "step": str(state["orchestrator_step"]),
            "delegation": str(state["delegation_path"]),
            "response": str(state["response_path"]),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None
