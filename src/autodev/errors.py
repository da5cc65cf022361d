"""The one error tree of AutoDev.

Every failure a user can cause, or must act on, is an ``AutodevError`` with a one-line message that says
what is wrong and how to fix it. The CLI prints that line and exits with ``exit_code``; it never prints a
traceback for these. Errors from below (``OSError``, ``ValidationError``, ``CalledProcessError``) are
translated at the boundary with ``raise ... from exc``.

::

    AutodevError                      exit 2 unless noted; where a class is defined if not here
    ├── ConfigError                   bad or unknown configuration key/value (file, key, allowed values)
    ├── PlanParseError                plan markdown that cannot be parsed (line number)
    ├── PlanNotFoundError             a command needs a plan and there is none
    ├── PlanExistsError               a new plan would replace one that is still in use
    ├── PlanPhaseError                an agent step of the plan phase failed (exit 1; orchestrator.plan_phase)
    ├── PlanNotApprovedError          the plan waits for approval (exit 3; orchestrator.execute_phase)
    ├── TaskNotFoundError             a task id that is not in the plan
    ├── InvalidTransitionError        a task status change the state machine forbids
    ├── PathEscapeError               a path that resolves outside the repository
    ├── RepositoryError               the checkout cannot be worked in as it is (not a git repository)
    │   ├── UnsafeRepositoryError     git refuses a repository another user owns (safe.directory)
    │   └── DetachedHeadError         HEAD is detached in the main checkout (no --allow-detached)
    ├── WorkingTreeDirtyError         uncommitted changes where a run would start (orchestrator.execute_phase)
    ├── MainTreeChangedError          the main checkout changed under a merge (orchestrator.workspace)
    ├── RepositoryChangedError        an agent moved refs or wrote outside its working copy (exit 3;
    │                                 orchestrator.integrity)
    ├── GitError                      a git command AutoDev needs failed (orchestrator.git)
    ├── WorktreeError                 a worktree cannot be made, reset or removed (orchestrator.worktree)
    ├── PreflightError                the gates cannot do their work here (orchestrator.preflight)
    ├── StateError                    the .autodev/ state cannot be read or written
    │   ├── LedgerCorruptError        the hash chain is broken (line number)
    │   ├── SnapshotError             plan.json cannot be written
    │   ├── EvidenceError             an evidence file cannot be written or read
    │   ├── LedgerRelayError          the run's ledger refused a remote worker's change (state.relay)
    │   └── InlineStateError          inline-state.json is malformed
    ├── LockHeldError                 another process holds the .autodev lock (holder's pid)
    ├── InvalidResponseError          an inline answer that is not a valid response (adapters.inline)
    ├── ResponseMissingError          `autodev resume` before the inline answer was written (exit 3;
    │                                 orchestrator.core)
    ├── DelegationHeldError           the delegation policy did not let a call run (exit 3;
    │                                 orchestrator.delegation_policy)
    ├── DelegationRejectedError       the delegation policy will never let a call run as asked: its
    │                                 task is blocked (exit 1; orchestrator.run_policy)
    ├── OutsideScopeError             a writer changed files outside the authorized write scope: its task
    │                                 is blocked (orchestrator.execute.task_flow)
    ├── ScopeError                    a write scope that cannot be used as written (policy.scope)
    ├── StaleBaseError                the checkout is too far behind its base to build on unasked (exit 3;
    │                                 orchestrator.base_check)
    ├── CompletionBlockedError        a required completion check could not run: its task is blocked until
    │                                 it is fixed or waived (orchestrator.execute.completion)
    ├── EvidenceReferenceError        an evidence selection naming a record that is malformed, repeated,
    │                                 missing, foreign or abandoned (orchestrator.execute.results)
    ├── AdoptionPendingError          a run ended with verified changes waiting for adoption (exit 3;
    │                                 orchestrator.execute.adoption)
    ├── AdoptionRefusedError          `autodev adopt` could not land a waiting change; it still waits
    │                                 (orchestrator.execute.adoption)
    ├── TournamentNotFoundError       `autodev tournament show` of an unknown id (tournament.artifacts)
    ├── AreaError                     an unknown area or an unreadable notes file (workspace.areas)
    ├── AgentUnusableError            the chosen agent CLI failed its health check before any work
    ├── ExecutorUnreachableError      the Ray cluster of executor = ray cannot be reached, before any
    │                                 agent call (orchestrator.execute.ray_executor)
    ├── RemoteFlowError               a task's flow failed on its Ray node for a reason not the task's:
    │                                 the task is blocked (orchestrator.execute.ray_executor)
    ├── EnvironmentFaultError         the machine, not the work, stopped the run: a tool gone missing, an
    │   │                             agent CLI that cannot start, a full disk (exit 3: fix it, then
    │   │                             `autodev resume`)
    │   ├── WorktreeSetupError        the repository's worktree setup failed (orchestrator.worktree_setup)
    │   └── ProviderRefusedError      the agent's provider refused: a usage limit, a refused login, rate
    │                                 limits or outages that outlast the retries (orchestrator.provider_guard)
    ├── BudgetExceededError           the plan's cost budget is spent (exit 3; guardrails.errors)
    │   └── CostUnknownError          a call's cost is unknown, so the budget cannot be enforced
    └── GuardrailExceededError        a per-task or per-plan limit was reached (exit 1)
        └── LoopDetectedError         a role returns the same output again and again (guardrails.errors)
"""

from __future__ import annotations

__all__ = [
    "AgentUnusableError",
    "AutodevError",
    "ConfigError",
    "DetachedHeadError",
    "EnvironmentFaultError",
    "EvidenceError",
    "GuardrailExceededError",
    "InlineStateError",
    "InvalidTransitionError",
    "LedgerCorruptError",
    "LockHeldError",
    "PathEscapeError",
    "PlanExistsError",
    "PlanNotFoundError",
    "PlanParseError",
    "RepositoryError",
    "SnapshotError",
    "StateError",
    "TaskNotFoundError",
    "UnsafeRepositoryError",
    "quote",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SUSPENDED = 3


MAX_MESSAGE_CHARS = 1_000


def quote(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: messages quote what the user wrote, not megabytes."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-2:]}"


class AutodevError(Exception):
    """Root of every error AutoDev raises on purpose.

    ``message`` is a single line meant for a person: what is wrong, where, and what to do about it.
    """

    exit_code: int = EXIT_USAGE
    max_message_chars: int = MAX_MESSAGE_CHARS

    def __init__(self, message: str) -> None:
        # A multi-line message would break the one-line contract of the CLI; fold it here once. The cap is a
        # last resort for input echoed whole; call sites quote user text through quote().
        folded = " ".join(message.split())
        if len(folded) > self.max_message_chars:
            half = self.max_message_chars // 2
            folded = f"{folded[:half]} [...] {folded[-half:]}"
        self.message = folded
        super().__init__(self.message)


class ConfigError(AutodevError):
    """A configuration source holds an unknown key or a value outside the allowed range."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None) -> None:
        self.source = source
        self.key = key
        prefix = ""
        if source:
            prefix += f"{source}: "
        if key:
            prefix += f"{key}: "
        super().__init__(prefix + message)


class PlanParseError(AutodevError):
    """Plan markdown that does not follow the canonical format; ``line`` is 1-based when known."""

    def __init__(self, message: str, *, line: int | None = None, source: str | None = None) -> None:
        self.line = line
        self.source = source
        where = source or "plan"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}")


class PlanNotFoundError(AutodevError):
    """A command needs a saved plan and the repository has none."""


class PlanExistsError(AutodevError):
    """Saving a new plan would silently replace a plan that still has work recorded against it."""


class TaskNotFoundError(AutodevError):
    """A task id that the current plan does not contain."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {quote(task_id)} is not in the plan; `autodev status` lists the task ids")


class InvalidTransitionError(AutodevError):
    """A task status change that ``TASK_TRANSITIONS`` does not allow."""

    def __init__(
        self, task_id: str | None, current: str, target: str, allowed: list[str], *, hint: str | None = None
    ) -> None:
        self.task_id = task_id
        self.current = current
        self.target = target
        self.allowed = allowed
        subject = f"task {task_id}" if task_id else "task"
        options = ", ".join(allowed) if allowed else "none (terminal status)"
        why = f" ({hint})" if hint else ""
        super().__init__(
            f"{subject}: cannot move from {current!r} to {target!r}{why}; allowed from {current!r}: {options}"
        )


class PathEscapeError(AutodevError):
    """A path given by a user or an agent that would resolve outside the repository root."""

    def __init__(self, path: str, root: str, *, context: str = "") -> None:
        self.path = path
        self.root = root
        where = f"{context}: " if context else ""
        super().__init__(
            f"{where}path {quote(path)} resolves outside the repository {root}; use a path relative to the "
            "repository root without '..' or links that leave it"
        )


class RepositoryError(AutodevError):
    """The user's checkout cannot be worked in as it is; nothing was run and nothing was recorded."""


class UnsafeRepositoryError(RepositoryError):
    """git refuses to work in a repository owned by another user (its ``safe.directory`` check)."""


class DetachedHeadError(RepositoryError):
    """The main checkout's HEAD is detached: task commits would land on no branch."""


class StateError(AutodevError):
    """The ``.autodev/`` state cannot be read or written."""


class LedgerCorruptError(StateError):
    """The ledger's hash chain is broken somewhere other than a torn final line."""

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = path if line is None else f"{path}, line {line}"
        super().__init__(
            f"{where}: {message}; the ledger was not modified. Restore it from a backup or move it aside "
            "to start over (`autodev ledger verify` re-checks it)"
        )


class SnapshotError(StateError):
    """``plan.json`` could not be written."""


class EvidenceError(StateError):
    """An evidence file could not be written or read back."""


class InlineStateError(StateError):
    """``inline-state.json`` exists but cannot be read as an inline suspend state."""


class LockHeldError(AutodevError):
    """Another process holds an ``.autodev`` lock (the ledger lock, or the run lock of a live session)."""

    def __init__(
        self, lock_path: str, holder_pid: int | None, waited_s: float, *, session: bool = False
    ) -> None:
        self.lock_path = lock_path
        self.holder_pid = holder_pid
        who = f"process {holder_pid}" if holder_pid is not None else "another process"
        if session:
            message = (
                f"another autodev run ({who}) is working in this repository ({lock_path}); wait for it to "
                "finish or stop it, then try again (`autodev status` works meanwhile)"
            )
        else:
            message = (
                f"{lock_path} is held by {who} (waited {waited_s:.1f}s); wait for it to finish or stop it, "
                "then try again"
            )
        super().__init__(message)


class AgentUnusableError(AutodevError):
    """The chosen agent platform failed its health check (missing, its login or key refused, its model
    unreachable) before anything was paid for; the message carries the CLI's own words."""


class EnvironmentFaultError(AutodevError):
    """Something the developer cannot fix stopped the run resumably: no attempt is counted for it.

    The task stays where it was; ``autodev resume`` continues once the cause (named in the message) is
    fixed.
    """

    exit_code = EXIT_SUSPENDED


class GuardrailExceededError(AutodevError):
    """A per-task or per-plan limit was reached."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, task_id: str | None = None, limit: str | None = None) -> None:
        self.task_id = task_id
        self.limit = limit
        super().__init__(message)
