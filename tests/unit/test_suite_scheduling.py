"""The suite's own xdist scheduler (``support.scheduling``), driven as xdist drives it, with two workers that
run whatever they are sent: a module named in ``WHOLE_MODULES`` goes whole to one worker, every other test is
sent on its own, a few at a time, in the suite's order, so neither worker is left idle with work queued on
the other."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from support.scheduling import WHOLE_MODULES, OneTestAtATime


class Worker:
    """What the scheduler sees of an xdist worker: its id; it is sent test indexes and told when to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = argparse.Namespace(id=name)
        self.queue: list[int] = []
        self.batches: list[list[int]] = []
        self.ran: list[str] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.batches.append(list(indexes))
        self.queue.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


class Config:
    """The part of ``pytest.Config`` a scheduler reads: two workers, the default order of units."""

    def __init__(self, root: Path) -> None:
        self.rootpath = root
        self.option = argparse.Namespace(tx=["popen", "popen"], loadscopereorder=True)

    def getvalue(self, name: str) -> object:
        return getattr(self.option, name)


def _collection() -> list[str]:
    return [
        *(f"tests/cli/test_a.py::test_{i}" for i in range(6)),
        *(f"{WHOLE_MODULES[0]}::test_{i}" for i in range(4)),
        *(f"tests/e2e/test_b.py::test_{i}[x]" for i in range(6)),
        *(f"{WHOLE_MODULES[1]}::test_{i}" for i in range(5)),
        *(f"tests/unit/test_c.py::test_{i}" for i in range(30)),
    ]


def _run(scheduler: OneTestAtATime, workers: list[Worker], collection: list[str]) -> None:
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    # The workers take turns finishing their next test, as two equally fast processes would.
    while any(worker.queue for worker in workers):
        for worker in workers:
            if worker.queue:
                index = worker.queue.pop(0)
                worker.ran.append(collection[index])
                scheduler.mark_test_complete(worker, index)


def test_a_module_with_a_shared_fixture_runs_whole_on_one_worker_and_the_rest_one_test_at_a_time(
    tmp_path: Path,
) -> None:
    for module in WHOLE_MODULES:
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).touch()
    config = Config(tmp_path)
    collection = _collection()
    workers = [Worker("gw0"), Worker("gw1")]

    _run(OneTestAtATime(config), workers, collection)  # type: ignore[arg-type]

    assert sorted(test for worker in workers for test in worker.ran) == sorted(collection)
    for module in WHOLE_MODULES:
        holders = [worker.name for worker in workers if any(t.startswith(module) for t in worker.ran)]
        assert len(holders) == 1, f"{module} ran on {holders}"
    # Apart from the whole modules, no batch holds more than one test: the last tests are shared out one by
    # one, and the two workers' counts differ by little.
    batches = [batch for worker in workers for batch in worker.batches]
    whole = [batch for batch in batches if collection[batch[0]].startswith(WHOLE_MODULES)]
    assert sorted(len(batch) for batch in whole) == [4, 5]
    assert {len(batch) for batch in batches if batch not in whole} == {1}
    assert abs(len(workers[0].ran) - len(workers[1].ran)) <= 5
    # The suite's order, not the largest unit first: the first test sent is the suite's first.
    assert collection[workers[0].batches[0][0]] == collection[0]
    assert config.option.loadscopereorder is False


def test_a_whole_module_that_no_longer_exists_stops_the_run_naming_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match=re.escape(WHOLE_MODULES[0])):
        OneTestAtATime(Config(tmp_path))  # type: ignore[arg-type]
