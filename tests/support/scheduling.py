"""How ``pytest -n`` hands the suite's tests to its workers (``tests/conftest.py`` installs it).

xdist's default (``load``) sends a worker up to a quarter of the tests still waiting in one batch. The suite's
order puts slow tests (real agent CLIs, crash runs, hostile agents) among fast ones, so a late batch of slow
tests could keep one worker busy for minutes after the other had run out of work (8.5 minutes of a 22-minute
run, measured). Here every test is its own unit, handed out a few at a time, so both workers finish within a
test or two of each other.

The exception is a module whose tests share one costly module-scoped fixture (eight killed-and-resumed runs,
a Ray cluster): split over two workers, each would build it, and two builds of the crash runs beside the
cluster overloaded two cores until tests failed (measured). Such a module goes whole to one worker.
xdist's own ``xdist_group`` mark would do that, but it renames the tests' ids, which pytest 9.2 no longer
lets a plugin do, so the modules are named here.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

__all__ = ["WHOLE_MODULES", "OneTestAtATime"]

# Relative to the repository root, as pytest's test ids are.
WHOLE_MODULES = (
    "tests/crash/test_kill_anywhere.py",
    "tests/integration/ray/test_ray_executor.py",
)


class OneTestAtATime(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no types to subclass
    """xdist's scope scheduling with a unit per test, except the tests of a module in ``WHOLE_MODULES``."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        missing = [module for module in WHOLE_MODULES if not (config.rootpath / module).is_file()]
        if missing:
            raise pytest.UsageError(f"tests/support/scheduling.py names modules that do not exist: {missing}")
        # Units in the suite's own order: scope scheduling would otherwise start with the largest units,
        # which are the costliest modules, both at once.
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return module if module in WHOLE_MODULES else nodeid
