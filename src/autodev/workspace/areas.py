"""Area maps: where things live in the code and how an area is tested, kept in the project's notes file.

The notes file (config ``areas``; by default ``AGENTS.md``, else ``CLAUDE.md``) may hold a ``## Areas``
section with one ``### <area>`` block per area, each with these lines (all optional)::

    ## Areas
    ### Parser
    - Code map: `parse_item` in src/parse.py, `Token` in src/lex.py
    - Test recipe: `pytest tests/test_parse.py -q`
    - Paths: src/parse.py src/lex.py tests/test_parse*
    - Checked: 1a2b3c4

The *anchors* of an area are the backticked tokens of its code map; ``Paths`` are git globs (none: the whole
repository); ``Checked`` is the commit at which someone last made sure the map is right
(``autodev areas --mark``). An area is *stale* when an anchor is no longer found in its paths
(``git grep -F``), or when ``Checked`` is set and at least ``area_stale_commits`` commits touched its paths
since. Without a ``## Areas`` section the feature is silent.

Synchronous on purpose: ``autodev areas`` runs it without the orchestrator, and the execute phase calls it
in a worker thread after a task lands.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autodev.errors import AutodevError
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.gitsafety import run_git_sync
from autodev.state.atomic import atomic_write_bytes

__all__ = [
    "DEFAULT_NOTES_FILES",
    "Area",
    "AreaReport",
    "area_prompt_block",
    "areas_for_files",
    "check_area",
    "mark_area",
    "notes_file",
    "read_areas",
    "refresh_task_id",
]

DEFAULT_NOTES_FILES = ("AGENTS.md", "CLAUDE.md")

_SECTION = re.compile(r"##[ \t]+Areas[ \t]*#*[ \t]*", re.IGNORECASE)
_AREA = re.compile(r"###[ \t]+(.+?)[ \t]*#*[ \t]*")
_FIELD = re.compile(
    r"[-*+][ \t]+(?:\*\*)?(code map|test recipe|paths|checked)(?:\*\*)?[ \t]*:(?:\*\*)?(.*)", re.IGNORECASE
)
_BACKTICKED = re.compile(r"`([^`\n]+)`")
# A variable assignment before the program: shell syntax, as operators and $(...) are.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_GIT_TIMEOUT_S = 60.0
# A refresh task's id is ``t-map-<slug>``; ids are at most 40 characters and file-name safe.
_SLUG_MAX = 28


class AreaError(AutodevError):
    """An ``autodev areas`` request that cannot be met (an unknown area, no notes file)."""


@dataclass(frozen=True, slots=True)
class Area:
    """One ``### <area>`` block of the notes file; ``line`` is its heading's (1-based)."""

    name: str
    anchors: tuple[str, ...]
    test_recipe: str | None
    paths: tuple[str, ...]
    checked: str | None
    line: int

    @property
    def slug(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:_SLUG_MAX].strip("-")
        return slug or "area"

    def test_argv(self) -> tuple[str, ...] | None:
        """The test recipe as a command: its first backticked span (else the whole recipe), split like a
        shell would split it. None when there is no recipe, or it is shell syntax rather than one command
        (``cd web && npm test``, ``FOO=1 pytest``, a pipe): gates run no shell, so the test gate keeps the
        command it would run anyway."""
        if not self.test_recipe:
            return None
        spans = _BACKTICKED.findall(self.test_recipe)
        command = spans[0] if spans else self.test_recipe
        try:
            argv = tuple(shlex.split(command))
            # Split again with the shell's operators as tokens of their own, to find them unquoted.
            lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            operators = [token for token in lexer if token and set(token) <= set("();<>|&")]
        except ValueError:
            return None
        if not argv or operators or _ASSIGNMENT.match(argv[0]) or any("$(" in token for token in argv):
            return None
        return argv

    def covers(self, path: str) -> bool:
        """Whether ``path`` (relative to the repository) is one of the area's paths."""
        return not self.paths or any(_glob_match(pattern, path) for pattern in self.paths)


@dataclass(frozen=True, slots=True)
class AreaReport:
    """What ``check_area`` found: anchors no longer in the code, commits on the area's paths since
    ``Checked`` (None: not checked, or an unknown commit, then ``unknown_checked``), and the verdict."""

    area: Area
    missing: tuple[str, ...]
    commits_since: int | None
    unknown_checked: bool
    stale: bool

    def line(self) -> str:
        parts = [f"{self.area.name}: {'stale' if self.stale else 'not stale'}"]
        if self.missing:
            parts.append("missing anchors: " + ", ".join(f"`{token}`" for token in self.missing))
        else:
            parts.append(f"{len(self.area.anchors)} anchor(s) found")
        if self.area.checked is None:
            parts.append("never checked")
        elif self.unknown_checked:
            parts.append(f"Checked {self.area.checked} is not a commit of this repository")
        else:
            parts.append(f"{self.commits_since} commit(s) on its paths since {self.area.checked}")
        return " · ".join(parts)


def notes_file(repo_root: Path, configured: str | None) -> Path | None:
    """The notes file holding the area maps: ``configured`` (relative to the repository), else the first
    of ``AGENTS.md`` and ``CLAUDE.md`` that exists; None when there is none."""
    names = (configured,) if configured else DEFAULT_NOTES_FILES
    for name in names:
        path = repo_root / name
        if path.is_file():
            return path
    return None


def read_areas(path: Path | None) -> list[Area]:
    """The areas of the notes file ``path`` in file order (none without a ``## Areas`` section)."""
    if path is None:
        return []
    return _parse(_read(path).splitlines())


def _read(path: Path) -> str:
    try:
        return read_bounded_text(
            path,
            limit=MAX_INPUT_FILE_BYTES,
            what="the notes file",
            follow_symlinks=True,
            error=led_by(path, AreaError),
            encoding="utf-8-sig",
        )
    except OSError as exc:
        raise AreaError(f"{path}: cannot read the notes file ({exc.strerror or exc})") from exc


def _parse(lines: Sequence[str]) -> list[Area]:
    areas: list[Area] = []
    in_section = False
    current: dict[str, str] = {}
    heading: tuple[str, int] | None = None
    field: str | None = None

    def close() -> None:
        if heading is not None:
            areas.append(_area(heading[0], heading[1], current))

    for lineno, raw in enumerate(lines, start=1):
        text = raw.strip()
        if text.startswith("#") and not text.startswith("###"):
            if in_section:
                break  # the next section of level 1 or 2 ends the areas
            in_section = bool(_SECTION.fullmatch(text))
            continue
        if not in_section:
            continue
        match = _AREA.fullmatch(text)
        if match is not None and not text.startswith("####"):
            close()
            heading, current, field = (match.group(1), lineno), {}, None
            continue
        if heading is None:
            continue
        found = _FIELD.fullmatch(text)
        if found is not None:
            field = found.group(1).lower()
            current[field] = found.group(2).strip()
        elif field is not None and text and raw[:1] in (" ", "\t") and not text.startswith(("-", "*", "+")):
            current[field] = f"{current[field]} {text}".strip()  # an indented continuation line
        else:
            field = None
    close()
    return areas


def _area(name: str, line: int, fields: dict[str, str]) -> Area:
    checked = fields.get("checked", "").strip("` ")
    return Area(
        name=name,
        anchors=tuple(
            dict.fromkeys(token.strip() for token in _BACKTICKED.findall(fields.get("code map", "")))
        ),
        test_recipe=fields.get("test recipe") or None,
        paths=tuple(fields.get("paths", "").replace(",", " ").split()),
        checked=checked.split()[0] if checked else None,
        line=line,
    )


def _glob_match(pattern: str, path: str) -> bool:
    """``path`` against a git glob: ``*`` within one directory, ``**`` across directories; a pattern
    without wildcards also names everything below it (a directory), as a git pathspec does."""
    pattern = pattern.strip("/")
    if not any(char in pattern for char in "*?["):
        return path == pattern or path.startswith(pattern + "/")
    return _glob_regex(pattern).fullmatch(path) is not None


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(out))


def _git(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return run_git_sync(repo_root, *args, timeout_s=_GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AreaError(f"git {args[0]} could not run in {repo_root}: {exc}") from exc


def _pathspecs(area: Area) -> list[str]:
    return [f":(glob){pattern.strip('/')}" for pattern in area.paths] or ["."]


def check_area(repo_root: Path, area: Area, *, stale_commits: int) -> AreaReport:
    """Check ``area`` against the repository at ``repo_root`` (its tracked files and HEAD)."""
    specs = _pathspecs(area)
    missing = tuple(
        token
        for token in area.anchors
        if _git(repo_root, "grep", "-F", "-q", "-e", token, "--", *specs).returncode != 0
    )
    commits: int | None = None
    unknown = False
    if area.checked is not None:
        known = _git(repo_root, "rev-parse", "--verify", "-q", f"{area.checked}^{{commit}}")
        if known.returncode != 0:
            unknown = True
        else:
            counted = _git(repo_root, "rev-list", "--count", f"{known.stdout.strip()}..HEAD", "--", *specs)
            commits = int(counted.stdout.strip() or 0) if counted.returncode == 0 else None
    stale = bool(missing) or (commits is not None and commits >= stale_commits)
    return AreaReport(area, missing, commits, unknown, stale)


def mark_area(path: Path, name: str, repo_root: Path) -> str:
    """Write ``Checked: <HEAD's short sha>`` into area ``name`` of the notes file ``path`` (adding the line
    when it has none); the sha written."""
    head = _git(repo_root, "rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        raise AreaError("the repository has no commit yet: commit something, then mark the area")
    sha = head.stdout.strip()
    path = path.resolve()  # a linked notes file (AGENTS.md -> CLAUDE.md) stays linked
    text = _read(path)
    lines = text.splitlines(keepends=True)
    area = find_area(_parse([line.rstrip("\r\n") for line in lines]), name)
    end = len(lines)
    for index in range(area.line, len(lines)):
        stripped = lines[index].strip()
        if stripped.startswith("#"):
            end = index
            break
    checked = next(
        (
            index
            for index in range(area.line, end)
            if (found := _FIELD.fullmatch(lines[index].strip())) and found.group(1).lower() == "checked"
        ),
        None,
    )
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    entry = f"- Checked: {sha}{newline}"
    if checked is not None:
        lines[checked] = entry
    else:
        last_field = max(
            (index for index in range(area.line, end) if lines[index].strip()), default=area.line - 1
        )
        if not lines[last_field].endswith(("\n", "\r")):
            lines[last_field] += newline
        lines.insert(last_field + 1, entry)
    atomic_write_bytes(path, "".join(lines).encode("utf-8"))
    return sha


def find_area(areas: Sequence[Area], name: str) -> Area:
    """The area called ``name`` (case-insensitive, or by its slug); ``AreaError`` naming the known ones."""
    wanted = name.strip().lower()
    for area in areas:
        if area.name.lower() == wanted or area.slug == wanted:
            return area
    known = ", ".join(area.name for area in areas) or "none"
    raise AreaError(f"no area {name!r} in the notes file's ## Areas section (areas: {known})")


def areas_for_files(areas: Sequence[Area], files: Sequence[str]) -> list[Area]:
    """The areas whose paths hold one of ``files`` (an area without Paths holds every file)."""
    return [area for area in areas if any(area.covers(path) for path in files)]


def area_prompt_block(areas: Sequence[Area], source: str) -> str:
    """The area maps an agent is given, as it reads them in the notes file ``source``."""
    if not areas:
        return ""
    lines = [f"AREA MAPS (from {source}): where things live and how each area is tested."]
    for area in areas:
        lines.append(f"- {area.name}:")
        if area.anchors:
            lines.append("  code map: " + ", ".join(f"`{token}`" for token in area.anchors))
        if area.test_recipe:
            lines.append(f"  test recipe: {area.test_recipe}")
        if area.paths:
            lines.append("  paths: " + " ".join(area.paths))
    return "\n".join(lines)


def refresh_task_id(area: Area, taken: Sequence[str]) -> str:
    """``t-map-<slug>``, or with ``-2``, ``-3``, ... when a task of the plan has that id (ids are never
    reused)."""
    base = f"t-map-{area.slug}"
    used = {task_id.lower() for task_id in taken}
    candidate, n = base, 1
    while candidate.lower() in used:
        n += 1
        candidate = f"{base}-{n}"
    return candidate
