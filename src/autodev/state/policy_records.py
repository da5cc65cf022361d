"""What the ledger keeps for the delegation policy: declared write scopes, approval requests and the grants
workers hold. ``PlanManager`` records and replays them like every other state change."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "HumanBlock",
    "HumanRelease",
    "LastDecision",
    "ScopeDeclaration",
    "ScopeSource",
    "WorkerGrant",
]

ScopeSource = Literal["intent", "plan_file", "command_line"]
ApprovalStatus = Literal["pending", "accepted", "declined"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeDeclaration(_Record):
    """A write scope the user declared for the run: where it came from and its normalized patterns."""

    source: ScopeSource
    patterns: list[str]
    ts: str = ""


class ApprovalRecord(_Record):
    """One approval request: a scope no declaration covers, for the tasks that need it."""

    id: str
    scope: list[str]
    task_ids: list[str] = Field(default_factory=list)
    reason: str
    remediation: str
    status: ApprovalStatus = "pending"
    requested_at: str = ""
    resolved_at: str | None = None
    # When a live run started waiting for the answer; None while no run waits (it moves on entering and on
    # leaving the wait, so an answered or abandoned wait never looks like an expired one).
    waiting_since: str | None = None


HumanRelease = Literal["accepted", "declined", "timed_out"]


class HumanBlock(_Record):
    """A pending task held because a task it depends on waits for the user's answer to an approval request:
    it neither starts nor ages in the queue until the answer (or the wait's deadline) releases it."""

    task_id: str
    approval_id: str
    since: str


class WorkerGrant(_Record):
    """A write worker under way: the decision that let its task start writing, until the task finishes."""

    task_id: str
    tier: Literal["fast", "standard", "strong"]
    write_mode: Literal["shared", "isolated"]
    owned_paths: list[str] = Field(default_factory=list)
    units: int


class LastDecision(_Record):
    """The newest policy decision about a task's calls: what ``status`` says about a task in flight (its
    family, and whether it runs or waits, and for what)."""

    role: str
    family: str
    route: str
    reason: str
