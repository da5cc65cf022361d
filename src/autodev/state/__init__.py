"""Persistent state: schemas, the hash-chained ledger, ``PlanManager``, evidence and the ``.autodev`` layout.

Nothing here imports from the layers above (orchestrator, adapters, cli).
"""

from autodev.state.evidence import WrittenFile, read_evidence, write_evidence, write_patch
from autodev.state.ledger import GENESIS_HASH, Ledger, LedgerEntry, LedgerHead
from autodev.state.paths import AutodevPaths, ensure_state_dir, find_repo_root, normalize_repo_path
from autodev.state.plan_manager import EvidenceRef, PlanManager, PlanState
from autodev.state.schemas import (
    TASK_STATUSES,
    TERMINAL_STATUSES,
    AcceptanceCriterion,
    CoderEvidence,
    CriticEvidence,
    Evidence,
    ExploreEvidence,
    Phase,
    Plan,
    ReviewEvidence,
    SMEEvidence,
    Task,
    TaskStatus,
    TestEvidence,
    TournamentEvidence,
)
from autodev.state.transitions import TASK_TRANSITIONS, assert_transition, can_transition
from autodev.state.validation import validate_dag, validate_plan

__all__ = [
    "GENESIS_HASH",
    "TASK_STATUSES",
    "TASK_TRANSITIONS",
    "TERMINAL_STATUSES",
    "AcceptanceCriterion",
    "AutodevPaths",
    "CoderEvidence",
    "CriticEvidence",
    "Evidence",
    "EvidenceRef",
    "ExploreEvidence",
    "Ledger",
    "LedgerEntry",
    "LedgerHead",
    "Phase",
    "Plan",
    "PlanManager",
    "PlanState",
    "ReviewEvidence",
    "SMEEvidence",
    "Task",
    "TaskStatus",
    "TestEvidence",
    "TournamentEvidence",
    "WrittenFile",
    "assert_transition",
    "can_transition",
    "ensure_state_dir",
    "find_repo_root",
    "normalize_repo_path",
    "read_evidence",
    "validate_dag",
    "validate_plan",
    "write_evidence",
    "write_patch",
]
