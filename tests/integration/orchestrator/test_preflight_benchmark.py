"""The preflight benchmark's start on a tiny project: each of its starts must reach the first agent call
(``bench/preflight.py`` times the same starts on a project of 1,000 tests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
from preflight import make_project, start_to_first_call


def test_every_start_of_the_preflight_benchmark_reaches_the_first_agent_call(tmp_path: Path) -> None:
    root = tmp_path / "project"
    make_project(root, tests=5)

    # Each raises SystemExit, naming what `autodev execute` printed, when the run stops anywhere else.
    assert start_to_first_call(root, tests_on=False, keep_baseline=False) > 0
    assert start_to_first_call(root, tests_on=True, keep_baseline=False) > 0
    assert (root / ".autodev" / "baseline").is_dir()
    assert start_to_first_call(root, tests_on=True, keep_baseline=True) > 0
