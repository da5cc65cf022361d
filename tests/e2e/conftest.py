"""Fixtures for the real agent CLIs: pinned npm installs and a scripted model server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_clis import NpmMissing, ensure_agent_clis
from support.model_server import ModelServer


@pytest.fixture(scope="session")
def agent_clis() -> dict[str, Path]:
    try:
        return ensure_agent_clis()
    except NpmMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def cli_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work
