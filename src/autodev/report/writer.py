"""Where the report goes: one file, written atomically."""

from __future__ import annotations

from pathlib import Path

from autodev.config import AutodevConfig
from autodev.report.data import gather
from autodev.report.page import render
from autodev.state.atomic import atomic_write_text

__all__ = ["write_report"]


def write_report(repo_root: Path, out_dir: Path, config: AutodevConfig | None = None) -> Path:
    """Write ``out_dir/index.html`` for the repository's current plan (``config``: its lanes and budget);
    its path."""
    page = render(gather(repo_root, config))
    target = out_dir / "index.html"
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, page)
    return target
