"""The machine figures every run of ``bench/overhead.py`` and ``bench/makespan.py`` reports beside its own
(``bench/_machine.py``): measured for real where the run works, and nothing of the measurement left behind."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
from _machine import machine_costs


def test_the_machine_figures_are_measured_in_the_directory_given_and_leave_nothing_there(
    tmp_path: Path,
) -> None:
    costs = machine_costs(tmp_path, samples=5)

    assert set(costs) == {"python_ms", "create_ms", "sync_ms", "git_ms"}
    assert all(math.isfinite(value) and value > 0 for value in costs.values())
    assert list(tmp_path.iterdir()) == []
