"""The ``autodev`` command: parse, call one library function, render. No orchestration logic lives here.

Heavy imports (pydantic models, rich) happen inside the commands that need them, so ``autodev --help``
and ``autodev status --json`` start fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autodev._version import __version__
from autodev.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AutodevError

if TYPE_CHECKING:
    from autodev.state.paths import AutodevPaths

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  work blocked or failed (or an internal error)
  2  usage, configuration or input error
  3  suspended (waiting for an inline agent, a plan approval or a budget raise)"""


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
            configure_logging(paths.log_file, verbose=self.verbose)
        elif self.verbose:
            configure_logging(None, verbose=True)
        else:
            configure_quiet_logging()


def _echo_error(message: str) -> None:
    click.echo(f"error: {message}", err=True)


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


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--from-markdown",
    "markdown_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="A plan written in the canonical plan markdown (see docs/plan-format.md).",
)
@click.option("--replace", is_flag=True, help="Replace a current plan that already has work on it.")
@click.pass_obj
def plan(obj: CliContext, markdown_file: Path, replace: bool) -> None:
    """Parse a hand-written plan and save it as the current plan."""
    from autodev.cli.render import plan_summary
    from autodev.config import load_config
    from autodev.errors import PlanParseError
    from autodev.orchestrator.plan_parser import parse_plan_markdown
    from autodev.state.hashing import sha256_hex
    from autodev.state.paths import normalize_repo_path
    from autodev.state.plan_manager import PlanManager

    config = load_config(obj.repo_root)
    try:
        markdown = markdown_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanParseError("file not found", source=str(markdown_file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanParseError(f"cannot read it as UTF-8 text ({exc})", source=str(markdown_file)) from exc
    spec = obj.paths.spec
    spec_hash = sha256_hex(spec.read_bytes() if spec.is_file() else markdown.encode("utf-8"))[:16]
    parsed = parse_plan_markdown(markdown, spec_hash, source=str(markdown_file))
    for task in parsed.iter_tasks():
        for path in task.files:
            normalize_repo_path(path, obj.repo_root, context=f"{markdown_file}: task {task.id}")
    obj.start_logging(create_state=True)
    import secrets

    session_id = f"sess-{secrets.token_hex(6)}"
    with PlanManager(obj.repo_root, lock_timeout_s=config.lock_timeout_s) as manager:
        saved = manager.init_plan(parsed, session_id=session_id, replace=replace)
    click.echo(plan_summary(saved))
    click.echo("Next: `autodev status` shows it task by task.")


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the status object as JSON.")
@click.pass_obj
def status(obj: CliContext, as_json: bool) -> None:
    """Show the plan and every task's status. Read-only: safe while a run is going."""
    from autodev.state.status import read_status

    if obj.verbose:
        obj.start_logging(create_state=False)
    data = read_status(obj.repo_root)
    if as_json:
        # Compact on purpose: json.dumps with indent falls back to the pure-Python encoder.
        sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
        return
    from autodev.cli.render import print_status

    print_status(data, obj.repo_root)


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
    if not report.ok:
        sys.exit(EXIT_FAILED)


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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: map library errors to one line and an exit code, never a traceback."""
    try:
        code: Any = cli.main(args=argv, prog_name="autodev", standalone_mode=False)
    except AutodevError as exc:
        _echo_error(exc.message)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # `autodev status | head`: the reader left; that is not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_OK)
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
