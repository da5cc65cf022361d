"""The overhead benchmark's counters on a small real run: the file syncs it counts are AutoDev's own, made
unless ``--syncs off`` asks otherwise, and the process's ``os.fsync`` is its own again afterwards; the new
files it counts are the ones made while a run is counted, never an existing file opened again
(``bench/overhead.py`` runs the same measurement at 100 to 5,000 tasks)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
import _machine
import overhead


@pytest.mark.parametrize("syncs", [True, False])
def test_the_overhead_benchmark_counts_autodevs_syncs_and_puts_them_back(
    syncs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    probing = [False]  # the machine figures' own syncs are neither AutoDev's nor the set-up's

    def fsync(fd: int) -> None:
        if not probing[0]:
            made.append(fd)
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        if not probing[0]:
            made.append(fd)
        real_fdatasync(fd)

    real_machine_costs = _machine.machine_costs

    def machine_costs(directory: Path) -> dict[str, float]:
        probing[0] = True
        try:
            return real_machine_costs(directory)
        finally:
            probing[0] = False

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(_machine, "machine_costs", machine_costs)

    run = overhead.measure(3, 0, {}, syncs=syncs)

    assert os.fsync is fsync and os.fdatasync is fdatasync
    counted = run["syncs_per_task"]
    assert isinstance(counted, float) and counted >= 5  # evidence files, their directory, durable appends
    mode = run["syncs"]
    assert isinstance(mode, str)
    if syncs:
        assert mode == "on"
        assert len(made) >= counted * 3  # every counted sync was made (the set-up's own come on top)
    else:
        assert mode.startswith("off")
        assert len(made) < counted * 3  # only the set-up's own: the run's were counted, not made
    # Each task writes its evidence files as new ones at least (seven on this path): none is missed.
    created = run["files_created_per_task"]
    assert isinstance(created, float) and created >= 7
    cpu = run["cpu_ms_per_task"]
    assert isinstance(cpu, dict) and cpu["autodev"] > 0 and cpu["git"] > 0
    machine = run["machine"]  # measured outside the run: its syncs are not counted as AutoDev's
    assert isinstance(machine, dict) and set(machine) == {"before", "after"}
    assert all(figures["sync_ms"] > 0 for figures in machine.values())


def test_new_files_counts_what_is_created_only_while_counting(tmp_path: Path) -> None:
    new_files = overhead.new_files()
    assert overhead.new_files() is new_files  # one audit hook for the process, however often it is asked
    existing = tmp_path / "existing"
    existing.write_text("kept")
    start = new_files.created

    new_files.counting = True
    try:
        os.close(os.open(tmp_path / "made-by-os-open", os.O_WRONLY | os.O_CREAT, 0o644))
        (tmp_path / "made-by-write-text").write_text("new")
        (tmp_path / "made-by-mkdir").mkdir()
        existing.write_text("replaced in place")  # opened with O_CREAT, but nothing new is made
        os.close(os.open(existing, os.O_RDONLY))
    finally:
        new_files.counting = False
    counted = new_files.created - start
    (tmp_path / "made-while-not-counting").write_text("new")

    assert counted == 3
    assert new_files.created - start == 3
