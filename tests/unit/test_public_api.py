"""The public surface: every exported name resolves, and the CLI starts without the heavy layers."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

import autodev


def _packages() -> list[str]:
    """Every package of ``autodev`` (a directory with an ``__init__.py``), found from the source."""
    found = ["autodev"]
    for module in pkgutil.walk_packages(autodev.__path__, "autodev."):
        if module.ispkg:
            found.append(module.name)
    return sorted(found)


PACKAGES = _packages()


def test_the_package_list_is_found_not_written() -> None:
    assert {"autodev.workspace", "autodev.orchestrator.execute", "autodev.state", "autodev.cli"} <= set(
        PACKAGES
    )


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    # ruff (RUF022) keeps __all__ sorted; what it cannot see is a lazy name that does not resolve.
    module = importlib.import_module(name)
    for attribute in getattr(module, "__all__", ()):
        assert getattr(module, attribute) is not None, attribute


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_exports_exactly_what_it_binds(name: str) -> None:
    """``__all__`` names every public name the package binds (eagerly, or lazily through ``_LAZY``), and
    nothing else; a package without ``__all__`` binds none (only its submodules are there to import)."""
    module = importlib.import_module(name)
    lazy = set(getattr(module, "_LAZY", {}))
    bound = {
        attribute
        for attribute, value in vars(module).items()
        if not attribute.startswith("_")
        and not isinstance(value, types.ModuleType)
        and attribute not in {"annotations", "TYPE_CHECKING", "Any"}
    }
    dunders = {attribute for attribute in getattr(module, "__all__", ()) if attribute.startswith("__")}
    assert set(getattr(module, "__all__", ())) == bound | lazy | (dunders & set(vars(module)))


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
