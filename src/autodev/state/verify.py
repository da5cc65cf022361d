"""``autodev ledger verify``: prove the state is intact instead of assuming it.

Checks the hash chain, replays every entry from the start (catching entries that do not fit the plan),
compares the replay with ``plan.json``, and re-hashes every evidence file the ledger recorded. An evidence
file is hashed as it is streamed, so its size does not matter, but it must be a regular file in place: a
link, a FIFO or a device there is reported as a problem, never followed or waited on.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autodev.errors import EvidenceError
from autodev.files import open_regular
from autodev.state.plan_manager import PlanManager

__all__ = ["VerifyReport", "verify_state"]


@dataclass(slots=True)
class VerifyReport:
    """What ``verify_state`` found; ``ok`` is False when anything recorded does not match."""

    entries: int = 0
    head_hash: str = ""
    ops: Counter[str] = field(default_factory=Counter)
    torn_tail_bytes: int = 0
    snapshot: str = "missing"
    evidence_checked: int = 0
    evidence_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.evidence_problems and self.snapshot != "differs from the ledger replay"

    def lines(self) -> list[str]:
        if self.entries == 0:
            return ["ledger: empty (no plan saved yet)"]
        ops = ", ".join(f"{op} {count}" for op, count in sorted(self.ops.items()))
        out = [
            f"ledger: OK, {self.entries} entries, chain verified",
            f"head: {self.head_hash}",
            f"ops: {ops}",
            f"snapshot (plan.json): {self.snapshot}",
            f"evidence: {self.evidence_checked} files checked, {len(self.evidence_problems)} problems",
        ]
        if self.torn_tail_bytes:
            out.append(
                f"note: {self.torn_tail_bytes} bytes of an unfinished final entry (a crash mid-append) "
                "will be dropped on the next write"
            )
        out += [f"problem: {problem}" for problem in self.evidence_problems]
        return out


def verify_state(repo_root: Path) -> VerifyReport:
    """Verify the ledger of ``repo_root``; ``LedgerCorruptError`` when the chain itself is broken."""
    replay = PlanManager(repo_root, readonly=True, use_snapshot=False)
    replay.load()
    report = VerifyReport(
        entries=replay.ledger_head.seq,
        head_hash=replay.ledger_head.hash,
        torn_tail_bytes=replay.ledger.torn_tail_bytes,
    )
    report.ops.update(entry.op for entry in replay.ledger.entries())
    report.snapshot = _compare_snapshot(repo_root, replay)
    state = replay.state_copy()
    for task_id, refs in sorted(state.evidence.items()):
        # A path recorded again (the task's patch, rewritten each attempt) is held to its latest record.
        latest = {ref.path: ref for ref in refs}
        for ref in latest.values():
            report.evidence_checked += 1
            try:
                actual = _sha256_of(repo_root / ref.path)
            except OSError:
                report.evidence_problems.append(f"{ref.path} (task {task_id}) is missing")
                continue
            except EvidenceError as exc:
                report.evidence_problems.append(f"{ref.path} (task {task_id}): {exc.message}")
                continue
            if actual != ref.sha256:
                report.evidence_problems.append(
                    f"{ref.path} (task {task_id}) was modified after it was recorded"
                )
    return report


def _sha256_of(path: Path) -> str:
    fd = open_regular(path, what="the evidence file", follow_symlinks=False, error=EvidenceError)
    with os.fdopen(fd, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _compare_snapshot(repo_root: Path, replay: PlanManager) -> str:
    if not replay.paths.snapshot.exists():
        return "missing (rebuilt from the ledger on the next open)"
    from_snapshot = PlanManager(repo_root, readonly=True)
    from_snapshot.load()
    if not from_snapshot.snapshot_usable:
        return "unusable (corrupt or from another ledger); rebuilt from the ledger on the next open"
    if from_snapshot.state_copy() != replay.state_copy():
        return "differs from the ledger replay"
    behind = replay.ledger_head.seq - from_snapshot.snapshot_seq
    if behind:
        return f"{behind} entries behind the ledger (replayed on open), otherwise matches"
    return "up to date, matches the ledger replay"
