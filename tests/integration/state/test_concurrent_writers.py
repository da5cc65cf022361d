"""Two OS processes appending through PlanManager at the same time keep one valid chain."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from support import make_plan

from autodev.state.ledger import Ledger
from autodev.state.plan_manager import PlanManager

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from autodev.logging import configure_quiet_logging
    from autodev.state.plan_manager import PlanManager

    configure_quiet_logging()
    root, name, start_file, count = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    while not start_file.exists():
        time.sleep(0.001)
    with PlanManager(root, lock_timeout_s=30) as pm:
        task_id = "1.1" if name == "a" else "1.2"
        for i in range(count):
            pm.record_event("note", {"writer": name, "i": i})
            if i == count // 2:
                pm.update_task_status(task_id, "in_progress")
    """
)


def test_two_processes_appending_concurrently(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
    start = tmp_path / "go"
    count = 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo), name, str(start), str(count)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    start.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    ledger = Ledger(repo / ".autodev" / "ledger.jsonl", readonly=True)
    head = ledger.open()  # raises if the chain is broken anywhere
    entries = list(ledger.entries())
    assert head.seq == len(entries) == 1 + 2 * count + 2
    notes = Counter((e.payload["writer"], e.payload["i"]) for e in entries if e.op == "note")
    assert set(notes.values()) == {1}
    assert len(notes) == 2 * count
    writers_seen = [e.payload["writer"] for e in entries if e.op == "note"]
    # Interleaving is what makes this a concurrency test; a serial run would show one switch.
    switches = sum(1 for x, y in itertools.pairwise(writers_seen) if x != y)
    assert switches >= 1

    final = PlanManager.open(repo, readonly=True)
    assert [t.status for t in final.tasks()] == ["in_progress", "in_progress"]
    replay = PlanManager(repo, readonly=True, use_snapshot=False)
    replay.load()
    assert replay.state_copy() == final.state_copy()
    json.loads((repo / ".autodev" / "plan.json").read_text())
