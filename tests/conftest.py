"""Shared fixtures: quiet logging, sample plans, and a repository directory per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autodev.logging import configure_quiet_logging

# For the child processes only (this session's own plugins are loaded by now): the projects these tests build
# run their tests with the QA gates' `pytest`, and their plain tests need none of the plugins installed beside
# AutoDev; importing (and, in each fresh project, compiling) those is most of a gate run's time.
os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
# The projects the tests build find their Python environment as a user's shell would give it: the one the
# suite runs in, as if activated (tests of the environment search set their own). Without this the search
# would fall through to whatever python3 this machine has on PATH.
os.environ["VIRTUAL_ENV"] = sys.prefix
os.environ.pop("CONDA_PREFIX", None)


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    configure_quiet_logging()
    yield


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root
