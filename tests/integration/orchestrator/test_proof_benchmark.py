"""The proof benchmark's measurement on a tiny plan: one false claimer of each kind and one honest task.

Every worker says every task is done, so the baseline that takes their word admits all five; AutoDev's own
checks (git, the write scope, the test gate, the acceptance command) must reject each false claim, with the
reason that names the check meant to catch it, and complete the honest task. ``bench/proof.py`` runs the
same measurement on a larger plan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
from proof import EXPECTED_CHECK, FALSE_KINDS, HONEST, measure

pytestmark = pytest.mark.slow


def test_proof_gated_completion_rejects_every_false_claim_and_admits_the_honest_task() -> None:
    # One attempt fewer than the default keeps the test short; a false claim still fails on its retry.
    result = measure([*FALSE_KINDS, HONEST], overrides={"qa_retry_limit": 2})

    kinds = result["kinds"]
    for kind in FALSE_KINDS:
        assert kinds[kind]["claimed_done"] == 1, kind
        assert kinds[kind]["false_completions_baseline"] == 1, kind
        assert kinds[kind]["false_completions_proof"] == 0, kind
        assert kinds[kind]["blocked_reasons"] == {EXPECTED_CHECK[kind]: 1}, kind
    assert kinds[HONEST]["admitted_by_proof"] == 1
    assert kinds[HONEST]["blocked_reasons"] == {}
    total = result["total"]
    assert total["claimed_done"] == total["admitted_by_baseline"] == 5
    assert total["false_completions_baseline"] == 4
    assert total["admitted_by_proof"] == total["honest_completed"] == 1
    assert total["false_completions_proof"] == total["honest_rejected"] == 0
