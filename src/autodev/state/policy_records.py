"""What the ledger keeps for the delegation policy: declared write scopes, approval requests and the grants
workers hold. ``PlanManager`` records and replays them like every other state change."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ApprovalRecord", "ApprovalStatus", "ScopeDeclaration", "ScopeSource", "WorkerGrant"]

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


class WorkerGrant(_Record):
    """A write worker under way: the decision that let its task start writing, until the task finishes."""

    task_id: str
    tier: Literal["fast", "standard", "strong"]
    write_mode: Literal["shared", "isolated"]
    owned_paths: list[str] = Field(default_factory=list)
    units: int
