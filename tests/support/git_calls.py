"""The git commands AutoDev starts, recorded where each of its own passes (``run_git_now``)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

from autodev.workspace import git as git_module


def git_started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The arguments of every git command AutoDev starts from now on, as ``run_git_now`` gets them."""
    started: list[tuple[str, ...]] = []
    real = git_module.run_git_now

    def recording(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        started.append(tuple(args))
        return real(args, **kwargs)

    monkeypatch.setattr(git_module, "run_git_now", recording)
    return started


def command_names(started: Sequence[Sequence[str]]) -> list[str]:
    """The command of each (``update-ref``, ``restore``, ...), past git's own options."""
    return [next(arg for arg in args if not arg.startswith("-") and "=" not in arg) for args in started]
