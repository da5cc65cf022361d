"""Which languages a repository is written in, so the QA gates know which tools to run.

A language is detected by the files that make a directory a project of that language:

========  ===================================================================================
python    ``pyproject.toml``, ``setup.py`` or ``setup.cfg`` at the root, or any ``*.py`` file
nodejs    ``package.json`` at the root
rust      ``Cargo.toml`` at the root
go        ``go.mod`` or ``go.work`` at the root
========  ===================================================================================

Node, Rust and Go look at the root only because their gate commands (``npm test``, ``cargo build``,
``go build ./...``) run there. The search for ``*.py`` files walks the tree without following links and
leaves out AutoDev's state, version control, virtual environments, dependencies and build output
(``IGNORED_DIRS``), so a vendored tool in ``node_modules/`` does not make a project a Python one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, get_args

__all__ = ["IGNORED_DIRS", "LANGUAGES", "Language", "detect_languages"]

Language = Literal["python", "nodejs", "rust", "go"]
LANGUAGES: tuple[Language, ...] = get_args(Language)
"""Every supported language, in the order gates run them and ``detect_languages`` reports them."""

IGNORED_DIRS: frozenset[str] = frozenset(
    {
        ".autodev",
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "node_modules",
        "target",
        "__pycache__",
    }
)
"""Directory names never searched for source files."""

_ROOT_MARKERS: dict[Language, tuple[str, ...]] = {
    "python": ("pyproject.toml", "setup.py", "setup.cfg"),
    "nodejs": ("package.json",),
    "rust": ("Cargo.toml",),
    "go": ("go.mod", "go.work"),
}


def detect_languages(repo_root: Path) -> list[Language]:
    """The languages of the project at ``repo_root``, in ``LANGUAGES`` order; empty for none we know."""
    found = [
        language
        for language, markers in _ROOT_MARKERS.items()
        if any((repo_root / marker).is_file() for marker in markers)
    ]
    if "python" not in found and _has_python_file(repo_root):
        found.append("python")
    return sorted(found, key=LANGUAGES.index)


def _has_python_file(repo_root: Path) -> bool:
    for _directory, dirnames, filenames in os.walk(repo_root):
        # Pruning in place keeps os.walk out of the ignored trees altogether, however large they are.
        dirnames[:] = sorted(name for name in dirnames if name not in IGNORED_DIRS)
        if any(name.endswith(".py") for name in filenames):
            return True
    return False
