"""Write scopes: where a run's writers may write, as the user declared it.

A scope is a list of repository-relative patterns. ``*`` and ``?`` match within one path component and a
``**`` component matches any number of components (``src/**`` covers ``src`` and everything below it).

Only the user's own words declare one: a ``Write scope:`` line in the intent (or in a plan file, or
``--write-scope``). ``parse_write_scope`` reads those lines with the exact rules below, so that a path an
agent mentions, a quoted diagnostic or an example in a code block never grants anything:

- the line starts with ``write scope:`` (any case), at the very start of the line;
- it is outside fenced code blocks (```` ``` ```` / ``~~~``) and block quotes (``>``);
- its paths are separated by commas or semicolons and are relative to the repository root.

``ground_scope`` then checks the patterns against the real tree: an existing file or directory, or a new
file whose parent directory exists; nothing that resolves outside the repository through a symlink.
``covers`` is component-aware containment: a claim is covered only when every path it can name is, so a
wildcard can never widen what a scope grants (``src/*`` does not cover ``src/**``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autodev.errors import AutodevError

__all__ = [
    "WHOLE_REPOSITORY",
    "ScopeError",
    "WriteScope",
    "covers",
    "ground_scope",
    "normalize_pattern",
    "outside",
    "parse_scope_list",
    "parse_write_scope",
]

WHOLE_REPOSITORY = "**"
_PREFIX = "write scope:"
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_QUOTE = re.compile(r"^ {0,3}>")
_WILDCARDS = frozenset("*?")
# Characters a pattern may not hold: other glob syntax (whose meaning differs between tools) and what no
# repository path of ours contains.
_REFUSED_CHARACTERS = frozenset("[]{}!\\\0\n\r")


class ScopeError(AutodevError):
    """A write scope that cannot be used as written (a path outside the repository, bad syntax)."""


@dataclass(frozen=True, slots=True)
class WriteScope:
    """Normalized patterns, in the order they were declared, without repeats."""

    patterns: tuple[str, ...]

    def covers(self, claim: str) -> bool:
        """Whether every path ``claim`` (a path or a pattern) can name is inside this scope."""
        return any(covers(pattern, claim) for pattern in self.patterns)

    def uncovered(self, claims: Iterable[str]) -> list[str]:
        """The ``claims`` this scope does not cover, in their order."""
        return [claim for claim in claims if not self.covers(claim)]

    def union(self, other: Iterable[str]) -> WriteScope:
        return WriteScope(tuple(dict.fromkeys((*self.patterns, *other))))

    def render(self) -> str:
        return ", ".join(self.patterns) if self.patterns else "(nothing)"


def _without_fences_and_quotes(text: str) -> Iterable[str]:
    """The lines of ``text`` that are neither inside a fenced code block nor block-quoted."""
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            # A fence closes with a run of the same character at least as long as the one that opened it.
            closes = opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence)
            if closes and not line.strip().lstrip(fence[0]):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        if _QUOTE.match(line):
            continue
        yield line


def parse_write_scope(text: str) -> WriteScope | None:
    """Every ``Write scope:`` declaration in ``text`` (the user's own words), or None when there is none.

    Several lines add up. A declaration that is malformed (an absolute path, ``..``) raises ``ScopeError``
    rather than being dropped: a user who wrote a scope meant one.
    """
    patterns: list[str] = []
    found = False
    for line in _without_fences_and_quotes(text):
        if line[: len(_PREFIX)].lower() != _PREFIX:
            continue
        found = True
        patterns.extend(parse_scope_list(line[len(_PREFIX) :]))
    if not found:
        return None
    return WriteScope(tuple(dict.fromkeys(patterns)))


def parse_scope_list(text: str) -> list[str]:
    """The normalized patterns of one comma- or semicolon-separated list."""
    patterns = []
    for raw in re.split(r"[,;]", text):
        entry = raw.strip().strip("`").strip()
        if entry:
            patterns.append(normalize_pattern(entry))
    return patterns


def normalize_pattern(entry: str) -> str:
    """``entry`` as a canonical repository-relative pattern (``./src/`` → ``src/**``)."""
    if any(char in _REFUSED_CHARACTERS for char in entry):
        raise ScopeError(
            f"write scope entry {entry!r} uses characters a scope cannot hold; "
            "write repository-relative paths with * ? or ** only, separated by commas"
        )
    if entry.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", entry):
        raise ScopeError(
            f"write scope entry {entry!r} is not repository-relative; write it as a path from the "
            "repository root (src/**, not /home/.../src)"
        )
    directory = entry.endswith("/")
    parts = [part for part in entry.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ScopeError(f"write scope entry {entry!r} leaves its directory (..); name the paths inside it")
    if any("**" in part and part != "**" for part in parts):
        raise ScopeError(f"write scope entry {entry!r}: ** must be a whole path component (src/**/x.py)")
    if not parts:
        return WHOLE_REPOSITORY
    # Consecutive ** components mean the same as one.
    collapsed = [
        part for index, part in enumerate(parts) if not (part == "**" and parts[index - 1 : index] == ["**"])
    ]
    if directory and collapsed[-1] != "**":
        collapsed.append("**")
    return "/".join(collapsed)


def _has_wildcard(component: str) -> bool:
    return any(char in _WILDCARDS for char in component)


@cache
def _component_regex(component: str) -> re.Pattern[str]:
    translated = "".join(
        "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in component
    )
    return re.compile(f"{translated}\\Z")


def _component_covers(scope: str, claim: str) -> bool:
    if not _has_wildcard(claim):
        return _component_regex(scope).match(claim) is not None
    # A wildcard claim is covered only by a component that matches everything it can match.
    return scope in (claim, "*")


@cache
def _contains(scope: tuple[str, ...], claim: tuple[str, ...]) -> bool:
    if not scope:
        return not claim
    head, rest = scope[0], scope[1:]
    if head == "**":
        return _contains(rest, claim) or (bool(claim) and _contains(scope, claim[1:]))
    if not claim or claim[0] == "**":
        return False
    return _component_covers(head, claim[0]) and _contains(rest, claim[1:])


def covers(pattern: str, claim: str) -> bool:
    """Whether ``pattern`` covers every path that ``claim`` (a normalized path or pattern) can name."""
    return _contains(tuple(pattern.split("/")), tuple(normalize_pattern(claim).split("/")))


def outside(scope: WriteScope, paths: Iterable[str]) -> list[str]:
    """The ``paths`` (repository-relative files) that ``scope`` does not cover, sorted."""
    return sorted(path for path in set(paths) if not scope.covers(path))


def _literal_prefix(pattern: str) -> list[str]:
    prefix = []
    for part in pattern.split("/"):
        if _has_wildcard(part):
            break
        prefix.append(part)
    return prefix


def ground_scope(root: Path, patterns: Sequence[str]) -> WriteScope:
    """Check ``patterns`` against the tree at ``root``; raise ``ScopeError`` naming the first that fails.

    The part of a pattern before its first wildcard must be an existing file or directory, or a new file
    whose parent directory exists; resolved (symlinks followed), it must stay inside the repository. A
    pattern naming an existing directory covers everything below it.
    """
    real_root = Path(os.path.realpath(root))
    grounded: list[str] = []
    for pattern in patterns:
        prefix = _literal_prefix(pattern)
        literal = root.joinpath(*prefix) if prefix else root
        whole = len(prefix) == len(pattern.split("/"))
        if literal.exists() or literal.is_symlink():
            target = Path(os.path.realpath(literal))
        elif whole and literal.parent.is_dir():
            target = Path(os.path.realpath(literal.parent)) / literal.name
        else:
            missing = "/".join(prefix)
            raise ScopeError(
                f"write scope entry {pattern!r} names {missing!r}, which does not exist in the repository "
                "(a new file needs an existing parent directory); correct the path or create the directory"
            )
        if target != real_root and real_root not in target.parents:
            raise ScopeError(
                f"write scope entry {pattern!r} resolves outside the repository ({target}) through a "
                "symlink; name the paths inside the repository instead"
            )
        if whole and literal.is_dir() and not literal.is_symlink():
            pattern = f"{pattern}/**" if pattern else WHOLE_REPOSITORY
        grounded.append(pattern)
    return WriteScope(tuple(dict.fromkeys(grounded)))
