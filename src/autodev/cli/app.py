"""The ``autodev`` command: parse, call one library function, render. No orchestration logic lives here.

Heavy imports (pydantic models, rich) happen inside the commands that need them, so ``autodev --help``
and ``autodev status --json`` start fast.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from autodev._version import __version__
from autodev.cli.tournament import tournament
from autodev.errors import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SUSPENDED,
    EXIT_USAGE,
    AutodevError,
    EnvironmentFaultError,
)

if TYPE_CHECKING:
    from autodev.state.paths import AutodevPaths

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  work blocked or failed (or an internal error)
  2  usage, configuration or input error
  3  suspended or stopped resumably (an inline agent, a plan approval, a budget raise, a full disk,
     a missing tool, refs an agent moved): fix it, then `autodev resume`
  130  interrupted (Ctrl-C); 143 and 129: stopped by SIGTERM or SIGHUP, the same way:
     everything recorded is kept, `autodev resume` continues"""


class CliContext:
    """What every command needs: where the repository is and how loud to be.

    A plain class rather than a dataclass: importing dataclasses costs CLI start-up time for nothing here.
    """

    __slots__ = ("repo_root", "verbose")

    def __init__(self, repo_root: Path, verbose: bool) -> None:
        self.repo_root = repo_root
        self.verbose = verbose

    @property
    def paths(self) -> AutodevPaths:
        from autodev.state.paths import AutodevPaths

        return AutodevPaths(self.repo_root)

    def start_logging(self, *, create_state: bool) -> None:
        """Log to ``.autodev/logs`` when the state dir exists (or the command creates it)."""
        from autodev.logging import configure_logging, configure_quiet_logging

        paths = self.paths
        if create_state or paths.state_dir.is_dir():
            from autodev.state.paths import ensure_state_dir

            ensure_state_dir(paths)
            configure_logging(paths.log_file, verbose=self.verbose, level=os.environ.get("AUTODEV_LOG_LEVEL"))
        elif self.verbose:
            configure_logging(None, verbose=True, level=os.environ.get("AUTODEV_LOG_LEVEL"))
        else:
            configure_quiet_logging()


def _echo_error(message: str) -> None:
    from autodev.cli.text import terminal_text

    # Messages quote what the user or an agent wrote: an escape sequence in there is not for the terminal.
    click.echo(f"error: {terminal_text(message)}", err=True)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, "--version", prog_name="autodev")
@click.option(
    "-C",
    "--repo",
    "repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository to work in (default: the repository containing the current directory).",
)
@click.option("-v", "--verbose", is_flag=True, help="Also print log events on stderr.")
@click.pass_context
def cli(ctx: click.Context, repo: Path | None, verbose: bool) -> None:
    """AutoDev turns a plain-language intent into a reviewed, tested change in a git repository.

    State lives in .autodev/ at the repository root: an append-only, hash-chained ledger
    (ledger.jsonl), a plan snapshot (plan.json), evidence and logs.
    """
    from autodev.state.paths import find_repo_root

    start = repo if repo is not None else Path.cwd()
    if repo is not None and not repo.is_dir():
        raise click.BadParameter(f"{repo} is not a directory", param_hint="--repo")
    ctx.obj = CliContext(repo_root=find_repo_root(start), verbose=verbose)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--force", is_flag=True, help="Overwrite an existing .autodev/config.toml.")
@click.pass_obj
def init(obj: CliContext, force: bool) -> None:
    """Create .autodev/ and a config.toml listing every setting with its default, commented out."""
    from autodev.config import render_config_template
    from autodev.state.atomic import atomic_write_text

    obj.start_logging(create_state=True)
    target = obj.paths.config
    if target.exists() and not force:
        raise AutodevError(f"{target} already exists; pass --force to overwrite it")
    atomic_write_text(target, render_config_template())
    click.echo(f"Wrote {target}")
    click.echo("Every setting is listed there with its default; uncomment a line to change it.")


@dataclass(frozen=True, slots=True)
class AgentChoice:
    """What the shared agent options chose: the command receives them as one ``agents`` argument."""

    platform: str | None
    model: str | None
    script: Path | None
    no_tournament: bool
    executor: str | None = None


def _agent_options(command: Any) -> Any:
    """The options every agent-driving command shares, handed to it as ``agents: AgentChoice``."""

    @functools.wraps(command)
    def collected(
        *args: Any,
        platform: str | None,
        model: str | None,
        script: Path | None,
        no_tournament: bool,
        executor: str | None,
        **kwargs: Any,
    ) -> Any:
        return command(*args, agents=AgentChoice(platform, model, script, no_tournament, executor), **kwargs)

    function: Any = collected
    function = click.option(
        "--platform",
        type=click.Choice(
            ["auto", "claude_code", "codex", "cursor", "opencode", "gemini", "inline", "scripted"]
        ),
        default=None,
        help="Agent platform (default: config, else auto: the first agent CLI on PATH, else inline).",
    )(function)
    function = click.option(
        "--model", default=None, help="Model or capability tier (fast, standard, strong) for every role."
    )(function)
    function = click.option(
        "--script",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        help="With --platform scripted: the TOML or JSON script that answers for the agents.",
    )(function)
    function = click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default=None,
        help="Where each task's flow runs (default: config, else local): here, or on the Ray cluster of "
        "ray.address (pip install 'autodev[ray]').",
    )(function)
    return click.option("--no-tournament", is_flag=True, help="Skip plan and implementation tournaments.")(
        function
    )


_wait = click.option(
    "--wait",
    is_flag=True,
    help="When the agent's provider pauses the run (a usage limit, an outage, the circuit breaker), wait "
    "until it resets, with a countdown, and continue; a refused login still stops (exit 3). When only tasks "
    "waiting for your approval are left, wait for your answer (from another terminal) up to "
    "policy.worker_approval_timeout_s instead of stopping.",
)

_stale_base_ok = click.option(
    "--stale-base-ok",
    is_flag=True,
    help="Build on a checkout that is base_behind_threshold or more commits behind its base (the branch's "
    "upstream, else origin/HEAD) instead of stopping to ask; `autodev refresh-base` brings it up to date.",
)

_allow_detached = click.option(
    "--allow-detached", is_flag=True, help="Commit on a detached HEAD (the commits are on no branch)."
)


def _overrides(agents: AgentChoice) -> dict[str, Any]:
    from autodev.config import ROLE_NAMES

    overrides: dict[str, Any] = {}
    if agents.platform is not None:
        overrides["platform"] = agents.platform
    if agents.model is not None:
        for role in ROLE_NAMES:
            overrides[f"roles.{role}.model"] = agents.model
    if agents.no_tournament:
        overrides["tournaments.plan.enabled"] = False
        overrides["tournaments.impl.enabled"] = False
    if agents.executor is not None:
        overrides["executor"] = agents.executor
    return overrides


def _contain_children() -> None:
    """Make this process the subreaper of what its agents and tools start (commands that start them).

    Orphans of agent and tool processes then come back to this process instead of init, so that whatever
    escaped its call is still found and stopped, at the latest when the command ends.
    """
    from autodev.processes import become_subreaper, kill_adopted

    if become_subreaper():
        atexit.register(kill_adopted)


def _offline(obj: CliContext) -> Any:
    """An orchestrator for commands that change the plan's state without calling an agent (the inline
    platform: nothing is started, whatever agent CLI is on PATH)."""
    from autodev.config import load_config
    from autodev.orchestrator import Orchestrator

    return Orchestrator(obj.repo_root, config=load_config(obj.repo_root, overrides={"platform": "inline"}))


def _orchestrator(obj: CliContext, agents: AgentChoice, listener: Any) -> Any:
    from autodev.adapters.registry import create_adapter
    from autodev.config import load_config
    from autodev.orchestrator import Orchestrator

    _contain_children()
    config = load_config(obj.repo_root, overrides=_overrides(agents))
    adapter = None
    script = agents.script
    if config.platform == "scripted":
        if script is None:
            raise AutodevError("--platform scripted needs --script FILE (a TOML or JSON agent script)")
        adapter = create_adapter("scripted", repo_root=obj.repo_root, config=config, script=script)
    elif script is not None:
        raise AutodevError("--script only applies to --platform scripted")
    orchestrator = Orchestrator(obj.repo_root, config=config, adapter=adapter, listener=listener)
    return orchestrator


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("intent", required=False)
@click.option(
    "--from-markdown",
    "markdown_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Save a plan written by hand in the canonical plan markdown (docs/plan-format.md) instead.",
)
@click.option("--replace", is_flag=True, help="Replace a current plan that already has work on it.")
@_agent_options
@click.pass_obj
def plan(
    obj: CliContext,
    intent: str | None,
    markdown_file: Path | None,
    replace: bool,
    agents: AgentChoice,
) -> None:
    """Plan INTENT with the agents (explorer, domain expert, architect), or save a hand-written plan."""
    if (intent is None) == (markdown_file is None):
        raise click.UsageError("give either an INTENT or --from-markdown FILE")
    if markdown_file is not None:
        _plan_from_markdown(obj, markdown_file, replace)
        return
    assert intent is not None
    from autodev.cli.render import plan_summary

    obj.start_logging(create_state=True)
    with _run_display(obj) as display:
        orchestrator = _orchestrator(obj, agents, display)
        saved = _drive(obj, lambda: orchestrator.plan(intent, replace=replace))
    click.echo(plan_summary(saved))
    click.echo("Next: `autodev status` to read it, `autodev execute` to carry it out.")


def _plan_from_markdown(obj: CliContext, markdown_file: Path, replace: bool) -> None:
    from autodev.cli.render import plan_summary

    obj.start_logging(create_state=True)
    saved = _offline(obj).plan_from_markdown(markdown_file, replace=replace)
    click.echo(plan_summary(saved))
    click.echo("Next: `autodev status` shows it task by task.")


_write_scope = click.option(
    "--write-scope",
    default=None,
    metavar="PATHS",
    help="Where this run's writers may write, e.g. 'src/**, tests/**' (as a `Write scope:` line would).",
)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("intent")
@click.option("--confirm-plan", is_flag=True, help="Stop after planning (exit 3) until `autodev approve`.")
@click.option("--replace", is_flag=True, help="Replace a current plan that already has work on it.")
@_write_scope
@_allow_detached
@_wait
@_stale_base_ok
@click.option(
    "--no-fetch",
    is_flag=True,
    help="Compare the checkout with its base ref as it is, without fetching it first.",
)
@_agent_options
@click.pass_obj
def run(
    obj: CliContext,
    intent: str,
    confirm_plan: bool,
    replace: bool,
    write_scope: str | None,
    allow_detached: bool,
    wait: bool,
    stale_base_ok: bool,
    no_fetch: bool,
    agents: AgentChoice,
) -> None:
    """Plan INTENT, then execute every task: developer, QA gates, reviewer, test engineer, commit.

    Writers may write only where the user said: a `Write scope: src/**, tests/**` line in INTENT (or
    --write-scope); anything else asks for approval first (exit 3, `autodev approvals`)."""
    obj.start_logging(create_state=True)
    with _run_display(obj) as display:
        orchestrator = _orchestrator(obj, agents, display)
        orchestrator.stale_base_ok, orchestrator.fetch_base = stale_base_ok, not no_fetch
        click.echo(f"platform: {orchestrator.platform_name} ({orchestrator.platform_reason})")
        for reason in (orchestrator.read_only_reason, orchestrator.verifier.reason):
            if reason:
                click.echo(reason)
        try:
            outcome = _drive(
                obj,
                lambda: orchestrator.run(
                    intent,
                    confirm_plan=confirm_plan,
                    replace=replace,
                    allow_detached=allow_detached,
                    write_scope=write_scope,
                ),
                waiting=_waiting(wait, orchestrator, display, allow_detached),
            )
        except KeyboardInterrupt:
            if not _planning_began(obj, orchestrator.session_id):
                from autodev.cli.stopping import NOTHING_RECORDED, advise_after_interrupt

                advise_after_interrupt(NOTHING_RECORDED)
            raise
    if isinstance(outcome, list):
        # Resumed after waiting out the provider: the tasks the resume carried out.
        _finish(obj, display, outcome)
        return
    if outcome.awaiting_approval:
        _print_plan_for_approval(obj, outcome.plan)
        sys.exit(EXIT_SUSPENDED)
    _finish(obj, display, outcome.tasks)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--task-id", default=None, help="Run only this task (its dependencies must be complete).")
@click.option(
    "--evidence",
    default=None,
    metavar="IDS",
    help="The accepted results (ids such as E12,E40, listed under results in `autodev status --json`) every "
    "task's agents are given, in this order, instead of the most recent ones.",
)
@_write_scope
@_allow_detached
@_wait
@_stale_base_ok
@_agent_options
@click.pass_obj
def execute(
    obj: CliContext,
    task_id: str | None,
    evidence: str | None,
    write_scope: str | None,
    allow_detached: bool,
    wait: bool,
    stale_base_ok: bool,
    agents: AgentChoice,
) -> None:
    """Carry out the saved plan (or one task of it)."""
    obj.start_logging(create_state=True)
    selection = [part for part in evidence.split(",") if part.strip()] if evidence is not None else None
    with _run_display(obj) as display:
        orchestrator = _orchestrator(obj, agents, display)
        orchestrator.stale_base_ok = stale_base_ok
        tasks = _drive(
            obj,
            lambda: orchestrator.execute(
                task_id, allow_detached=allow_detached, write_scope=write_scope, evidence=selection
            ),
            waiting=_waiting(wait, orchestrator, display, allow_detached),
        )
    _finish(obj, display, tasks)


@cli.command(epilog=EXIT_CODES_HELP)
@_allow_detached
@_wait
@_stale_base_ok
@_agent_options
@click.pass_obj
def resume(
    obj: CliContext,
    allow_detached: bool,
    wait: bool,
    stale_base_ok: bool,
    agents: AgentChoice,
) -> None:
    """Continue after an inline suspend, a crash, Ctrl-C, an approval, a budget stop or a stale base."""
    obj.start_logging(create_state=True)
    with _run_display(obj) as display:
        orchestrator = _orchestrator(obj, agents, display)
        orchestrator.stale_base_ok = stale_base_ok
        tasks = _drive(
            obj,
            lambda: orchestrator.resume(allow_detached=allow_detached),
            waiting=_waiting(wait, orchestrator, display, allow_detached),
        )
    _finish(obj, display, tasks)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--scope",
    "approval_id",
    default=None,
    metavar="ID",
    help="Accept the write-scope approval request ID (`autodev approvals`) instead of the plan.",
)
@click.pass_obj
def approve(obj: CliContext, approval_id: str | None) -> None:
    """Approve the current plan so that `autodev execute` may carry it out, or (--scope ID) a write scope."""

    obj.start_logging(create_state=True)
    if approval_id is not None:
        record = _offline(obj).resolve_approval(approval_id, accepted=True)
        click.echo(
            f"Accepted {record.id}: writers may now write {', '.join(record.scope)} "
            f"(for {', '.join(record.task_ids)}). Next: `autodev resume`."
        )
        return
    approved = _offline(obj).approve()
    click.echo(f"Approved plan {approved.plan_id} {approved.title!r}. Next: `autodev execute`.")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("approval_id", metavar="ID")
@click.pass_obj
def decline(obj: CliContext, approval_id: str) -> None:
    """Decline the write-scope approval request ID: the tasks that need it never start."""

    obj.start_logging(create_state=True)
    record = _offline(obj).resolve_approval(approval_id, accepted=False)
    click.echo(
        f"Declined {record.id} ({', '.join(record.scope)}); `autodev resume` blocks "
        f"{', '.join(record.task_ids)} and carries out the rest."
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to write index.html into (default: .autodev/report).",
)
@click.option("--open", "open_it", is_flag=True, help="Open the page in the default browser.")
@click.pass_obj
def report(obj: CliContext, out_dir: Path | None, open_it: bool) -> None:
    """Write the run report: one self-contained HTML page (intent, plan, totals, a timeline of every step and
    attempt, each task's diff, gates, reviews, tests and proof, cost by role and model), made from the ledger
    and evidence alone, so it works for any past, killed or resumed run, beside a live one."""
    from autodev.config import load_config
    from autodev.report.writer import write_report

    config = load_config(obj.repo_root)
    target = out_dir if out_dir is not None else obj.paths.state_dir / "report"
    page = write_report(obj.repo_root, target, config)
    click.echo(f"Report: {page}")
    if open_it:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print the contract as JSON.")
@click.pass_obj
def proof(obj: CliContext, task_id: str, as_json: bool) -> None:
    """Show TASK's completion contract: each required check, how it ended, its output digest, and the
    verdict, for the exact revision it checked."""
    from autodev.cli.text import terminal_text

    contract = _offline(obj).proof(task_id)
    if as_json:
        click.echo(json.dumps(contract.model_dump(mode="json") if contract else None, indent=2))
        return
    if contract is None:
        click.echo(f"Task {task_id} has no completion contract yet (it is opened once its tests pass).")
        return
    click.echo(
        f"Task {task_id}, attempt {contract.attempt}: {contract.verdict} (revision {contract.revision[:12]}, "
        f"{contract.checkout})"
    )
    made_from = " ".join(
        part
        for part in (
            f"base {contract.base_commit[:12]}" if contract.base_commit else "",
            f"({contract.base_ref})" if contract.base_ref else "",
            f"for branch {contract.branch}" if contract.branch else "",
        )
        if part
    )
    if made_from:
        click.echo(f"  made on {made_from}")
    if contract.implemented_on or contract.verified_on:
        session = f", agent session {contract.session_id}" if contract.session_id else ""
        click.echo(
            f"  implemented on {contract.implemented_on or 'unknown'}{terminal_text(session)}, reviewed on "
            f"{contract.verified_on or 'unknown'}"
        )
    for check in contract.checks:
        digest = f" sha256:{check.output_sha256[:12]}" if check.output_sha256 else ""
        reason = f" — {check.reason}" if check.reason else ""
        shown = " ".join(check.argv) if check.argv else check.description
        click.echo(f"  {check.id}\t{check.status}\t{terminal_text(shown)}{digest}{terminal_text(reason)}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.pass_obj
def adopt(obj: CliContext, task_id: str) -> None:
    """Land TASK's verified change that waits for adoption: a fast-forward of your checkout that never
    overwrites your work (refused, and still waiting, while it would). The task then completes."""
    import anyio

    obj.start_logging(create_state=True)
    orchestrator = _offline(obj)
    commit = anyio.run(lambda: orchestrator.adopt(task_id))
    click.echo(
        f"Adopted {task_id}: {commit[:12]} is on your branch; `autodev resume` goes on with what waited."
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.option("--reason", default="given up by the user (autodev discard)", help="Why (kept with the task).")
@click.pass_obj
def discard(obj: CliContext, task_id: str, reason: str) -> None:
    """Give up TASK's verified change that waits for adoption: the task is blocked and its change kept, so
    `autodev retry TASK` continues from it on the current code."""
    import anyio

    obj.start_logging(create_state=True)
    orchestrator = _offline(obj)
    anyio.run(lambda: orchestrator.discard(task_id, reason))
    click.echo(f"Discarded {task_id}'s waiting change; `autodev retry {task_id}` redoes it from there.")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.argument("check")
@click.option("--reason", required=True, help="Why the check may be skipped (recorded with the waiver).")
@click.pass_obj
def waive(obj: CliContext, task_id: str, check: str, reason: str) -> None:
    """Waive CHECK (a blocked check of TASK's completion contract, e.g. command:2) for the revision it
    checked; a new revision needs a new waiver. Then `autodev retry TASK`."""
    obj.start_logging(create_state=True)
    contract = _offline(obj).waive(task_id, check, reason)
    click.echo(
        f"Waived {check} of {task_id} for revision {contract.revision[:12]}; `autodev retry {task_id}` "
        "runs the contract again."
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the requests as JSON.")
@click.pass_obj
def approvals(obj: CliContext, as_json: bool) -> None:
    """List the write-scope approval requests of the current plan and what they wait for."""

    records = _offline(obj).approvals()
    if as_json:
        click.echo(json.dumps([record.model_dump(mode="json") for record in records], indent=2))
        return
    if not records:
        click.echo("No approval requests: every task's files are inside the declared write scope.")
        return
    for record in records:
        click.echo(
            f"{record.id}\t{record.status}\t{', '.join(record.scope)}\tfor {', '.join(record.task_ids)}"
        )
    pending = [record.id for record in records if record.status == "pending"]
    if pending:
        click.echo(
            f"Accept with `autodev approve --scope {pending[0]}`, refuse with `autodev decline {pending[0]}`."
        )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.option(
    "--reset-attempts",
    is_flag=True,
    help="Give the task all of qa_retry_limit again (default: at least one).",
)
@click.pass_obj
def retry(obj: CliContext, task_id: str, reset_attempts: bool) -> None:
    """Send a blocked task back to work; `autodev resume` then runs it (its dependents come back too)."""

    obj.start_logging(create_state=True)
    orchestrator = _offline(obj)
    task = orchestrator.retry(task_id, reset_attempts=reset_attempts)
    left = orchestrator.config.qa_retry_limit - task.retry_count
    click.echo(
        f"Task {task.id} is back in progress ({left} attempt(s) left); run `autodev resume` to carry it out."
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.pass_obj
def skip(obj: CliContext, task_id: str) -> None:
    """Skip a pending task; its dependents run without it unless skipped_dependency_satisfies = false."""

    obj.start_logging(create_state=True)
    blocked = _offline(obj).skip(task_id)
    click.echo(f"Task {task_id} is skipped.")
    if blocked:
        click.echo(f"Blocked because of it (skipped_dependency_satisfies = false): {', '.join(blocked)}")


def _lane_view(obj: CliContext, lane: str | None = None) -> Any:
    """The plan seen through the configured lanes, the configuration and the tasks; ``lane``, when given,
    must be a configured lane (a ``--lane`` option's value)."""
    from autodev.config import load_config
    from autodev.orchestrator.lanes import LaneView
    from autodev.state.plan_manager import PlanManager

    config = load_config(obj.repo_root)
    if lane is not None and lane not in config.lanes:
        raise click.BadParameter(
            f"no lane {lane!r}; configured: {', '.join(config.lanes)}", param_hint="--lane"
        )
    with PlanManager.open(obj.repo_root, readonly=True) as manager:
        tasks = manager.tasks() if manager.has_plan else []
    return LaneView(tasks, config), config, tasks


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--unregister", is_flag=True, help="Drop this session's lane records (see `autodev next`).")
@click.pass_obj
def lanes(obj: CliContext, unregister: bool) -> None:
    """Each configured lane: its pickable tasks (slice jobs among them), its tasks still waiting, and the
    agent session working it."""
    from autodev.state.claims import ALL_LANES, ClaimStore, SessionIdentity

    store = ClaimStore(obj.repo_root / ".autodev")
    if unregister:
        with store.locked():
            dropped = store.unregister(SessionIdentity.from_environment())
        click.echo(f"unregistered from: {', '.join(dropped)}" if dropped else "this session held no lane")
        return
    view, _, _ = _lane_view(obj)
    sessions = store.sessions()
    every = sessions.get(ALL_LANES)
    for row in view.counts():
        record = sessions.get(row.lane)
        if record is None and every is not None:
            record, row_note = every, ", all lanes"
        else:
            row_note = ""
        who = f"{record.who()} ({'alive' if record.alive else 'gone'}{row_note})" if record else "no session"
        click.echo(f"{row} · {who}")


@cli.command("next", epilog=EXIT_CODES_HELP)
@click.option(
    "--lane", default=None, help="Take from this lane only, in its pick order (default: every lane)."
)
@click.option(
    "--as",
    "as_model",
    type=click.Choice(["haiku", "sonnet", "opus"]),
    default=None,
    help="This session's model: tasks of this Model level or lower are offered (default: haiku).",
)
@click.pass_obj
def next_task(obj: CliContext, lane: str | None, as_model: str | None) -> None:
    """Give this agent session the next task it may take, and claim it so that no other session takes it
    (claims of sessions that are gone do not count). Prints how to run it, and what its lanes wait for."""
    from autodev.orchestrator.sessions import take_next
    from autodev.state.claims import ClaimStore, SessionIdentity
    from autodev.state.plan_markdown import MODEL_NAMES, TIER_NAMES
    from autodev.state.schemas import DEFAULT_TASK_TIER

    view, config, tasks = _lane_view(obj, lane)
    me = SessionIdentity.from_environment()
    found = take_next(
        tasks,
        config,
        ClaimStore(obj.repo_root / ".autodev"),
        me,
        lane=lane,
        session_tier=MODEL_NAMES[as_model] if as_model else None,
    )
    if found.pick is None or found.task is None:
        click.echo("nothing to take now" + (f" in the {lane} lane" if lane else ""))
    else:
        task = found.task
        level = TIER_NAMES[task.model or DEFAULT_TASK_TIER]
        facts = [f"lane {found.lane}", f"Model {level}", f"Effort {task.effort or '-'}"]
        facts.append(view.effective_priority(task.id))
        click.echo(f"{found.pick}: {task.title} ({' · '.join(facts)})")
        click.echo(f"claimed for {me.describe()}")
        what = "slice it" if found.pick.slice_job else "run it"
        click.echo(f"{what}: autodev execute --task-id {task.id} --platform inline")
    for line in found.lines:
        click.echo(line)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("area", required=False)
@click.option("--mark", is_flag=True, help="Record HEAD as the commit AREA's map was last checked at.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.pass_obj
def areas(obj: CliContext, area: str | None, mark: bool, as_json: bool) -> None:
    """The area maps of the notes file's '## Areas' section: per area its anchors missing from the code,
    the commits on its paths since it was checked, and whether it is stale. Read-only unless --mark."""
    from autodev.config import load_config
    from autodev.workspace.areas import check_area, find_area, mark_area, notes_file, read_areas

    config = load_config(obj.repo_root)
    path = notes_file(obj.repo_root, config.areas)
    if path is None:
        wanted = config.areas or "AGENTS.md or CLAUDE.md"
        raise AutodevError(
            f"no notes file {wanted} in {obj.repo_root}; area maps live in its '## Areas' section"
        )
    known = read_areas(path)
    if mark:
        if area is None:
            raise click.UsageError("--mark needs the AREA to mark")
        target = find_area(known, area)
        sha = mark_area(path, target.name, obj.repo_root)
        click.echo(f"{target.name}: Checked: {sha} written to {path.name}")
        return
    chosen = [find_area(known, area)] if area is not None else known
    reports = [check_area(obj.repo_root, item, stale_commits=config.area_stale_commits) for item in chosen]
    if as_json:
        rows = [
            {
                "area": report.area.name,
                "slug": report.area.slug,
                "stale": report.stale,
                "missing_anchors": list(report.missing),
                "checked": report.area.checked,
                "unknown_checked": report.unknown_checked,
                "commits_since_checked": report.commits_since,
                "paths": list(report.area.paths),
                "test_recipe": report.area.test_recipe,
            }
            for report in reports
        ]
        click.echo(json.dumps({"notes_file": path.name, "areas": rows}))
        return
    if not reports:
        click.echo(f"no ## Areas section in {path.name}")
    for report in reports:
        click.echo(report.line())


@cli.command("list", epilog=EXIT_CODES_HELP)
@click.option("--lane", default=None, help="Only this lane's tasks.")
@click.option(
    "--runner",
    is_flag=True,
    help="Only the ids a runner may take now, in the lane's pick order (slice jobs as slice:<id>).",
)
@click.pass_obj
def list_tasks(obj: CliContext, lane: str | None, runner: bool) -> None:
    """The plan's tasks with their lane, Model, effort, effective priority and status."""
    from autodev.state.plan_markdown import TIER_NAMES
    from autodev.state.schemas import DEFAULT_TASK_TIER

    view, _, tasks = _lane_view(obj, lane)
    if runner:
        if lane is None:
            raise click.UsageError("--runner needs --lane: each lane has its own pick order")
        for pick in view.order(lane):
            click.echo(str(pick))
        return
    for task in tasks:
        if lane is not None and view.lane_of(task.id) != lane:
            continue
        slice_job = " slice" if view.is_slice_job(task.id) else ""
        click.echo(
            f"{task.id}\t{view.lane_of(task.id)}{slice_job}\t{TIER_NAMES[task.model or DEFAULT_TASK_TIER]}\t"
            f"{task.effort or '-'}\t{view.effective_priority(task.id)}\t{task.status}"
        )


@cli.group()
def task() -> None:
    """Change one task of the current plan."""


@task.command("set", epilog=EXIT_CODES_HELP)
@click.argument("task_id")
@click.option(
    "--model",
    required=True,
    help='The Model level its roles run on: haiku, sonnet or opus ("" gives the default, opus).',
)
@click.pass_obj
def task_set(obj: CliContext, task_id: str, model: str) -> None:
    """Set a task's Model level, recorded in the ledger (the next call of the task uses it)."""
    from autodev.state.plan_markdown import TIER_NAMES
    from autodev.state.schemas import DEFAULT_TASK_TIER

    obj.start_logging(create_state=True)
    changed = _offline(obj).set_task_model(task_id, model)
    level = TIER_NAMES[changed.model or DEFAULT_TASK_TIER]
    click.echo(f"Task {changed.id} now runs on {level}{'' if changed.model else ' (the default)'}.")


@cli.command("refresh-base", epilog=EXIT_CODES_HELP)
@click.option("--no-fetch", is_flag=True, help="Fast-forward to the base ref as it is, without fetching it.")
@click.pass_obj
def refresh_base(obj: CliContext, no_fetch: bool) -> None:
    """Fast-forward the checked-out branch to its base (its upstream, else origin/HEAD, origin/main or a local
    main). Refused, with nothing changed, while a run works, on uncommitted changes, and when local commits
    are not in the base."""
    import anyio

    obj.start_logging(create_state=True)
    orchestrator = _offline(obj)
    done = anyio.run(lambda: orchestrator.refresh_base(fetch=not no_fetch))
    click.echo(done[0].upper() + done[1:] + ".")


@cli.command(epilog=EXIT_CODES_HELP)
@click.pass_obj
def clean(obj: CliContext) -> None:
    """Remove what a crashed run left behind: its agent and tool processes, stale git locks, worktrees.

    Every start does this anyway; nothing recorded in the ledger is touched.
    """
    import anyio

    from autodev.orchestrator.inline_state import load_suspend_state

    obj.start_logging(create_state=True)
    orchestrator = _offline(obj)
    stopped = anyio.run(orchestrator.clean)
    if stopped:
        shown = ", ".join(str(pid) for pid in stopped[:10]) + (" ..." if len(stopped) > 10 else "")
        click.echo(f"Stopped {len(stopped)} leftover process(es) of an earlier run: {shown}.")
    else:
        click.echo("Found no leftover processes.")
    click.echo("Cleaned: no leftover processes, git locks, temp files or tournament worktrees remain.")
    if load_suspend_state(obj.paths) is not None:
        click.echo("An inline delegation is still pending; `autodev resume` continues it.")


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to create the scratch repository (default: a new temporary directory).",
)
@click.option("--force", is_flag=True, help="Reuse --dir even if it is not empty (its content is deleted).")
@click.pass_obj
def demo(obj: CliContext, directory: Path | None, force: bool) -> None:
    """Run the whole pipeline offline on a scratch repository, with scripted agents and real tools."""
    import tempfile

    from autodev.adapters.scripted import ScriptedAdapter
    from autodev.cli.demo import prepare_demo
    from autodev.config import load_config
    from autodev.orchestrator import Orchestrator

    _contain_children()
    target = directory if directory is not None else Path(tempfile.mkdtemp(prefix="autodev-demo-"))
    setup = prepare_demo(target, force=force)
    demo_obj = CliContext(setup.repo_root, obj.verbose)
    demo_obj.start_logging(create_state=True)
    click.echo(f"demo repository: {setup.repo_root}")
    click.echo(f"intent: {setup.intent}")
    # The scratch project has no environment of its own: its tests run in AutoDev's (plugins off), the same on
    # every machine, whatever python3 or activated environment the shell offers.
    config = load_config(setup.repo_root, overrides={"platform": "scripted", "environment.python": "autodev"})
    with _run_display(demo_obj) as display:
        orchestrator = Orchestrator(
            setup.repo_root, config=config, adapter=ScriptedAdapter(script=setup.script), listener=display
        )
        outcome = _drive(demo_obj, lambda: orchestrator.run(setup.intent))
    _finish(demo_obj, display, outcome.tasks, exit_after=False)
    click.echo("")
    click.echo("Where to look:")
    click.echo(f"  git -C {setup.repo_root} log --oneline      one commit per completed task")
    click.echo(f"  {setup.repo_root / '.autodev' / 'evidence'}   evidence of every step and attempt")
    click.echo(f"  autodev -C {setup.repo_root} status         the plan, task by task")
    click.echo(f"  autodev -C {setup.repo_root} ledger verify  the hash-chained ledger, checked")
    blocked = [task for task in outcome.tasks if task.status != "complete"]
    sys.exit(EXIT_FAILED if blocked else EXIT_OK)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--no-probe",
    is_flag=True,
    help="Skip the paid part of the agents' health check (a one-word answer from each installed CLI).",
)
@click.pass_obj
def doctor(obj: CliContext, no_probe: bool) -> None:
    """List every agent platform and QA tool, the project's environment, and what the gates would lack."""
    import anyio

    from autodev.adapters.detect import detect_platform, probe_platforms
    from autodev.agents.registry import build_registry
    from autodev.cli.render import print_agent_health, print_environment, print_probes
    from autodev.config import load_config
    from autodev.orchestrator.agent_health import check_installed
    from autodev.orchestrator.preflight import diagnose

    platforms = probe_platforms()
    print_probes("Agent platforms", platforms)
    config = load_config(obj.repo_root)
    health = anyio.run(
        lambda: check_installed(obj.repo_root, config, build_registry(), platforms, probe=not no_probe)
    )
    if health:
        print_agent_health(health, probed=not no_probe)
    # The same lookups the gates and the preflight make: the project's environment, then each tool.
    diagnosis = anyio.run(diagnose, obj.repo_root, config)
    print_probes("QA tools", diagnosis.tools)
    print_environment(diagnosis.resolution, diagnosis.problems)
    choice = detect_platform("auto")
    click.echo(f"--platform auto would use: {choice.name} ({choice.reason})")


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the status object as JSON.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="List every task (by default: those in flight, blocked and next; the rest counted per phase).",
)
@click.option(
    "--watch",
    "follow",
    is_flag=True,
    help="Follow the run live until it ends (the same as `autodev watch`).",
)
@click.pass_obj
def status(obj: CliContext, as_json: bool, show_all: bool, follow: bool) -> None:
    """Show the plan and its tasks' status. Read-only: safe while a run is going."""
    from autodev.state.status_reader import read_status

    if follow:
        _watch(obj, interval_s=1.0)
        return
    if obj.verbose:
        obj.start_logging(create_state=False)
    data = read_status(obj.repo_root)
    data["missing_commits"] = _missing_commits(obj.repo_root, data)
    _add_lanes(obj.repo_root, data["tasks"])
    if as_json:
        # Compact on purpose: json.dumps with indent falls back to the pure-Python encoder. JSON escapes every
        # control character, so the content needs no cleaning for a terminal.
        sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
        return
    from autodev.cli.render import print_status

    print_status(data, obj.repo_root, show_all=show_all)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--interval", "interval_s", type=click.FloatRange(0.1, 60), default=1.0, help="Seconds between looks."
)
@click.pass_obj
def watch(obj: CliContext, interval_s: float) -> None:
    """Follow a run from another terminal until it ends: tasks in flight with their step, time at it and what
    they wait for, what each agent did last, recent events, the running cost. Read-only, takes no lock."""
    _watch(obj, interval_s=interval_s)


def _watch(obj: CliContext, *, interval_s: float) -> None:
    from autodev.cli.render import _console
    from autodev.cli.watch import watch as follow_run

    data = follow_run(obj.repo_root, _console(), interval_s=interval_s)
    totals = data.get("totals") or {}
    click.echo(
        f"No run is going: {totals.get('complete', 0)} of {totals.get('total', 0)} task(s) complete, "
        f"{totals.get('blocked', 0)} blocked."
    )


def _add_lanes(repo_root: Path, tasks: list[dict[str, Any]]) -> None:
    """Give each status task its ``lane`` and whether it is a ``slice_job``.

    Both None when no task has an Effort line (lanes sort work by effort; reading the configuration would
    double the time `autodev status` takes for nothing) or when the configuration does not load (the
    status of a run must show whatever is wrong with its configuration).
    """
    config = None
    if any(task.get("effort") for task in tasks):
        from autodev.config import load_config

        try:
            config = load_config(repo_root)
        except AutodevError:
            config = None
    if config is None:
        for task in tasks:
            task["lane"] = task["slice_job"] = None
        return
    from autodev.state.schemas import EFFORTS

    sliced = {task["parent"] for task in tasks if task.get("parent")}
    for task in tasks:
        effort = task.get("effort")
        big = effort is not None and EFFORTS.index(effort) > EFFORTS.index(config.slice_above)
        task["lane"] = config.lane_of(effort, slice_job=big)
        task["slice_job"] = big and task["status"] == "pending" and task["id"] not in sliced


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the totals and rows as JSON.")
@click.option(
    "--by",
    default="task",
    show_default=True,
    help="One row per task, role, model, phase, lane or effort; several, comma-separated, give one row "
    "per combination (--by lane,model,effort).",
)
@click.pass_obj
def cost(obj: CliContext, as_json: bool, by: str) -> None:
    """What the current plan's agent calls cost, from the ledger: every call counted (retries, repairs,
    tournaments, refused calls), estimates marked, unknown costs shown as unknown. Read-only."""
    from autodev.state.costs import GROUPINGS, Grouping, TaskFacts, cost_report
    from autodev.state.plan_manager import PlanManager

    groupings = [part.strip() for part in by.split(",") if part.strip()]
    unknown = [part for part in groupings if part not in GROUPINGS]
    if not groupings or unknown:
        raise click.BadParameter(
            f"{', '.join(unknown) or 'nothing'} is not a grouping; give {', '.join(GROUPINGS)}",
            param_hint="--by",
        )
    if obj.verbose:
        obj.start_logging(create_state=False)
    facts: dict[str, TaskFacts] = {}
    with PlanManager.open(obj.repo_root, readonly=True) as manager:
        plan_id = manager.plan.plan_id if manager.has_plan else None
        if {"lane", "effort"} & set(groupings) and manager.has_plan:
            from autodev.config import load_config
            from autodev.orchestrator.lanes import LaneView

            view = LaneView(manager.tasks(), load_config(obj.repo_root))
            facts = {task.id: TaskFacts(view.lane_of(task.id), task.effort) for task in manager.tasks()}
        report = cost_report(manager.usage_entries(), by=cast("list[Grouping]", groupings), tasks=facts)
    if as_json:
        sys.stdout.write(json.dumps({"plan_id": plan_id, **report.as_json()}, separators=(",", ":")) + "\n")
        return
    from autodev.cli.render import print_cost

    print_cost(report, plan_id)


@cli.group()
def ledger() -> None:
    """Inspect the append-only ledger (.autodev/ledger.jsonl)."""


@ledger.command("verify", epilog=EXIT_CODES_HELP)
@click.pass_obj
def ledger_verify(obj: CliContext) -> None:
    """Check the hash chain, replay every entry, and check recorded evidence files."""
    from autodev.state.verify import verify_state

    obj.start_logging(create_state=False)
    report = verify_state(obj.repo_root)
    for line in report.lines():
        click.echo(line)
    missing = _missing_commits(obj.repo_root)
    if missing:
        click.echo(f"FAILED: recorded commits not on the checked-out branch: {', '.join(missing)}")
    if not report.ok or missing:
        sys.exit(EXIT_FAILED)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("task_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the activity as JSON.")
@click.pass_obj
def peek(obj: CliContext, task_id: str | None, as_json: bool) -> None:
    """What the agents of TASK (default: every task in flight) did most recently: tool calls and messages
    from their own event streams, newest last. Reads only; safe beside a running run."""
    from dataclasses import asdict

    from autodev.state.activity import task_activity
    from autodev.state.status_reader import read_status

    status = read_status(obj.repo_root)
    if task_id is not None:
        if not any(task["id"] == task_id for task in status["tasks"]):
            raise AutodevError(f"task {task_id!r} is not in the plan; `autodev status` lists the tasks")
        wanted = [task_id]
    else:
        wanted = [task["id"] for task in status["in_flight"]]
    limit = _peek_limit(obj.repo_root)
    calls = [
        call for wanted_id in wanted for call in task_activity(obj.repo_root, wanted_id, max_entries=limit)
    ]
    if as_json:
        click.echo(json.dumps([asdict(call) for call in calls], indent=2))
        return
    if not calls:
        what = f"task {task_id}" if task_id else "the tasks in flight"
        click.echo(f"No agent activity recorded for {what} (the inline and scripted platforms record none).")
        return
    from autodev.cli.text import terminal_text

    for call in calls:
        click.echo(
            terminal_text(f"{call.task_id} {call.role} (attempt {call.attempt}, started {call.started}):")
        )
        for entry in call.entries:
            # An agent's words may carry escape sequences: shown as text, never acted on by the terminal.
            click.echo(f"  {'>' if entry.kind == 'tool' else '-'} {terminal_text(entry.text)}")


def _peek_limit(repo_root: Path) -> int:
    from autodev.config import load_config
    from autodev.config.schema import AutodevConfig

    try:
        return load_config(repo_root).peek_max_entries
    except AutodevError:
        # A configuration that cannot be read must not hide what the agents do.
        return AutodevConfig.model_fields["peek_max_entries"].default  # type: ignore[no-any-return]


@cli.group()
def policy() -> None:
    """The delegation policy's decision log."""


@policy.command("replay", epilog=EXIT_CODES_HELP)
@click.option(
    "--candidate",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A JSON object of [policy] settings to re-decide the log with (default: the current ones).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def policy_replay(obj: CliContext, candidate: Path | None, as_json: bool) -> None:
    """Re-decide every logged delegation decision offline; nothing is started or written."""
    from autodev.orchestrator.run_policy import replay_log

    report = replay_log(obj.repo_root, candidate)
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    click.echo(
        f"{report.decisions} decision(s): {report.exact_matches} exact match(es) "
        f"({report.match_ratio:.0%}); {report.legacy_skipped} agent call(s) before the log (legacy, "
        f"skipped); {len(report.invalid)} invalid"
    )
    click.echo(f"routes then: {_counts(report.recorded_routes)}; now: {_counts(report.replayed_routes)}")
    click.echo(f"capability units of the spawns then: {report.recorded_units}; now: {report.replayed_units}")
    for transition, count in report.transitions.items():
        click.echo(f"  {count} x {transition}")
    for invalid in report.invalid:
        click.echo(f"  invalid entry {invalid.seq}: {invalid.problem}")
    click.echo(report.note)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{route} {count}" for route, count in counts.items()) or "none"


@cli.group()
def router() -> None:
    """The learning router's recorded routes and outcomes."""


@router.command("replay", epilog=EXIT_CODES_HELP)
@click.option(
    "--preferences",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A TOML or JSON file of pins, exclusions and quality floors to re-recommend the routes under.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def router_replay(obj: CliContext, preferences: Path | None, as_json: bool) -> None:
    """Report the recorded routes and their outcomes offline; nothing is started or written."""
    from autodev.orchestrator.run_router import router_replay as replay_routes

    report = replay_routes(obj.repo_root, preferences)
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    figures = report.figures
    coverage = f"{report.coverage:.0%}" if report.coverage is not None else "n/a"
    click.echo(
        f"{report.routes} route(s), {report.recommended} with a recommendation (coverage {coverage}); "
        f"{report.calls} call(s) made, {report.shadow_alternatives} where the recommendation was another "
        f"route, {report.manual_selections} manual"
    )
    if preferences is not None:
        click.echo(f"under {preferences}: {report.changed_recommendations} recommendation(s) changed")
        for change, count in report.changes.items():
            click.echo(f"  {count} x {change}")
        for reason, count in report.pins_refused.items():
            click.echo(f"  {count} pin(s) not followed: {reason}")
    rate = f"{figures.pass_rate:.0%}" if figures.pass_rate is not None else "n/a"
    click.echo(
        f"outcomes: {figures.passed} passed, {figures.retried} retried, {figures.blocked} blocked, "
        f"{figures.open} open (pass rate {rate}); {report.retries} retries"
    )
    mean = f"{figures.latency_s_mean:.1f}" if figures.latency_s_mean is not None else "n/a"
    click.echo(
        f"latency: {figures.latency_s_total:.1f} s in all, {mean} s a call; cost "
        f"${figures.cost_usd_known:.4f} known, {figures.calls_cost_unknown} call(s) unknown; "
        f"{figures.normalized_cost_units} capability units"
    )
    click.echo(f"human interventions: {_counts(report.interventions)}")
    click.echo(f"policy violations: {_counts(report.policy_violations)}")
    click.echo(f"autonomy: {report.autonomy.summary()}")
    click.echo(
        f"{report.legacy_skipped} record(s) from before routing (legacy, skipped); {report.not_routed} "
        f"decision(s) not routed; {len(report.invalid)} invalid"
    )
    for invalid in report.invalid:
        click.echo(f"  invalid entry {invalid.seq}: {invalid.problem}")
    click.echo(f"This is {report.note}.")


@router.command("status", epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@click.pass_obj
def router_status(obj: CliContext, as_json: bool) -> None:
    """The completed shadow outcomes and whether router.mode = autonomous may be set."""
    from autodev.config import load_config
    from autodev.orchestrator.run_router import router_status as status_of

    found = status_of(obj.repo_root)
    mode = load_config(obj.repo_root).router.mode
    if as_json:
        payload = {"mode": mode, **found.model_dump(mode="json"), "autonomous_allowed": found.allowed}
        click.echo(json.dumps(payload, indent=2))
        return
    verdict = "may" if found.allowed else "may not"
    click.echo(f"router.mode = {mode}; {found.summary()}: autonomous {verdict} be set")


def _missing_commits(repo_root: Path, status: dict[str, Any] | None = None) -> list[str]:
    """Tasks recorded complete with a commit that the checked-out branch no longer holds."""
    from autodev.state.status_reader import read_status

    try:
        tasks = (status if status is not None else read_status(repo_root)).get("tasks", [])
    except AutodevError:
        return []  # the state itself is unreadable: that is what the rest of the report says
    landed = {task["id"]: task["commit"] for task in tasks if task.get("commit")}
    if not landed:
        return []
    from autodev.gitsafety import missing_landed_commits

    return missing_landed_commits(repo_root, landed)


@cli.group("config")
def config_group() -> None:
    """Inspect the effective configuration."""


@config_group.command("show", epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the effective configuration as JSON.")
@click.pass_obj
def config_show(obj: CliContext, as_json: bool) -> None:
    """Print every setting, its value, and where the value came from.

    Precedence: defaults < [tool.autodev] in pyproject.toml < .autodev/config.toml < AUTODEV_* environment
    variables < command-line flags.
    """
    from autodev.config import explain_config, load_config

    if as_json:
        config = load_config(obj.repo_root)
        sys.stdout.write(config.model_dump_json(indent=2) + "\n")
        return
    from autodev.cli.render import print_config

    print_config(explain_config(obj.repo_root))


def _run_display(obj: CliContext) -> Any:
    from autodev.cli.live import LiveDisplay

    return LiveDisplay(repo_root=obj.repo_root)


def _drive(obj: CliContext, call: Any, *, waiting: _Waiting | None = None) -> Any:
    """Run one orchestrator coroutine; an inline delegation suspends the run with exit code 3.

    With ``waiting`` (``--wait``), a pause by the agent's provider is waited out on the display's countdown
    and the run resumed (``waiting.resume``), up to ``provider.max_waits`` times; what it returns is then
    ``waiting.resume``'s result.
    """
    import anyio

    from autodev.adapters.base import DelegationPendingSignal
    from autodev.orchestrator.provider_guard import ProviderRefusedError, wait_before_resuming

    waits = 0
    try:
        while True:
            try:
                return anyio.run(call)
            except ProviderRefusedError as refused:
                settings = waiting.orchestrator.config.provider if waiting is not None else None
                seconds = None if settings is None else wait_before_resuming(refused, settings)
                if waiting is None or settings is None or seconds is None or waits >= settings.max_waits:
                    raise
                waits += 1
                _log_wait(refused, seconds, waits)
                waiting.display.count_down(seconds, refused.kind.replace("_", " "))
                call = waiting.resume
    except DelegationPendingSignal as signal:
        click.echo("")
        click.echo(f"Suspended: the {signal.role} step of {signal.task_id} waits for an agent's answer.")
        click.echo(f"  instructions: {signal.delegation_path}")
        click.echo(f"  answer to:    {signal.response_path}")
        click.echo("Then run `autodev resume`.")
        sys.exit(EXIT_SUSPENDED)


def _planning_began(obj: CliContext, session_id: str) -> bool:
    """Whether this run recorded itself in the ledger, which its plan phase does first, with its intent:
    stopped earlier (in the checks of the project before planning), ``autodev resume`` would not know the
    intent, or would carry on with a plan made before it."""
    from autodev.state.plan_manager import PlanManager

    try:
        with PlanManager.open(obj.repo_root, readonly=True) as manager:
            return manager.session_id == session_id
    except (AutodevError, OSError):
        return True  # unknown: the usual advice, whose `autodev resume` says what it finds


@dataclass(frozen=True, slots=True)
class _Waiting:
    """What ``--wait`` needs: the display that counts down, and how the command resumes after a wait."""

    orchestrator: Any
    display: Any
    resume: Any


def _waiting(wait: bool, orchestrator: Any, display: Any, allow_detached: bool) -> _Waiting | None:
    # The same flag makes a run with nothing left but tasks waiting for an approval wait for the answer.
    orchestrator.wait_for_approval = wait
    if not wait:
        return None
    return _Waiting(orchestrator, display, lambda: orchestrator.resume(allow_detached=allow_detached))


def _log_wait(refused: Any, seconds: float, waits: int) -> None:
    from autodev.logging import get_logger

    get_logger("autodev.cli").warning(
        "cli.provider_wait",
        kind=refused.kind,
        wait_s=round(seconds, 1),
        resets_at=refused.resets_at.isoformat() if refused.resets_at else None,
        waits=waits,
    )


def _print_plan_for_approval(obj: CliContext, plan: Any) -> None:
    from autodev.cli.render import print_status
    from autodev.state.status_reader import read_status

    print_status(read_status(obj.repo_root), obj.repo_root)
    click.echo(f"Plan {plan.plan_id} waits for your approval: `autodev approve`, then `autodev execute`.")


def _finish(obj: CliContext, display: Any, tasks: list[Any], *, exit_after: bool = True) -> None:
    import time

    from autodev.cli.live import print_summary
    from autodev.cli.render import cost_figure
    from autodev.cli.text import ReaderMayLeaveConsole
    from autodev.state.plan_manager import PlanManager
    from autodev.state.vocabulary import DONE_STATUSES

    manager = PlanManager.open(obj.repo_root, readonly=True)
    everything = manager.tasks() if manager.has_plan else tasks
    known, unknown = manager.cost_usd_total, manager.unknown_cost_calls
    print_summary(
        ReaderMayLeaveConsole(),
        everything,
        cost_figure(
            known if known or not unknown else None,
            estimated_usd=manager.estimated_cost_usd,
            unknown_calls=unknown,
        ),
        time.monotonic() - display.started,
        obj.paths.evidence_dir,
    )
    if exit_after:
        blocked = any(task.status == "blocked" for task in everything)
        unfinished = any(task.status not in DONE_STATUSES for task in tasks)
        sys.exit(EXIT_FAILED if blocked or unfinished else EXIT_OK)


cli.add_command(tournament)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: map library errors to one line and an exit code, never a traceback."""
    from autodev.cli.stopping import interruption, stop_in_order_on_termination
    from autodev.faults import environment_fault

    stop_in_order_on_termination()
    stdout = sys.stdout
    try:
        code: Any = cli.main(args=argv, prog_name="autodev", standalone_mode=False)
        # Output still buffered for a reader that left must fail here, not at interpreter exit.
        sys.stdout.flush()
    except (BrokenPipeError, SystemExit) as exc:
        # click answers a broken pipe inside a command with exit 1, once it has swapped stdout for a wrapper
        # that hides the next errors: the swap tells that exit apart from a command's own.
        if isinstance(exc, SystemExit) and sys.stdout is stdout:
            raise
        # `autodev status | head -1`: the reader left; that is not an error of ours.
        from autodev.cli.text import stop_writing_stdout

        stop_writing_stdout()
        sys.exit(EXIT_OK)
    except AutodevError as exc:
        # State that could not be written because the disk is full (or the like) pauses resumably.
        fault = None if isinstance(exc, EnvironmentFaultError) else environment_fault(exc, "the command")
        _echo_error((fault or exc).message)
        sys.exit((fault or exc).exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        # One line, like every other user error; --help shows the full usage.
        _echo_error(f"{exc.format_message()} (see `autodev --help`)")
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        # The machine refused (disk full, permissions, a file that vanished): not a bug, and nothing to
        # show a traceback for.
        fault = environment_fault(exc, "the command")
        if fault is not None:
            _echo_error(fault.message)
            sys.exit(fault.exit_code)
        where = f" ({exc.filename})" if exc.filename else ""
        _echo_error(f"{exc.strerror or exc}{where}; free disk space or fix permissions, then try again")
        sys.exit(EXIT_USAGE)
    except (click.Abort, KeyboardInterrupt):
        message, exit_code = interruption()
        # After SIGHUP the terminal may be gone: the exit code still tells whoever is left.
        with contextlib.suppress(OSError):
            click.echo(message, err=True)
        sys.exit(exit_code)
    except Exception as exc:
        from autodev.logging import get_logger

        get_logger("autodev.cli").exception("cli.internal_error")
        verbose = any(flag in (argv if argv is not None else sys.argv) for flag in ("-v", "--verbose"))
        if verbose:
            raise
        _echo_error(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in AutoDev. "
            "Run the command again with -v to see the traceback, and report it."
        )
        sys.exit(EXIT_FAILED)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
