"""Shared fixtures: quiet logging, sample plans, and a repository directory per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from autodev.logging import configure_quiet_logging
from autodev.workspace import changes

if TYPE_CHECKING:
    from support.scheduling import OneTestAtATime
    from xdist.remote import Producer


# Before xdist's own, which would answer first: the hook takes the first answer.
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> OneTestAtATime | None:
    """With ``-n``, tests go out a few at a time so the workers finish together (``support.scheduling``)."""
    if config.getvalue("dist") != "load":
        return None  # another mode (``--dist each``, ``worksteal``, ...) is xdist's own
    from support.scheduling import OneTestAtATime

    return OneTestAtATime(config, log)


@pytest.fixture(autouse=True, scope="session")
def _child_process_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What the child processes the tests start see (set when the session starts, not at import, so that
    pytest's own workers and plugins are untouched).

    The projects these tests build run their tests with the QA gates' ``pytest``, and their plain tests need
    none of the plugins installed beside AutoDev: importing those is most of a gate run's time. Bytecode
    goes to one cache for the whole session (both workers' temp directories share its parent), as a
    developer's own ``PYTHONPYCACHEPREFIX`` would: the gates keep a prefix outside the project, so pytest
    is compiled once, not in every fresh project (0.7 s each time, three times the run itself). They find
    their Python environment as a user's shell would give it: the one the suite runs in, as if activated
    (tests of the environment search set their own); without it the search would fall through to whatever
    python3 the machine has on PATH.
    """
    with pytest.MonkeyPatch.context() as patch:
        if "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ:
            patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        session_temp = tmp_path_factory.getbasetemp()
        if "PYTEST_XDIST_WORKER" in os.environ:
            session_temp = session_temp.parent  # the workers' own are popen-gw0, popen-gw1, ... inside it
        patch.setenv("PYTHONPYCACHEPREFIX", str(session_temp / "bytecode"))
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        patch.setenv("VIRTUAL_ENV", sys.prefix)
        patch.delenv("CONDA_PREFIX", raising=False)
        yield


@pytest.fixture(autouse=True)
def _no_autodev_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own ``AUTODEV_*`` settings must not change what a test sees; tests set their own."""
    for name in [name for name in os.environ if name.upper().startswith("AUTODEV_")]:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_watch_outlives_its_test() -> Iterator[None]:
    """A test that left a working copy watched (an aborted run, a pool never cleaned up) must not use up
    the kernel's inotify instances (128 per user by default) for the tests after it."""
    yield
    changes.forget_all()


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    configure_quiet_logging()
    yield


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root
