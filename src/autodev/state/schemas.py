"""Persisted data: the plan hierarchy and the evidence records.

Everything here is read from or written to disk, so every model forbids unknown keys: a typo in a
hand-edited file is an error, not a silently ignored field.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from autodev.state.vocabulary import TaskStatus


class _Persisted(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Values a copy may share with its original: nothing can change them in place.
_IMMUTABLE_VALUES = frozenset({str, int, float, bool, type(None)})


class AcceptanceCriterion(_Persisted):
    """One checkable statement of what "done" means for a task (`- [ ]` / `- [x]` in plan markdown)."""

    description: str
    met: bool = False


# A task's capability tier, as a plan's ``Model:`` line names it (haiku, sonnet, opus: fast < standard <
# strong); ``model_tiers`` maps each to a platform's model names.
ModelTier = Literal["fast", "standard", "strong"]
MODEL_TIERS: tuple[ModelTier, ...] = ("fast", "standard", "strong")
DEFAULT_TASK_TIER: ModelTier = "strong"
# How much work a task is, smallest first (a plan's ``Effort:`` line), and how urgent (``Priority:``, P0
# the most).
Effort = Literal["<1h", "1h", "5h", "1d", "1w"]
EFFORTS: tuple[Effort, ...] = ("<1h", "1h", "5h", "1d", "1w")
Priority = Literal["P0", "P1", "P2", "P3"]
PRIORITIES: tuple[Priority, ...] = ("P0", "P1", "P2", "P3")


class Task(_Persisted):
    """One unit of work; ``id`` is unique across the whole plan."""

    id: str
    phase_id: str
    title: str
    description: str = ""
    status: TaskStatus = "pending"
    files: list[str] = Field(default_factory=list)
    acceptance: list[AcceptanceCriterion] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    retry_count: int = 0
    # Attempts the delegation policy added beyond qa_retry_limit (each at a higher tier).
    automatic_retries: int = 0
    escalated: bool = False
    assigned_agent: str | None = None
    evidence_bundle: str | None = None
    blocked_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Execution facts recorded in the ledger (not in plan markdown): the commit the developer started from,
    # the concrete failures the next attempt must fix, and the commit that completed the task.
    base_commit: str | None = None
    last_issues: list[str] = Field(default_factory=list)
    # The role the last failures are for: the developer (None, as in older ledgers) or a role whose own
    # reply failed and whose step is retried (reviewer, test_engineer).
    last_issues_for: str | None = None
    commit: str | None = None
    # The git worktree an isolated (parallel) task works in while it is in flight, relative to the repo.
    worktree: str | None = None
    # The git tree the task's final checks saw: what its commit must hold.
    checked_tree: str | None = None
    # The task whose block cascaded to this one (``autodev retry`` of that task brings it back).
    blocked_by: str | None = None
    # The capability tier the task's roles run on (its plan's ``Model:`` line: haiku, sonnet, opus);
    # None is the default, strong.
    model: ModelTier | None = None
    # The task's size and urgency from its plan (``Effort:``, ``Priority:``); None when not given.
    effort: Effort | None = None
    priority: Priority | None = None
    # The task this one is a slice of (an architect split that task, too big to code in one go, into
    # slices; it waits on them, so its ``depends_on`` lists them).
    parent: str | None = None

    def detached_copy(self) -> Task:
        """A copy nothing done to it reaches this task, as ``model_copy(deep=True)`` gives, at about a
        third of its cost: the plan manager hands one out on every read of a task (about thirty a task
        in a run), and a deep copy sends each of the task's twenty-odd fields through ``copy.deepcopy``.
        Here only lists, dictionaries and nested models are copied; strings, numbers and None are
        shared, as a deep copy shares them too."""
        copied = self.model_copy()
        fields = copied.__dict__
        for name, value in fields.items():
            kind = type(value)
            if kind in _IMMUTABLE_VALUES:
                continue
            if kind is list and all(type(item) in _IMMUTABLE_VALUES for item in value):
                fields[name] = value[:]
            else:
                fields[name] = copy.deepcopy(value)
        return copied


class Phase(_Persisted):
    """An ordered group of tasks; a later phase normally builds on the previous one."""

    id: str
    title: str
    description: str = ""
    tasks: list[Task]
    baseline_commit: str | None = None
    end_checkpoint_commit: str | None = None


class Plan(_Persisted):
    """The whole plan. ``content_hash`` covers everything except itself and ``updated_at``."""

    plan_id: str
    spec_hash: str
    title: str = ""
    description: str = ""
    phases: list[Phase]
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    content_hash: str = ""

    def iter_tasks(self) -> list[Task]:
        """Every task in plan order (phase order, then task order within the phase)."""
        return [task for phase in self.phases for task in phase.tasks]


# --- Evidence -------------------------------------------------------------------------------------

ReviewVerdict = Literal["APPROVED", "NEEDS_CHANGES", "REJECTED"]
CriticVerdict = Literal["APPROVED", "NEEDS_REVISION", "REJECTED"]
Confidence = Literal["HIGH", "MEDIUM", "LOW"]


class _EvidenceBase(_Persisted):
    task_id: str
    attempt: int = Field(default=1, ge=1)
    created_at: str = ""
    role: str | None = None
    # The agent platform the call ran on (a harness family: claude_code, codex, ...), when one did.
    platform: str | None = None
    session_id: str | None = None
    cost_usd: float | None = None
    # What AutoDev found the agent did besides its change: commits it folded in, files it put back.
    agent_actions: list[str] = Field(default_factory=list)


class ChangeStat(_Persisted):
    """One file of a change: lines added and deleted (None for a binary file)."""

    path: str
    added: int | None = None
    deleted: int | None = None


class RepositoryFacts(_Persisted):
    """What git shows in a writer's checkout after it ran, whatever the writer said: the record a result
    is judged by (its files, its size, whether it committed or left files dirty)."""

    checkout: str
    head: str | None = None
    branch: str | None = None
    base_commit: str | None = None
    commits_since_base: int = 0
    committed_paths: list[str] = Field(default_factory=list)
    dirty_paths: list[str] = Field(default_factory=list)
    diffstat: list[ChangeStat] = Field(default_factory=list)
    insertions: int = 0
    deletions: int = 0


class CoderEvidence(_EvidenceBase):
    """What a developer run changed, read from git, and what it said.

    ``files_changed`` is git's list, never the agent's; ``claimed_files`` is its ``CHANGED:`` list (None
    when it gave none) and ``risks`` where the two differ."""

    kind: Literal["developer"] = "developer"
    diff: str = ""
    files_changed: list[str] = Field(default_factory=list)
    output_text: str = ""
    duration_s: float = 0.0
    success: bool = False
    repository: RepositoryFacts | None = None
    claimed_files: list[str] | None = None
    risks: list[str] = Field(default_factory=list)


class ReviewEvidence(_EvidenceBase):
    """The reviewer's verdict; ``verdict`` is None when the reply had no VERDICT line (a failure).

    ``tree`` is the git tree the reviewer was shown; ``problem`` what makes this reply unusable (None when
    it is usable); ``repair_of`` what was wrong with the reply a repair turn replaced, and
    ``previous_output`` keeps that reply.
    """

    kind: Literal["review"] = "review"
    verdict: ReviewVerdict | None
    issues: list[str] = Field(default_factory=list)
    output_text: str = ""
    tree: str | None = None
    problem: str | None = None
    repair_of: str | None = None
    previous_output: str | None = None


class TestEvidence(_EvidenceBase):
    """What the test engineer claimed (``passed``/``failed``/``total``) and what AutoDev's own run showed."""

    # The name starts with "Test": keep pytest (ours and our users') from collecting it as a test class.
    __test__ = False

    kind: Literal["test"] = "test"
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    total: int = Field(ge=0)
    coverage_pct: float | None = None
    claim_found: bool = True
    run_status: str | None = None
    run_exit_code: int | None = None
    run_passed: int | None = None
    run_failed: int | None = None
    run_total: int | None = None
    agrees: bool | None = None
    output_text: str = ""
    # What the test engineer changed (against the tree the developer's gates checked), what of it lies
    # outside the task's files, the gates run on those files and the tree AutoDev's own run checked.
    files_changed: list[str] = Field(default_factory=list)
    outside_task_files: list[str] = Field(default_factory=list)
    checks: list[GateCheck] = Field(default_factory=list)
    run_argv: list[str] = Field(default_factory=list)
    tree: str | None = None
    problem: str | None = None
    repair_of: str | None = None
    previous_output: str | None = None


class CommandRun(_Persisted):
    """One command a gate ran: argv (never a shell), exit status, and a digest of everything it printed."""

    argv: list[str] = Field(default_factory=list)
    status: str
    exit_code: int | None = None
    duration_s: float = 0.0
    output_sha256: str | None = None
    output_bytes: int = 0
    output_excerpt: str = ""
    reason: str | None = None


class TestRunCounts(_Persisted):
    """How the cases of one test run ended, from the runner's JUnit report."""

    __test__ = False

    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    skipped: int = Field(ge=0)
    total: int = Field(ge=0)


class GateCheck(_Persisted):
    """One QA gate's outcome as recorded in evidence.

    ``findings`` are what the change is blamed for; ``preexisting`` what the base commit has too (listed,
    not blamed); ``changed_files`` what the gate itself changed in the tree (and AutoDev put back).
    """

    gate: str
    status: str
    counts_as_pass: bool
    language: str | None = None
    reason: str | None = None
    skipped_by: str | None = None
    cause: str | None = None
    findings: list[str] = Field(default_factory=list)
    preexisting: list[str] = Field(default_factory=list)
    changed_files: list[str] = Field(default_factory=list)
    counts: TestRunCounts | None = None
    runs: list[CommandRun] = Field(default_factory=list)


class GateEvidence(_EvidenceBase):
    """The QA gates run on one attempt's change, where they ran and on which tree.

    ``environment`` says how the project's environment was found and ``interpreter`` is its Python (the
    exact argv of each command is in ``checks``); ``tree`` is the git tree id of the working copy the gates
    checked.
    """

    kind: Literal["gates"] = "gates"
    passed: bool
    checks: list[GateCheck] = Field(default_factory=list)
    # Files of the change that can alter which tests run or how they end (conftest.py, pytest settings).
    test_config_changed: list[str] = Field(default_factory=list)
    environment: str | None = None
    interpreter: str | None = None
    tree: str | None = None


class ExploreEvidence(_EvidenceBase):
    kind: Literal["explore"] = "explore"
    findings: str = ""
    files_referenced: list[str] = Field(default_factory=list)


class SMEEvidence(_EvidenceBase):
    kind: Literal["domain_expert"] = "domain_expert"
    topic: str = ""
    findings: str = ""
    confidence: Confidence = "MEDIUM"


class ArchitectEvidence(_EvidenceBase):
    """An architect answer as it came (attempt 2: the retry after a plan that did not parse).

    Recorded before it is parsed, so that a resumed plan phase (after an inline suspend or a crash) reuses
    it: a parsed plan is not asked for again, and an unparsable one leads to the retry, not the first call.
    """

    kind: Literal["architect"] = "architect"
    output_text: str = ""


class CriticEvidence(_EvidenceBase):
    """The critic sounding board's diagnosis of a task that ran out of retries."""

    kind: Literal["critic"] = "critic"
    verdict: CriticVerdict | None
    issues: list[str] = Field(default_factory=list)
    recommendation: str | None = None
    output_text: str = ""


class TournamentEvidence(_EvidenceBase):
    kind: Literal["tournament"] = "tournament"
    tournament_id: str
    phase: Literal["plan", "impl"]
    passes: int = Field(ge=0)
    winner: str
    converged: bool
    history: list[dict[str, Any]] = Field(default_factory=list)


class PhaseReviewEvidence(_EvidenceBase):
    """A finished phase's change: the exact commit range and the phase's own commits in it.

    Stored with ``task_id="plan"`` and ``attempt`` = the phase's position (1-based). In cross-phase mode a
    later phase may commit inside the range; those commits are listed apart and kept out of ``diff``.
    """

    kind: Literal["phase_review"] = "phase_review"
    phase_id: str
    baseline_commit: str | None
    end_checkpoint_commit: str
    commits: list[str] = Field(default_factory=list)
    foreign_commits: list[str] = Field(default_factory=list)
    files_changed: list[str] = Field(default_factory=list)
    diff: str = ""
    reviewed: bool = False
    verdict: ReviewVerdict | None = None
    issues: list[str] = Field(default_factory=list)
    output_text: str = ""


CheckKind = Literal["gate", "command", "semantic"]
RequiredCheckStatus = Literal["pass", "fail", "blocked", "waived", "settled"]
CompletionVerdict = Literal["verified", "verified_with_waiver", "changes_requested", "blocked", "timed_out"]


class RequiredCheck(_Persisted):
    """One check a task's completion contract requires: a QA gate AutoDev ran, a command an acceptance
    criterion names (run by AutoDev, argv without a shell), or a semantic criterion the reviewer settles."""

    id: str
    kind: CheckKind
    description: str
    status: RequiredCheckStatus
    argv: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    reason: str | None = None
    output_sha256: str | None = None
    output_excerpt: str = ""


class CompletionEvidence(_EvidenceBase):
    """A task's completion contract for one attempt: every required check, its real outcome, and the
    verdict; bound to the exact revision (the tree) and checkout it was checked in, to what the change was
    made from (the base ref and commit) and by whom (the developer's branch, platform and agent session,
    ``session_id``), and to who verified it (the reviewer's platform)."""

    kind: Literal["completion"] = "completion"
    verdict: CompletionVerdict
    revision: str
    checkout: str
    head: str | None = None
    checks: list[RequiredCheck] = Field(default_factory=list)
    # The base ref the run measured the checkout against (``origin/main``...), None when it has none.
    base_ref: str | None = None
    # The commit the attempt's change was made on.
    base_commit: str | None = None
    # The branch the change is made for (the main checkout's: a task's own worktree is detached); None
    # when the main checkout is detached too.
    branch: str | None = None
    implemented_on: str | None = None
    verified_on: str | None = None
    # AutoDev's own session (the run) that checked it.
    run_session: str | None = None


class ResultRecord(_Persisted):
    """An accepted task result: the canonical evidence record later tasks of the run are given. Its ``id``
    is the ledger entry that recorded the task complete (``E<seq>``); everything in it comes from git and
    AutoDev's own checks, except ``summary``, the developer's own first line, quoted as such."""

    id: str = ""
    task_id: str
    title: str
    attempt: int = Field(ge=1)
    commit: str | None = None
    # How the output reached the main checkout: written there (``in_place``), landed from a worktree of
    # its own (``adopted``), or nothing to land (``empty``).
    output: Literal["in_place", "adopted", "empty"] = "in_place"
    files: list[str] = Field(default_factory=list)
    insertions: int = 0
    deletions: int = 0
    verdict: str | None = None
    summary: str = ""


Evidence = Annotated[
    CompletionEvidence
    | CoderEvidence
    | GateEvidence
    | ReviewEvidence
    | TestEvidence
    | ExploreEvidence
    | SMEEvidence
    | ArchitectEvidence
    | CriticEvidence
    | TournamentEvidence
    | PhaseReviewEvidence,
    Field(discriminator="kind"),
]
