"""Area maps kept fresh: after a task lands, each stale area map with no open refresh task gets one.

A refresh task is ``t-map-<slug>`` (``-2``, ``-3``, ... once the id is taken: ids are never reused), P2,
``<1h``, on the standard level (sonnet), in the phase of the task that just landed, added through the ledger.
Its developer checks the area, fixes the anchors and the test recipe from the files that changed, and marks
it checked. A refresh task's own landing asks for no new refresh of its area (the next other task's does,
if the map is still stale), so that a refresh that did not help cannot chain into refreshes forever.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import anyio

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.events import ProgressEvent
from autodev.state.schemas import AcceptanceCriterion, Task
from autodev.state.vocabulary import DONE_STATUSES
from autodev.workspace.areas import AreaReport, check_area, notes_file, refresh_task_id

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["refresh_stale_areas"]

_log = get_logger("autodev.execute_phase")


def _family(slug: str) -> re.Pattern[str]:
    return re.compile(rf"t-map-{re.escape(slug)}(?:-\d+)?", re.IGNORECASE)


def _refresh_task(report: AreaReport, task_id: str, phase_id: str, notes: str) -> Task:
    area = report.area
    paths = " ".join(area.paths) or "."
    since = f"{area.checked}..HEAD" if area.checked and not report.unknown_checked else "HEAD~20..HEAD"
    steps = (
        f"Run `autodev areas {area.slug}`. Fix the area map of {area.name} in {notes}: anchors no longer in "
        f"the code, and the test recipe, from the files that changed (`git log --stat {since} -- {paths}`). "
        f"Then run `autodev areas --mark {area.slug}`."
    )
    return Task(
        id=task_id,
        phase_id=phase_id,
        title=f"Refresh {area.name} area map",
        description=steps,
        files=[notes],
        acceptance=[AcceptanceCriterion(description=f"`autodev areas {area.slug}` shows the area not stale")],
        model="standard",
        effort="<1h",
        priority="P2",
    )


async def refresh_stale_areas(session: RunContext, landed: Task) -> list[str]:
    """Add a refresh task for each stale area map (see the module docstring); the ids added."""
    path = notes_file(session.repo_root, session.config.areas)
    areas, _ = session.area_maps()
    if path is None or not areas:
        return []
    stale_commits = session.config.area_stale_commits
    try:
        reports = await anyio.to_thread.run_sync(
            lambda: [check_area(session.repo_root, area, stale_commits=stale_commits) for area in areas]
        )
    except AutodevError as exc:  # git failing here must not stop the run; the next landing checks again
        _log.warning("execute_phase.areas_unchecked", path=str(path), error=exc.message)
        return []
    pm = session.plan_manager
    tasks = pm.tasks()
    notes = path.relative_to(session.repo_root).as_posix()
    added: list[str] = []
    for report in reports:
        if not report.stale:
            continue
        family = _family(report.area.slug)
        if family.fullmatch(landed.id):
            continue
        if any(family.fullmatch(task.id) and task.status not in DONE_STATUSES for task in tasks):
            continue
        task_id = refresh_task_id(report.area, [task.id for task in tasks] + added)
        pm.add_tasks(
            [_refresh_task(report, task_id, landed.phase_id, notes)],
            phase_id=landed.phase_id,
            by="autodev",
            reason=f"area map {report.area.name} is stale: {report.line()}",
        )
        added.append(task_id)
        _log.info("execute_phase.area_refresh_added", task_id=task_id, area=report.area.name)
        session.emit(ProgressEvent("note", f"added {task_id} (area map stale)", landed.id))
    return added
