"""Types for the CLI tests' subprocess runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Run:
    """One finished ``autodev`` process."""

    code: int
    out: str
    err: str


RunCli = Callable[..., Run]
