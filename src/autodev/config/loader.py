"""Build ``AutodevConfig`` from its layered sources, and say where each value came from.

Precedence, lowest first: built-in defaults, ``[tool.autodev]`` in ``pyproject.toml``,
``.autodev/config.toml``, ``AUTODEV_*`` environment variables, then command-line overrides. Tables
merge key by key; lists and single values replace what an earlier source set. The ``lanes`` table is
the exception: a source that defines lanes (a file's ``[lanes.<name>]``, or ``lanes`` set whole) replaces
the lanes before it; one that sets a key inside a lane (``AUTODEV_LANES__FAST__CONCURRENCY``) merges.

Every source is checked for unknown keys on its own, so an error names the source that holds the
typo. A value that fails validation is blamed on the highest-precedence source that set it. Whatever
goes wrong surfaces as a one-line ``ConfigError``; pydantic's ``ValidationError`` never reaches the
caller.

Environment variables: ``AUTODEV_<KEY>``, ``__`` between nesting levels, names case-insensitive
(``AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK=10``). A value is read as a TOML value when it is one
(``5``, ``false``, ``1.5``, ``["a", "b"]``, ``"x"``, ``{input_per_mtok = 1.0, ...}``) and as a plain
string otherwise. Because names are folded to lower case, a table keyed by model name
(``price_table``) is best set from the environment as a whole, as a TOML inline table.

A config file may be a link, but what it names must be a regular file of at most ``MAX_INPUT_FILE_BYTES``
(16 MiB), UTF-8 with or without a byte-order mark: a FIFO or a device is a ``ConfigError``, never waited on.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from autodev.config.schema import AutodevConfig
from autodev.config.template import format_toml_key
from autodev.errors import ConfigError
from autodev.files import MAX_INPUT_FILE_BYTES, read_bounded
from autodev.state.paths import AutodevPaths

__all__ = ["ENV_PREFIX", "NON_CONFIG_ENV", "ConfigEntry", "explain_config", "load_config"]

ENV_PREFIX = "AUTODEV_"

# Variables under the prefix that are no settings: the log level, and who an agent session is (claims).
NON_CONFIG_ENV: frozenset[str] = frozenset({"AUTODEV_LOG_LEVEL", "AUTODEV_SESSION_ID", "AUTODEV_SESSION_PID"})
"""``AUTODEV_*`` variables that are not configuration keys and that ``load_config`` therefore skips.

``AUTODEV_LOG_LEVEL`` is read by the logging setup, which runs before any configuration is loaded.
"""

_NESTING = "__"
_ENV_HINT = "; nesting levels are separated by '__', e.g. AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK"
_COMMAND_LINE = "command line"
_KEY_PART = re.compile(r'\s*(?:(?P<bare>[A-Za-z0-9_-]+)|"(?P<quoted>[^"\\]*)")\s*')
_TOML_POSITION = re.compile(r"\s*\(at (?:line (?P<line>\d+), column (?P<column>\d+)|end of document)\)$")


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One leaf of the effective configuration, for ``autodev config show``.

    ``source`` is ``"default"``, the path of the file that set the value, ``"env AUTODEV_..."`` or
    ``"command line"``.
    """

    key: str
    value: Any
    source: str


def load_config(
    repo_root: Path,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> AutodevConfig:
    """The configuration for the repository at ``repo_root``.

    ``env`` defaults to ``os.environ`` and is only read. ``overrides`` holds the command-line
    settings, keyed by dotted key (``{"tournaments.plan.enabled": False}``, with TOML quoting for
    key parts that are not bare, as in ``price_table."gpt-5.5"``) or by nested mappings. A ``None``
    value sets the key to ``None``, so leave out the flags the user did not give.

    Raises ``ConfigError`` naming the source, the key and the allowed keys or values.
    """
    return _resolve(repo_root, env, overrides).config


def explain_config(
    repo_root: Path,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[ConfigEntry]:
    """Every leaf of the effective configuration with the source of its value, sorted by key.

    Takes the same arguments as ``load_config`` and raises the same errors. An empty table (such as
    ``roles`` when no role is overridden) is one leaf whose value is ``{}``.
    """
    resolved = _resolve(repo_root, env, overrides)
    entries = [
        ConfigEntry(key=format_toml_key(path), value=value, source=resolved.label_of(path))
        for path, value in _leaves(resolved.config.model_dump(), ())
    ]
    return sorted(entries, key=lambda entry: entry.key)


@dataclass(frozen=True, slots=True)
class _Layer:
    """One source of settings: how errors name it, how ``explain_config`` names it, and its data.

    ``hint`` is appended to an unknown top-level key error, to explain the source's naming scheme.
    """

    source: str
    label: str
    data: dict[str, Any]
    hint: str = ""
    # Tables the source sets as a whole (see ``_WHOLE_TABLES``): a file's ``[lanes.*]``, or a variable or
    # override naming ``lanes`` itself; one naming a key inside a lane merges into the lanes there are.
    whole: frozenset[tuple[str, ...]] = frozenset()


@dataclass(frozen=True, slots=True)
class _Resolved:
    config: AutodevConfig
    layers: list[_Layer]
    # Path of every value a layer set -> index of the last layer that set it.
    origins: dict[tuple[str, ...], int]

    def label_of(self, path: tuple[str, ...]) -> str:
        index = self.origins.get(path)
        return "default" if index is None else self.layers[index].label


@dataclass(frozen=True, slots=True)
class _Table:
    """The keys a config table accepts; ``allowed`` is ``None`` when any key is accepted."""

    allowed: tuple[str, ...] | None
    children: Mapping[str, Any]
    any_child: Any = None

    def child(self, key: str) -> Any:
        return self.children.get(key, self.any_child)


def _resolve(
    repo_root: Path, env: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
) -> _Resolved:
    layers = [
        *_file_layers(repo_root),
        *_env_layers(os.environ if env is None else env),
        *_override_layers(overrides or {}),
    ]
    root = _model_table(AutodevConfig)
    merged = AutodevConfig().model_dump()
    origins: dict[tuple[str, ...], int] = {}
    for index, layer in enumerate(layers):
        _check_keys(layer.data, root, (), layer)
        _merge(merged, layer.data, (), index, origins, layer.whole)
    try:
        config = AutodevConfig.model_validate(merged)
    except ValidationError as exc:
        raise _translate(exc, layers, origins) from exc
    return _Resolved(config=config, layers=layers, origins=origins)


def _file_layers(repo_root: Path) -> list[_Layer]:
    layers: list[_Layer] = []
    pyproject = repo_root / "pyproject.toml"
    document = _read_toml(pyproject)
    if document is not None:
        tool = document.get("tool")
        section = tool.get("autodev") if isinstance(tool, dict) else None
        if section is not None:
            if not isinstance(section, dict):
                raise ConfigError(
                    "tool.autodev must be a table ([tool.autodev]), not a single value",
                    source=str(pyproject),
                )
            layers.append(
                _Layer(f"[tool.autodev] in {pyproject}", str(pyproject), section, whole=_whole_in(section))
            )
    config_file = AutodevPaths(repo_root).config
    document = _read_toml(config_file)
    if document is not None:
        layers.append(_Layer(str(config_file), str(config_file), document, whole=_whole_in(document)))
    return layers


def _read_toml(path: Path) -> dict[str, Any] | None:
    try:
        raw = read_bounded(
            path,
            limit=MAX_INPUT_FILE_BYTES,
            what="the configuration file",
            follow_symlinks=True,
            error=lambda problem: ConfigError(problem, source=str(path)),
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (bad byte at offset {exc.start}); save the file as UTF-8",
            source=str(path),
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_describe_toml_error(str(exc)), source=str(path)) from exc


def _describe_toml_error(message: str) -> str:
    position = _TOML_POSITION.search(message)
    if position is None:
        return f"invalid TOML: {message}"
    detail = message[: position.start()]
    if position["line"] is None:
        return f"invalid TOML at the end of the file: {detail}"
    return f"invalid TOML at line {position['line']}, column {position['column']}: {detail}"


def _env_layers(env: Mapping[str, str]) -> list[_Layer]:
    found: dict[tuple[str, ...], tuple[str, str]] = {}
    for name, raw in env.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NON_CONFIG_ENV:
            continue
        source = f"environment variable {name}"
        parts = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split(_NESTING))
        if not all(parts):
            raise ConfigError(
                "names no config key: expected AUTODEV_<KEY>, with '__' between nesting levels "
                "and nothing empty around them",
                source=source,
            )
        if parts in found:
            raise ConfigError(
                f"sets the same key as {found[parts][0]}; remove one of them",
                source=source,
                key=format_toml_key(parts),
            )
        found[parts] = (name, raw)
    # A variable naming a whole table goes first so that one naming a key inside it wins.
    return [
        _Layer(
            f"environment variable {name}",
            f"env {name}",
            _nest(parts, _parse_env_value(raw)),
            hint=_ENV_HINT,
            whole=_WHOLE_TABLES & {parts},
        )
        for parts, (name, raw) in sorted(found.items(), key=lambda item: (len(item[0]), item[0]))
    ]


def _parse_env_value(raw: str) -> Any:
    try:
        document = tomllib.loads(f"value = {raw}")
    except tomllib.TOMLDecodeError:
        return raw
    # Text such as "1\nother = 2" parses to more than one key: that is not a single TOML value.
    return document["value"] if len(document) == 1 else raw


def _override_layers(overrides: Mapping[str, Any]) -> list[_Layer]:
    if not overrides:
        return []
    data: dict[str, Any] = {}
    whole: set[tuple[str, ...]] = set()
    for key, value in overrides.items():
        parts = _split_dotted_key(key)
        whole |= _WHOLE_TABLES & {parts}
        _deep_merge(data, _nest(parts, _plain(value)))
    return [_Layer(_COMMAND_LINE, _COMMAND_LINE, data, whole=frozenset(whole))]


def _split_dotted_key(key: str) -> tuple[str, ...]:
    parts: list[str] = []
    position = 0
    while True:
        match = _KEY_PART.match(key, position)
        if match is None:
            break
        parts.append(match["bare"] if match["bare"] is not None else match["quoted"])
        position = match.end()
        if position == len(key):
            return tuple(parts)
        if key[position] != ".":
            break
        position += 1
    raise ConfigError(
        f"{key!r} is not a dotted key such as tournaments.plan.enabled (quote a part that holds "
        'dots: price_table."gpt-5.5".input_per_mtok)',
        source=_COMMAND_LINE,
    )


def _nest(parts: tuple[str, ...], value: Any) -> dict[str, Any]:
    nested: Any = value
    for part in reversed(parts):
        nested = {part: nested}
    result: dict[str, Any] = nested
    return result


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _deep_merge(base: dict[str, Any], incoming: Mapping[str, Any]) -> None:
    for key, value in incoming.items():
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _deep_merge(current, value)
        else:
            base[key] = copy.deepcopy(value)


# Tables a source sets as a whole, replacing what the defaults or an earlier source had: a file that defines
# a lane replaces the default set of lanes, it does not add to it.
_WHOLE_TABLES = frozenset({("lanes",)})


def _whole_in(document: Mapping[str, Any]) -> frozenset[tuple[str, ...]]:
    return frozenset(table for table in _WHOLE_TABLES if table[0] in document)


def _merge(
    base: dict[str, Any],
    incoming: Mapping[str, Any],
    path: tuple[str, ...],
    index: int,
    origins: dict[tuple[str, ...], int],
    whole: frozenset[tuple[str, ...]] = frozenset(),
) -> None:
    """Deep-merge one layer into ``base``, recording that layer ``index`` set each of its values."""
    for key, value in incoming.items():
        here = (*path, key)
        if isinstance(value, Mapping):
            current = base.get(key)
            if not isinstance(current, dict) or here in whole:
                _forget(origins, here)
                current = base[key] = {}
            _merge(current, value, here, index, origins, whole)
            if not current:
                origins[here] = index
        else:
            _forget(origins, here)
            base[key] = copy.deepcopy(value)
            origins[here] = index


def _forget(origins: dict[tuple[str, ...], int], path: tuple[str, ...]) -> None:
    for recorded in [p for p in origins if p[: len(path)] == path]:
        del origins[recorded]


def _table_of(annotation: Any) -> _Table | None:
    """The shape of a table-valued setting (a nested model or a dict), or ``None`` for a leaf."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_table(annotation)
    if get_origin(annotation) is dict:
        key_type, value_type = get_args(annotation)
        if get_origin(key_type) is Literal:
            names = tuple(str(name) for name in get_args(key_type))
            return _Table(allowed=names, children=dict.fromkeys(names, value_type))
        return _Table(allowed=None, children={}, any_child=value_type)
    return None


def _model_table(model: type[BaseModel]) -> _Table:
    fields = model.model_fields
    return _Table(allowed=tuple(fields), children={n: f.annotation for n, f in fields.items()})


def _check_keys(data: Mapping[str, Any], table: _Table, path: tuple[str, ...], layer: _Layer) -> None:
    for key, value in data.items():
        here = (*path, key)
        if table.allowed is not None and key not in table.allowed:
            raise _unknown_key(here, table.allowed, layer)
        child = _table_of(table.child(key))
        if child is not None and isinstance(value, Mapping):
            _check_keys(value, child, here, layer)


def _unknown_key(path: tuple[str, ...], allowed: tuple[str, ...], layer: _Layer) -> ConfigError:
    where = f"in [{format_toml_key(path[:-1])}]" if len(path) > 1 else "at the top level"
    close = difflib.get_close_matches(path[-1], allowed, n=1)
    suggestion = f" (did you mean {close[0]!r}?)" if close else ""
    hint = layer.hint if len(path) == 1 else ""
    return ConfigError(
        f"unknown key{suggestion}; allowed keys {where}: {', '.join(sorted(allowed))}{hint}",
        source=layer.source,
        key=format_toml_key(path),
    )


def _translate(
    exc: ValidationError, layers: list[_Layer], origins: dict[tuple[str, ...], int]
) -> ConfigError:
    problems = [
        (_blame(error["loc"], layers, origins), _format_loc(error["loc"]), _describe(error))
        for error in exc.errors(include_url=False)
    ]
    source, key, message = problems[0]
    for other_source, other_key, other_message in problems[1:]:
        message += f"; also {other_source or 'default'}: {other_key}: {other_message}"
    return ConfigError(message, source=source, key=key or None)


def _blame(
    loc: tuple[str | int, ...], layers: list[_Layer], origins: dict[tuple[str, ...], int]
) -> str | None:
    """The source of the highest-precedence layer that set ``loc`` or a value inside it."""
    related = [
        index for path, index in origins.items() if loc[: len(path)] == path or path[: len(loc)] == loc
    ]
    if not related and len(loc) > 1:
        # A required key missing from a table (``[price_table."m"]`` without output_per_mtok): blame the
        # source that wrote the table.
        table = loc[:-1]
        related = [index for path, index in origins.items() if path[: len(table)] == table]
    return layers[max(related)].source if related else None


def _format_loc(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + format_toml_key((part,))
    return text


def _describe(error: ErrorDetails) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing" or isinstance(error["input"], dict):
        return message
    return f"{message} (got {error['input']!r})"


def _leaves(data: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in data.items():
        here = (*path, key)
        if isinstance(value, dict) and value:
            yield from _leaves(value, here)
        else:
            yield here, value
