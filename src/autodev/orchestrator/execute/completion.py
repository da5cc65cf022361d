"""A task's completion contract: what must be proven, by AutoDev itself, before a change is committed.

When a task's change has passed its gates, its review and its tests, its acceptance criteria become a
contract with a deterministic eval plan:

- **gate checks**: the build, test and lint gates AutoDev ran on this revision (their evidence decides);
- **command checks**: a criterion that is a command in backticks, alone or followed by "passes" (also
  "succeeds", "works", "exits 0", "returns 0"), such as `` `pytest tests/test_cli.py -q` passes ``, is run by
  AutoDev in the task's checkout, one at a time, argv without a shell, the program allowlisted by name
  (``completion.allowed_programs``); shell syntax or an unlisted program is refused and the check recorded
  ``blocked`` with why; its exit status, a bounded excerpt and a digest of its real output are kept;
- **semantic checks**: every other criterion, settled by the reviewer's approval of this change (a worker
  settles only these; nothing a worker reports can close a gate or command check);
- **the verifier's family** (``verifier:family``, unless ``completion.cross_family = off``): when the
  developer ran on an agent CLI, the review that settles the semantic checks must have run on another
  family. Without one the check is ``waived`` by the configuration (``warn``: the verdict says
  ``verified_with_waiver``) or ``blocked`` until the user waives it for that revision
  (``require_approval``). Scripted and inline answers belong to no family: no such check.

Verdict: every required check passes (or is ``settled``) → ``verified``; some fail → ``changes_requested``
(the attempt fails with their output and the developer tries again); some are blocked → the task is blocked,
failing closed, unless the user waived exactly those checks for exactly this revision (``autodev waive``) →
``verified_with_waiver``. Past ``completion.verify_timeout_s`` the checks not finished are recorded blocked
and the verdict is ``timed_out``: the task is blocked, distinct from a check that could not be built at all.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autodev.config.schema import AGENT_CLIS, CrossFamilyPolicy
from autodev.errors import AutodevError
from autodev.qa.environment import ProjectEnvironment
from autodev.qa.runner import CheckSpec, run_check
from autodev.state.schemas import (
    CompletionEvidence,
    CompletionVerdict,
    GateCheck,
    RequiredCheck,
    RequiredCheckStatus,
    Task,
)

__all__ = [
    "FAMILY_CHECK",
    "CompletionBlockedError",
    "ContractBinding",
    "command_of",
    "completion_verdict",
    "family_check",
    "required_checks",
    "run_contract",
]

FAMILY_CHECK = "verifier:family"


class CompletionBlockedError(AutodevError):
    """A required check could not be run (refused, missing, past the deadline): the task is blocked, failing
    closed, until the criterion is fixed or the check waived for this revision."""


# A criterion that is a command check: the command in backticks, then only that it passes (or nothing).
_COMMAND = re.compile(
    r"^\s*`(?P<command>[^`]+)`\s*(?:(?:passes|succeeds|works|exits (?:with )?0|returns 0)\s*\.?)?\s*$",
    re.IGNORECASE,
)
# What only a shell would make sense of: never passed to one, so refused rather than misread.
_SHELL_SYNTAX = re.compile(r"[;|&$<>`\n\r()\\]")
_REQUIRED_GATES = ("build", "test", "lint")


def command_of(criterion: str) -> str | None:
    """The command of a command criterion: the whole criterion is a backticked command, alone or followed
    by ``passes``, ``succeeds``, ``works``, ``exits 0`` or ``returns 0``; None for any other criterion
    (```autodev areas core` shows the area not stale`` is for the reviewer to judge)."""
    match = _COMMAND.match(criterion)
    return match["command"].strip() if match else None


def required_checks(
    task: Task, gate_checks: Sequence[GateCheck]
) -> tuple[list[RequiredCheck], list[tuple[str, str, str]]]:
    """The contract's gate and semantic checks, settled from evidence, and the commands still to run:
    ``(check id, command, criterion)`` per command criterion, in order (ids ``command:<n>``)."""
    checks: list[RequiredCheck] = []
    by_gate = {check.gate: check for check in gate_checks}
    for gate in _REQUIRED_GATES:
        found = by_gate.get(gate)
        if found is None:
            continue
        # A repository with no tests at all passes its test gate as "no tests" (said, not hidden): there
        # is nothing to prove or to fail here.
        status: RequiredCheckStatus = (
            "pass" if found.counts_as_pass else "settled" if found.status == "no_tests" else "fail"
        )
        checks.append(
            RequiredCheck(
                id=f"gate:{gate}",
                kind="gate",
                description=f"the {gate} gate ({found.status})",
                status=status,
                reason=found.skipped_by or found.reason,
            )
        )
    commands: list[tuple[str, str, str]] = []
    for number, criterion in enumerate(task.acceptance, start=1):
        command = command_of(criterion.description)
        if command is None:
            checks.append(
                RequiredCheck(
                    id=f"semantic:{number}",
                    kind="semantic",
                    description=criterion.description,
                    status="settled",
                    reason="the reviewer approved this change against it",
                )
            )
        else:
            commands.append((f"command:{number}", command, criterion.description))
    return checks, commands


def _refusal(command: str, allowed: Sequence[str]) -> str | None:
    """Why ``command`` may not run (shell syntax, an unlisted program), or None."""
    if _SHELL_SYNTAX.search(command):
        return "it uses shell syntax (; | & $ < > backquotes, parentheses): commands run without a shell"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"it cannot be split into arguments ({exc})"
    if not argv:
        return "it is empty"
    program = Path(argv[0]).name
    if "/" in argv[0] or program not in allowed:
        return f"{argv[0]!r} is not an allowed program (completion.allowed_programs: {', '.join(allowed)})"
    return None


def _argv(command: str, environment: ProjectEnvironment | None) -> list[str]:
    """The argv a command runs as: ``python`` is the project's interpreter and ``pytest`` its pytest."""
    argv = shlex.split(command)
    if environment is None:
        return argv
    if argv[0] in ("python", "python3"):
        return [environment.python, *argv[1:]]
    if argv[0] == "pytest":
        return [environment.python, "-m", "pytest", *argv[1:]]
    tool = environment.tool(argv[0])
    return [str(tool), *argv[1:]] if tool is not None else argv


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractBinding:
    """What a contract is bound to: the exact revision (tree) and checkout it checks, the checkout's HEAD
    and branch, what the change was made from (base ref and commit), who made it (the developer's platform
    and agent session), who verified it (the reviewer's platform), and AutoDev's session that checked."""

    revision: str
    checkout: Path
    head: str | None = None
    branch: str | None = None
    base_ref: str | None = None
    base_commit: str | None = None
    implemented_on: str | None = None
    verified_on: str | None = None
    worker_session: str | None = None
    run_session: str | None = None


def family_check(
    policy: CrossFamilyPolicy, implemented_on: str | None, verified_on: str | None
) -> RequiredCheck | None:
    """The ``verifier:family`` check (module docstring); None when there is none to make."""
    if policy == "off" or implemented_on not in AGENT_CLIS:
        return None
    description = f"reviewed on another agent CLI family than the developer's ({implemented_on})"
    if verified_on is not None and verified_on != implemented_on:
        return RequiredCheck(
            id=FAMILY_CHECK,
            kind="semantic",
            description=description,
            status="pass",
            reason=f"reviewed on {verified_on}",
        )
    why = f"reviewed on {verified_on} too" if verified_on else "no review of this attempt was recorded"
    if policy == "warn":
        status: RequiredCheckStatus = "waived"
        reason = f"{why}; completion.cross_family = warn accepts that"
    else:
        status = "blocked"
        reason = (
            f"{why}, and completion.cross_family = require_approval: set completion.verify_platform to "
            "another agent CLI, or waive this check for this revision"
        )
    return RequiredCheck(
        id=FAMILY_CHECK, kind="semantic", description=description, status=status, reason=reason
    )


async def run_contract(
    *,
    task: Task,
    attempt: int,
    binding: ContractBinding,
    cross_family: CrossFamilyPolicy,
    gate_checks: Sequence[GateCheck],
    environment: ProjectEnvironment | None,
    allowed: Sequence[str],
    check_timeout_s: float,
    verify_timeout_s: float,
    waived: frozenset[str],
) -> CompletionEvidence:
    """Open ``task``'s contract for ``binding``'s revision, run its command checks, and judge it."""
    checks, commands = required_checks(task, gate_checks)
    family = family_check(cross_family, binding.implemented_on, binding.verified_on)
    if family is not None:
        checks.append(family)
    deadline = time.monotonic() + verify_timeout_s
    timed_out = False
    env = dict(environment.env) if environment is not None else {}
    for check_id, command, description in commands:
        refused = _refusal(command, allowed)
        left = deadline - time.monotonic()
        if refused is not None:
            checks.append(_blocked(check_id, description, f"refused: {refused}"))
            continue
        argv = _argv(command, environment)
        if left <= 0:
            timed_out = True
            late = f"not run: past completion.verify_timeout_s ({verify_timeout_s:g} s)"
            checks.append(_blocked(check_id, description, late, argv))
            continue
        result = await run_check(
            CheckSpec(tuple(argv), binding.checkout, min(check_timeout_s, left), env=env)
        )
        if result.status == "timeout" and time.monotonic() >= deadline:
            timed_out = True
        status = "pass" if result.status == "pass" else ("blocked" if result.tool_missing else "fail")
        checks.append(
            RequiredCheck(
                id=check_id,
                kind="command",
                description=description,
                status=status,
                argv=list(result.argv),
                exit_code=result.exit_code,
                reason=result.reason,
                output_sha256=result.output_sha256,
                output_excerpt=result.output_excerpt,
            )
        )
    checks = [
        check.model_copy(update={"status": "waived"})
        if check.status == "blocked" and check.id in waived
        else check
        for check in checks
    ]
    return CompletionEvidence(
        task_id=task.id,
        attempt=attempt,
        verdict=completion_verdict(checks, timed_out=timed_out),
        revision=binding.revision,
        checkout=str(binding.checkout),
        head=binding.head,
        checks=checks,
        branch=binding.branch,
        base_ref=binding.base_ref,
        base_commit=binding.base_commit,
        implemented_on=binding.implemented_on,
        verified_on=binding.verified_on,
        session_id=binding.worker_session,
        run_session=binding.run_session,
    )


def _blocked(check_id: str, description: str, reason: str, argv: Sequence[str] = ()) -> RequiredCheck:
    return RequiredCheck(
        id=check_id, kind="command", description=description, status="blocked", argv=list(argv), reason=reason
    )


def completion_verdict(checks: Sequence[RequiredCheck], *, timed_out: bool = False) -> CompletionVerdict:
    """The contract's verdict from its checks (module docstring)."""
    if timed_out:
        return "timed_out"
    statuses = {check.status for check in checks}
    if "blocked" in statuses:
        return "blocked"
    if "fail" in statuses:
        return "changes_requested"
    return "verified_with_waiver" if "waived" in statuses else "verified"
