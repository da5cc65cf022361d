"""The commented ``.autodev/config.toml`` that ``autodev init`` writes, and a small TOML emitter.

The template lists every setting, commented out, under its description. A line is a setting exactly
when it reads ``# key = value`` or ``# [table]`` (one space after ``#``): uncommenting all of those
lines gives a TOML file that loads to the rendered configuration. Descriptions, settings that are
unset (``# key: unset by default; example: key = value``) and indented examples never take that
form, so they stay comments.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from autodev.config.schema import AutodevConfig

__all__ = ["format_toml_key", "format_toml_value", "render_config_template"]

_WIDTH = 100
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}

_HEADER = (
    "# AutoDev configuration for this repository (.autodev/config.toml).",
    "#",
    "# Settings come from these sources; a later source overrides an earlier one:",
    "#   1. built-in defaults",
    "#   2. the [tool.autodev] table of pyproject.toml",
    "#   3. this file",
    '#   4. AUTODEV_* environment variables, "__" between nesting levels, values as in TOML',
    "#      (AUTODEV_QA_RETRY_LIMIT=5, AUTODEV_TOURNAMENTS__PLAN__ENABLED=false)",
    "#   5. command-line flags",
    "# Tables merge key by key; a list or a single value replaces the one from an earlier source.",
    "#",
    "# Every setting below is commented out and shows the value it has now. To change one,",
    "# uncomment its line and the table header above it. `autodev config show` prints the",
    "# effective value of every setting and the source it came from.",
)

# The schema's single example for `command` would be wrong for most gates.
_EXAMPLE_OVERRIDES: dict[tuple[str, ...], Any] = {
    ("qa_gates", "syntax", "command"): ["python", "-m", "compileall", "-q", "."],
    ("qa_gates", "lint", "command"): ["ruff", "check", "."],
    ("qa_gates", "build", "command"): ["npm", "run", "build"],
    ("qa_gates", "test", "command"): ["pytest", "-q"],
    ("qa_gates", "secretscan", "command"): ["detect-secrets", "scan"],
}


def render_config_template(config: AutodevConfig | None = None) -> str:
    """The text of a fresh ``.autodev/config.toml``: every setting of ``config``, commented out.

    ``config`` defaults to the built-in defaults. Uncommenting every ``# key = value`` line and
    every ``# [table]`` header yields a file that ``load_config`` turns back into ``config``.
    """
    lines = list(_HEADER)
    _render_table(lines, AutodevConfig() if config is None else config, ())
    return "\n".join(lines) + "\n"


def format_toml_key(parts: Sequence[str]) -> str:
    """A dotted TOML key, quoting the parts that are not bare keys (``price_table."gpt-5.5"``)."""
    return ".".join(part if _BARE_KEY.fullmatch(part) else _quote(part) for part in parts)


def format_toml_value(value: object) -> str:
    """``value`` (a str, int, float, bool, or a list or string-keyed mapping of them) written as a TOML
    value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{format_toml_key([key])} = {format_toml_value(item)}" for key, item in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(f"cannot write a {type(value).__name__} as a TOML value")


def _quote(text: str) -> str:
    escaped: list[str] = []
    for char in text:
        if char in _ESCAPES:
            escaped.append(_ESCAPES[char])
        elif not char.isprintable():
            # TOML forbids raw control characters, and a raw newline would end the comment line.
            code = ord(char)
            escaped.append(f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _render_table(lines: list[str], model: BaseModel, path: tuple[str, ...]) -> None:
    # TOML needs a table's own keys before its sub-tables, whatever the field order.
    subtables: list[tuple[str, FieldInfo, Any]] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel) or (isinstance(value, dict) and _holds_tables(info)):
            subtables.append((name, info, value))
            continue
        lines.append("")
        lines.extend(_describe(info))
        lines.append(_setting_line(name, value, info, (*path, name)))
    for name, info, value in subtables:
        here = (*path, name)
        lines.append("")
        lines.extend(_describe(info))
        if isinstance(value, BaseModel):
            lines.append(f"# [{format_toml_key(here)}]")
            _render_table(lines, value, here)
        else:
            _render_mapping(lines, value, info, here)


def _holds_tables(info: FieldInfo) -> bool:
    """Whether a mapping setting's values are tables of their own (else it is written inline)."""
    args = get_args(info.annotation)
    return len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel)


def _render_mapping(
    lines: list[str], mapping: Mapping[str, BaseModel], info: FieldInfo, path: tuple[str, ...]
) -> None:
    item_model: type[BaseModel] = get_args(info.annotation)[1]
    item_fields = item_model.model_fields
    lines.append("# Keys of each table:")
    for name, field in item_fields.items():
        lines.extend(
            textwrap.wrap(
                f"{name}: {field.description}",
                width=_WIDTH,
                initial_indent="#   ",
                subsequent_indent="#       ",
            )
        )
    if not mapping:
        lines.extend(_example_block(item_fields, info, path))
    for key, item in mapping.items():
        here = (*path, key)
        lines.append("")
        lines.append(f"# [{format_toml_key(here)}]")
        for name, field in item_fields.items():
            lines.append(_setting_line(name, getattr(item, name), field, (*here, name)))


def _example_block(item_fields: Mapping[str, FieldInfo], info: FieldInfo, path: tuple[str, ...]) -> list[str]:
    if not info.examples:
        return []
    block = ["# Example:", f"#     [{format_toml_key((*path, info.examples[0]))}]"]
    for name, field in item_fields.items():
        if field.examples:
            block.append(f"#     {name} = {format_toml_value(field.examples[0])}")
    return block


def _describe(info: FieldInfo) -> list[str]:
    return textwrap.wrap(info.description or "", width=_WIDTH, initial_indent="# ", subsequent_indent="# ")


def _setting_line(name: str, value: Any, info: FieldInfo, path: tuple[str, ...]) -> str:
    if value is not None and value != {}:
        return f"# {name} = {format_toml_value(value)}"
    line = f"# {name}: unset by default"
    example = _EXAMPLE_OVERRIDES.get(path, info.examples[0] if info.examples else None)
    if example is not None:
        line += f"; example: {name} = {format_toml_value(example)}"
    return line
