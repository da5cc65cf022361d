"""Short platform names -> adapter classes, imported only when asked for.

Importing ``autodev.adapters`` must stay cheap, and an adapter for a CLI the user does not have should
cost nothing; so the table holds dotted paths, and ``adapter_class`` imports one on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from autodev.adapters.base import PlatformAdapter
from autodev.errors import ConfigError

if TYPE_CHECKING:
    from autodev.config.schema import AutodevConfig

__all__ = ["ADAPTERS", "adapter_class", "create_adapter"]

_Build = Callable[[type[Any], Path, "AutodevConfig", dict[str, Any]], PlatformAdapter]


def _agent_cli(cls: type[Any], repo_root: Path, config: AutodevConfig, options: dict[str, Any]) -> Any:
    return cls(repo_root=repo_root, config=config, **options)


def _inline(cls: type[Any], repo_root: Path, config: AutodevConfig, options: dict[str, Any]) -> Any:
    options.setdefault("max_answer_bytes", config.inline.max_answer_bytes)
    return cls(repo_root=repo_root, **options)


def _scripted(cls: type[Any], repo_root: Path, config: AutodevConfig, options: dict[str, Any]) -> Any:
    script = options.pop("script", None)
    if script is None:
        raise ConfigError(
            "the scripted platform needs a script: pass script= a .toml/.json path or a Script",
            key="platform",
        )
    if isinstance(script, str | Path):
        return cls.from_file(Path(script), **options)
    return cls(script=script, **options)


class _Entry(NamedTuple):
    path: str
    build: _Build


_REGISTRY: Mapping[str, _Entry] = MappingProxyType(
    {
        "claude_code": _Entry("autodev.adapters.claude_code:ClaudeCodeAdapter", _agent_cli),
        "codex": _Entry("autodev.adapters.codex:CodexAdapter", _agent_cli),
        "cursor": _Entry("autodev.adapters.cursor:CursorAdapter", _agent_cli),
        "opencode": _Entry("autodev.adapters.opencode:OpenCodeAdapter", _agent_cli),
        "gemini": _Entry("autodev.adapters.gemini:GeminiAdapter", _agent_cli),
        "inline": _Entry("autodev.adapters.inline:InlineAdapter", _inline),
        "scripted": _Entry("autodev.adapters.scripted:ScriptedAdapter", _scripted),
    }
)

ADAPTERS: Mapping[str, str] = MappingProxyType({name: entry.path for name, entry in _REGISTRY.items()})
"""Platform name -> ``"module:Class"`` of its adapter."""


def adapter_class(name: str) -> type[PlatformAdapter]:
    """The adapter class registered as ``name``, imported now; ``ConfigError`` lists the valid names."""
    entry = _REGISTRY.get(name)
    if entry is None:
        hint = "; resolve 'auto' with detect_platform() first" if name == "auto" else ""
        raise ConfigError(
            f"unknown platform {name!r}; valid platforms: {', '.join(_REGISTRY)}{hint}", key="platform"
        )
    module_name, _, class_name = entry.path.partition(":")
    cls = getattr(import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, PlatformAdapter)):
        raise TypeError(f"{entry.path} is registered as an adapter but is not a PlatformAdapter subclass")
    return cls


def create_adapter(name: str, *, repo_root: Path, config: AutodevConfig, **options: Any) -> PlatformAdapter:
    """Build the adapter for platform ``name``.

    ``options`` go to the adapter's constructor: ``executable=`` for the agent CLIs; for ``scripted``,
    ``script=`` is a path to a ``.toml``/``.json`` script or a ``Script`` (or mapping) in memory.
    """
    cls = adapter_class(name)
    return _REGISTRY[name].build(cls, repo_root, config, dict(options))
