"""The run report as one self-contained HTML page: no network, no CDN, styles inline, readable from
``file://``. A content security policy forbids the page any request at all, so nothing in it (an agent's
words included, which are escaped everywhere) can reach out.

Sections: the intent and the plan (phases, tasks with their level, effort and dependencies, a small graph
of them for plans that fit one), totals, the timeline (one row per task, one bar per step and attempt,
coloured by how it ended, the critical path marked), then each task (its diff coloured by language, each
gate's argv and output, the reviews, the tests claimed against AutoDev's own run, the completion proof, the
tournament's passes with every judge's ranking, the critic's diagnosis, the commit, cost and tokens by role),
and cost by role and model against the budget. Phases fold; a plan of more than ``_OPEN_LIMIT`` tasks starts
folded, and a phase of more than ``_PAGE`` tasks shows them in folded pages, so a page of a thousand tasks
stays usable.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from html import escape

from autodev.report.data import ReportData, Segment, TaskView, TournamentPass, cost_rows
from autodev.report.highlight import TOKEN_STYLE, highlight_diff

__all__ = ["render"]

_OPEN_LIMIT = 200
# A phase with more tasks than this shows them in folded pages of this many.
_PAGE = 100
_GRAPH_LIMIT = 60
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = (
    """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
main{padding:16px 24px;max-width:1400px}section{background:#fff;border:1px solid #dde1e7;border-radius:6px;
margin:0 0 16px;padding:12px 16px}h2{font-size:16px;margin:4px 0 10px}pre{white-space:pre-wrap;
word-break:break-word;background:#f3f4f6;padding:8px;border-radius:4px;margin:4px 0;font-size:12px}
.totals{display:flex;flex-wrap:wrap;gap:10px}.figure{border:1px solid #dde1e7;border-radius:4px;
padding:6px 10px;min-width:110px}.figure b{display:block;font-size:18px}
table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:3px 6px;border-bottom:1px solid #eef0f3;vertical-align:top;font-size:13px}
.timeline .row{display:flex;align-items:center;height:22px}.timeline .label{width:170px;flex:none;
overflow:hidden;white-space:nowrap;text-overflow:ellipsis;font-size:12px}
.timeline .track{position:relative;flex:1;height:16px;background:#f3f4f6;border-radius:3px}
.bar{position:absolute;top:2px;height:12px;border-radius:2px;min-width:2px}
.bar.pass{background:#2f9e5b}.bar.fail{background:#d64545}.bar.open{background:#d9a520}
.row.critical .label{font-weight:700}.row.critical .track{outline:2px solid #5b6ee1}
.status-complete{color:#2f9e5b}.status-blocked{color:#d64545}.status-skipped{color:#888}
.diff .add{color:#1a7f37;background:#e6ffec}.diff .del{color:#b42318;background:#ffebe9}
.diff .hunk{color:#6639ba}.diff .file{font-weight:700}
.cost .bar{position:static;display:inline-block;height:12px;background:#5b6ee1;vertical-align:middle}
.cost .bar.tokens{background:#9aa3b2}
.budget{color:#d64545}.budget-gauge{position:relative;width:300px;height:14px;background:#f3f4f6;
border-radius:3px;margin:0 0 10px}.budget-gauge .spent{position:absolute;left:0;top:1px;height:12px;
background:#5b6ee1}.budget-gauge.over .spent{background:#d64545}.budget-gauge .line{position:absolute;
top:-3px;width:2px;height:20px;background:#d64545}details>summary{cursor:pointer;font-weight:600;margin:4px 0}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;border-radius:2px}
"""
    + TOKEN_STYLE
)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _money(usd: float) -> str:
    return f"${usd:,.4f}" if usd < 1 else f"${usd:,.2f}"


def render(data: ReportData) -> str:
    """The whole page."""
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">",
        f"<title>AutoDev report: {escape(data.title)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>{escape(data.title)}</h1><div>plan {escape(data.plan_id)} · started "
        f"{escape(data.started_at)} · report made {generated}</div></header><main>",
        _intent_and_plan(data),
        _totals(data),
        _timeline(data),
        _tasks(data),
        _costs(data),
        "</main></body></html>",
    ]
    return "".join(parts)


def _intent_and_plan(data: ReportData) -> str:
    intent = f"<pre>{escape(data.intent)}</pre>" if data.intent else "<p>(the plan was saved from a file)</p>"
    rows = []
    for phase_id, title, views in data.phases:
        rows.append(f"<tr><th colspan='7'>Phase {escape(phase_id)}: {escape(title)}</th></tr>")
        for view in views:
            task = view.task
            rows.append(
                f"<tr><td>{escape(task.id)}</td><td>{escape(task.title)}</td>"
                f"<td class='status-{escape(task.status)}'>{escape(task.status)}</td>"
                f"<td>{escape(task.model or '')}</td><td>{escape(task.effort or '')}</td>"
                f"<td>{escape(view.lane or '')}</td>"
                f"<td>{escape(', '.join(task.depends_on))}</td></tr>"
            )
    table = (
        "<table id='plan'><tr><th>task</th><th>title</th><th>status</th><th>level</th><th>effort</th>"
        f"<th>lane</th><th>depends on</th></tr>{''.join(rows)}</table>"
    )
    return (
        f"<section id='intent'><h2>Intent</h2>{intent}</section>"
        f"<section><h2>Plan</h2>{_graph(data)}{table}</section>"
    )


def _graph(data: ReportData) -> str:
    """The dependencies as a small layered graph (SVG), for plans that fit one."""
    tasks = [view.task for view in data.tasks]
    if not tasks or len(tasks) > _GRAPH_LIMIT:
        return ""
    level: dict[str, int] = {}
    for task in tasks:  # plans list a task after what it depends on
        level[task.id] = 1 + max((level.get(dep, -1) for dep in task.depends_on), default=-1)
    columns: dict[int, list[str]] = {}
    for task in tasks:
        columns.setdefault(level[task.id], []).append(task.id)
    where = {
        task_id: (20 + column * 120, 20 + row * 34)
        for column, ids in columns.items()
        for row, task_id in enumerate(ids)
    }
    width = 60 + 120 * len(columns)
    height = 40 + 34 * max(len(ids) for ids in columns.values())
    lines = [
        f"<line x1='{where[dep][0] + 70}' y1='{where[dep][1] + 10}' x2='{where[task.id][0]}' "
        f"y2='{where[task.id][1] + 10}' stroke='#9aa3b2'/>"
        for task in tasks
        for dep in task.depends_on
        if dep in where
    ]
    nodes = [
        f"<rect x='{x}' y='{y}' width='70' height='20' rx='3' fill='#eef1ff' stroke='#5b6ee1'/>"
        f"<text x='{x + 35}' y='{y + 14}' font-size='11' text-anchor='middle'>{escape(task_id)}</text>"
        for task_id, (x, y) in where.items()
    ]
    return f"<svg id='graph' width='{width}' height='{height}'>{''.join(lines)}{''.join(nodes)}</svg>"


def _totals(data: ReportData) -> str:
    totals = data.totals
    figures = [
        ("tasks", str(len(data.tasks))),
        ("complete", str(totals.get("complete", 0))),
        ("blocked", str(totals.get("blocked", 0))),
        ("skipped", str(totals.get("skipped", 0))),
        ("retries", str(totals.get("retries", 0))),
        ("cost", _money(data.cost_usd)),
        ("tokens in / out", f"{data.tokens_in:,} / {data.tokens_out:,}"),
        ("wall time", _duration(data.span_s)),
        ("agent time", _duration(data.agent_s)),
        ("tasks at once (mean)", f"{data.parallelism:.2f}"),
    ]
    cells = "".join(
        f"<div class='figure'>{escape(name)}<b>{escape(value)}</b></div>" for name, value in figures
    )
    return f"<section id='totals'><h2>Totals</h2><div class='totals'>{cells}</div></section>"


def _bar(segment: Segment, span: float) -> str:
    left = 100 * segment.start / span
    width = max(100 * (segment.end - segment.start) / span, 0.15)
    took = _duration(segment.end - segment.start)
    what = f"{segment.step}, attempt {segment.attempt}: {segment.outcome}, {took}"
    return (
        f"<div class='bar {segment.outcome}' data-step='{escape(segment.step)}' "
        f"style='left:{left:.3f}%;width:{width:.3f}%' title='{escape(what)}'></div>"
    )


def _pages(views: list[TaskView], render_one: Callable[[TaskView], str]) -> str:
    """``views`` rendered, in folded pages of ``_PAGE`` tasks when there are more than that: a phase of a
    thousand tasks opens as ten page headings, not a thousand rows."""
    if len(views) <= _PAGE:
        return "".join(render_one(view) for view in views)
    return "".join(
        f"<details class='page'><summary>tasks {start + 1}-{min(start + _PAGE, len(views))} of {len(views)}"
        f"</summary>{''.join(render_one(view) for view in views[start : start + _PAGE])}</details>"
        for start in range(0, len(views), _PAGE)
    )


def _timeline_row(view: TaskView, span: float) -> str:
    return (
        f"<div class='row{' critical' if view.critical else ''}' data-task='{escape(view.task.id)}'>"
        f"<div class='label'>{escape(view.task.id)} {escape(view.task.title)}</div><div class='track'>"
        f"{''.join(_bar(segment, span) for segment in view.segments)}</div></div>"
    )


def _timeline(data: ReportData) -> str:
    span = data.span_s or 1.0
    folded = len(data.tasks) > _OPEN_LIMIT
    blocks = [
        f"<details class='phase'{'' if folded else ' open'}><summary>Phase {escape(phase_id)}: "
        f"{escape(title)} ({len(views)} tasks)</summary>"
        f"{_pages(views, lambda view: _timeline_row(view, span))}</details>"
        for phase_id, title, views in data.phases
    ]
    legend = (
        "<div class='legend'>steps: developer, gates, review, tests, completion (or tournament), merge ·"
        "<span style='background:#2f9e5b'></span>moved on<span style='background:#d64545'></span>"
        "sent back or blocked<span style='background:#d9a520'></span>not ended · bold and outlined: the "
        "critical path</div>"
    )
    return f"<section class='timeline' id='timeline'><h2>Timeline</h2>{legend}{''.join(blocks)}</section>"


def _diff(text: str) -> str:
    if not text:
        return "<p>(no change recorded)</p>"
    return f"<pre class='diff'>{highlight_diff(text)}</pre>"


def _judge(judge: tuple[int, bool, tuple[str, ...], str]) -> str:
    number, valid, ranking, reason = judge
    if not valid:
        return f"judge {number}: not counted: {escape(reason)}"
    return f"judge {number}: {' &gt; '.join(escape(candidate) for candidate in ranking)}"


def _tournament(summary: str, passes: list[TournamentPass]) -> str:
    rows = "".join(
        f"<tr class='pass'><td>{one.number}</td><td>{escape(one.status)}</td>"
        f"<td>{escape(one.winner or '—')}{f' by {one.margin}' if one.margin is not None else ''}</td>"
        f"<td>{escape(' · '.join(f'{candidate} {points}' for candidate, points in one.scores))}</td>"
        f"<td>{'<br>'.join(_judge(judge) for judge in one.judges)}</td></tr>"
        for one in passes
    )
    table = (
        "<table class='tournament'><tr><th>pass</th><th>decision</th><th>winner</th><th>Borda points</th>"
        f"<th>judges' rankings, best first</th></tr>{rows}</table>"
        if rows
        else ""
    )
    return f"<h3>Tournament</h3><p>{escape(summary)}</p>{table}"


def _task(view: TaskView) -> str:
    task = view.task
    gates = "".join(
        f"<tr class='gate'><td>{escape(row.gate)}</td><td>{escape(row.status)}</td>"
        f"<td><code>{escape(row.argv)}</code></td><td><pre>{escape(row.excerpt[-4000:])}</pre></td></tr>"
        for row in view.gates
    )
    reviews = "".join(
        f"<li>attempt {row.attempt}: {escape(row.verdict)}"
        + ("".join(f"<br>- {escape(issue)}" for issue in row.issues))
        + "</li>"
        for row in view.reviews
    )
    checks = "".join(
        f"<tr><td>{escape(check)}</td><td>{escape(status)}</td><td>{escape(reason)}</td></tr>"
        for check, status, reason in view.proof_checks
    )
    roles = "".join(
        f"<tr><td>{escape(role)}</td><td>{_money(usd)}</td><td>{view.tokens_by_role.get(role, 0):,}</td></tr>"
        for role, usd in sorted(view.cost_by_role.items())
    )
    facts = [
        f"status <b class='status-{escape(task.status)}'>{escape(task.status)}</b>",
        f"attempts {view.attempts}",
        f"commit <code>{escape(task.commit[:12])}</code>" if task.commit else "not committed",
    ]
    if task.blocked_reason:
        facts.append(f"blocked: {escape(task.blocked_reason)}")
    body = [
        f"<p>{' · '.join(facts)}</p>",
        f"<h3>Diff</h3>{_diff(view.diff)}",
        f"<h3>Gates</h3><table><tr><th>gate</th><th>status</th><th>argv</th><th>output</th></tr>{gates}</table>"
        if gates
        else "",
        f"<h3>Reviews</h3><ul>{reviews}</ul>" if reviews else "",
        f"<h3>Tests</h3><p>{escape(view.tests)}</p>" if view.tests else "",
        f"<h3>Proof: {escape(view.proof)}</h3><table>{checks}</table>" if view.proof else "",
        _tournament(view.tournament, view.tournament_passes) if view.tournament else "",
        f"<h3>Critic</h3><p>{escape(view.critic)}</p>" if view.critic else "",
        f"<h3>Cost by role</h3><table><tr><th>role</th><th>cost</th><th>tokens</th></tr>{roles}</table>"
        if roles
        else "",
    ]
    return (
        f"<details class='task' id='task-{escape(task.id)}'><summary>{escape(task.id)} {escape(task.title)} "
        f"— {escape(task.status)}</summary>{''.join(body)}</details>"
    )


def _tasks(data: ReportData) -> str:
    folded = len(data.tasks) > _OPEN_LIMIT
    phases = "".join(
        f"<details class='phase'{'' if folded else ' open'}><summary>Phase {escape(phase_id)}: "
        f"{escape(title)} ({len(views)} tasks)</summary>{_pages(views, _task)}</details>"
        for phase_id, title, views in data.phases
    )
    return f"<section id='tasks'><h2>Tasks</h2>{phases}</section>"


def _budget(spent: float, budget: float) -> str:
    """The run's cost against its budget: a bar of what was spent, the budget a line across it."""
    scale = max(spent, budget)
    over = " over" if spent > budget else ""
    return (
        f"<p class='budget'>budget: {_money(budget)} ({100 * spent / budget:.0f}% spent)</p>"
        f"<div class='budget-gauge{over}'><span class='spent' style='width:{300 * spent / scale:.1f}px'>"
        f"</span><span class='line' style='left:{298 * budget / scale:.1f}px' title='budget "
        f"{_money(budget)}'></span></div>"
    )


def _costs(data: ReportData) -> str:
    rows = cost_rows(data)
    top = max([usd for _, _, usd, _ in rows] + [data.budget_usd or 0.0, 1e-9])
    most = max([tokens for _, _, _, tokens in rows] + [1])
    lines = "".join(
        f"<tr><td>{escape(role)}</td><td>{escape(model)}</td><td><span class='bar' "
        f"style='width:{300 * usd / top:.1f}px'></span> {_money(usd)}</td><td><span class='bar tokens' "
        f"style='width:{200 * tokens / most:.1f}px'></span> {tokens:,}</td></tr>"
        for role, model, usd, tokens in rows
    )
    budget = _budget(data.cost_usd, data.budget_usd) if data.budget_usd else ""
    header = "<tr><th>role</th><th>model</th><th>cost</th><th>tokens</th></tr>"
    table = f"<table>{header}{lines}</table>" if rows else ""
    return f"<section class='cost' id='cost'><h2>Cost by role and model</h2>{budget}{table}</section>"
