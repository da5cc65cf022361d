"""Shared fixtures: quiet logging, sample plans, and a repository directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autodev.logging import configure_quiet_logging


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    configure_quiet_logging()
    yield


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root
