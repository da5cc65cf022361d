"""The public surface: every exported name resolves, and the CLI starts without the heavy layers."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import autodev

PACKAGES = [
    "autodev",
    "autodev.state",
    "autodev.config",
    "autodev.orchestrator",
    "autodev.adapters",
    "autodev.agents",
    "autodev.guardrails",
    "autodev.qa",
    "autodev.cli",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    # ruff (RUF022) keeps __all__ sorted; what it cannot see is a lazy name that does not resolve.
    module = importlib.import_module(name)
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None, attribute


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        autodev.Nope  # noqa: B018


def test_errors_share_one_root() -> None:
    from autodev import errors

    classes = [getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)]
    assert len(classes) >= 14
    for cls in classes:
        assert issubclass(cls, errors.AutodevError)


def test_help_and_import_do_not_load_pydantic_structlog_or_rich() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['autodev', '--help']\n"
        "from autodev.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'structlog', 'rich'})\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "HEAVY []" in result.stdout
