"""A failed recording (a full disk) never leaves an evidence file disagreeing with its recorded hash."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_plan

from autodev.state.hashing import sha256_hex
from autodev.state.plan_manager import PlanManager


def test_a_patch_whose_recording_fails_is_put_back_to_the_recorded_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(make_plan(1))
        recorded = manager.record_patch("1.1", "first attempt\n", attempt=1)

        def full_disk(*_: object, **__: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(manager.ledger, "append", full_disk)
        with pytest.raises(OSError, match="No space"):
            manager.record_patch("1.1", "second attempt\n", attempt=2)
    assert recorded.read_text() == "first attempt\n"
    refs = PlanManager.open(tmp_path, readonly=True).evidence_for("1.1")
    assert [ref.sha256 for ref in refs] == [sha256_hex(b"first attempt\n")]
    assert not list(recorded.parent.glob(".*.prev"))
