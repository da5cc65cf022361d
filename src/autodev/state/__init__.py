"""Persistent state: schemas, the hash-chained ledger, ``PlanManager``, evidence and the ``.autodev``
layout. Nothing here imports from the layers above (orchestrator, adapters, cli).

Names are re-exported lazily: ``autodev status --json`` imports only the ledger and snapshot modules, not
pydantic and the models.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autodev.state.evidence import (
        WrittenFile,
        read_evidence,
        write_evidence,
        write_patch,
    )
    from autodev.state.ledger import (
        GENESIS_HASH,
        Ledger,
        LedgerEntry,
        LedgerHead,
    )
    from autodev.state.paths import (
        AutodevPaths,
        ensure_state_dir,
        find_repo_root,
        normalize_repo_path,
    )
    from autodev.state.plan_manager import (
        EvidenceRef,
        PlanManager,
        PlanState,
    )
    from autodev.state.schemas import (
        AcceptanceCriterion,
        ArchitectEvidence,
        CoderEvidence,
        CommandRun,
        CriticEvidence,
        Evidence,
        ExploreEvidence,
        GateCheck,
        GateEvidence,
        Phase,
        Plan,
        ReviewEvidence,
        SMEEvidence,
        Task,
        TestEvidence,
        TournamentEvidence,
    )
    from autodev.state.transitions import (
        TASK_TRANSITIONS,
        assert_transition,
        can_transition,
    )
    from autodev.state.validation import (
        validate_dag,
        validate_plan,
    )
    from autodev.state.vocabulary import TASK_STATUSES, TERMINAL_STATUSES, TaskStatus

__all__ = [
    "GENESIS_HASH",
    "TASK_STATUSES",
    "TASK_TRANSITIONS",
    "TERMINAL_STATUSES",
    "AcceptanceCriterion",
    "ArchitectEvidence",
    "AutodevPaths",
    "CoderEvidence",
    "CommandRun",
    "CriticEvidence",
    "Evidence",
    "EvidenceRef",
    "ExploreEvidence",
    "GateCheck",
    "GateEvidence",
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

_LAZY: dict[str, str] = {
    "AcceptanceCriterion": "autodev.state.schemas",
    "AutodevPaths": "autodev.state.paths",
    "ArchitectEvidence": "autodev.state.schemas",
    "CoderEvidence": "autodev.state.schemas",
    "CommandRun": "autodev.state.schemas",
    "CriticEvidence": "autodev.state.schemas",
    "Evidence": "autodev.state.schemas",
    "EvidenceRef": "autodev.state.plan_manager",
    "ExploreEvidence": "autodev.state.schemas",
    "GateCheck": "autodev.state.schemas",
    "GateEvidence": "autodev.state.schemas",
    "GENESIS_HASH": "autodev.state.ledger",
    "Ledger": "autodev.state.ledger",
    "LedgerEntry": "autodev.state.ledger",
    "LedgerHead": "autodev.state.ledger",
    "Phase": "autodev.state.schemas",
    "Plan": "autodev.state.schemas",
    "PlanManager": "autodev.state.plan_manager",
    "PlanState": "autodev.state.plan_manager",
    "ReviewEvidence": "autodev.state.schemas",
    "SMEEvidence": "autodev.state.schemas",
    "TASK_STATUSES": "autodev.state.vocabulary",
    "TASK_TRANSITIONS": "autodev.state.transitions",
    "TERMINAL_STATUSES": "autodev.state.vocabulary",
    "Task": "autodev.state.schemas",
    "TaskStatus": "autodev.state.vocabulary",
    "TestEvidence": "autodev.state.schemas",
    "TournamentEvidence": "autodev.state.schemas",
    "WrittenFile": "autodev.state.evidence",
    "assert_transition": "autodev.state.transitions",
    "can_transition": "autodev.state.transitions",
    "ensure_state_dir": "autodev.state.paths",
    "find_repo_root": "autodev.state.paths",
    "normalize_repo_path": "autodev.state.paths",
    "read_evidence": "autodev.state.evidence",
    "validate_dag": "autodev.state.validation",
    "validate_plan": "autodev.state.validation",
    "write_evidence": "autodev.state.evidence",
    "write_patch": "autodev.state.evidence",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autodev.state' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
