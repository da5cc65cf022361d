"""Plan markdown to ``Plan`` and back.

The parser is one pass over the lines with compiled regexes. It is forgiving about what surrounds
the plan (an LLM preamble, code fences, free text and unknown bullets end up in a description, so
nothing the author wrote is lost) and strict about the hierarchy and the ids, because every id
becomes a file name and a dependency edge. The canonical format, which ``render_plan_markdown``
writes::

    # Plan: <title>
    <plan description>
    ## Phase <id>: <title>
    <phase description>
    ### Task <id>: <title>
    - Description: <text>
      <continuation lines indented by two or more spaces>
    - Files: path1, path2
    - Model: haiku | sonnet | opus
    - Effort: <1h | 1h | 5h | 1d | 1w
    - Priority: P0 | P1 | P2 | P3
    - Depends: 1.1, 1.2
    - Acceptance:
      - [ ] criterion
      - [x] criterion already met

``Model`` is the task's level (haiku < sonnet < opus, AutoDev's tiers fast < standard < strong; the tier
names are accepted too); no line means opus. It may also be written indented without a bullet
(``  Model: sonnet``). An unknown value or a second Model line is an error; words after the value are a
warning, kept in ``plan.metadata["warnings"]``. ``Effort`` and ``Priority`` follow the same rules.

A byte-order mark before the first line is ignored. ``read_plan_markdown`` reads a plan file for the
parser: it may be a link, but what it names must be a regular file of at most ``MAX_INPUT_FILE_BYTES``
(16 MiB), so a FIFO or a device is a ``PlanParseError`` instead of a read that never ends.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from autodev.errors import PathEscapeError, PlanParseError, quote
from autodev.files import MAX_INPUT_FILE_BYTES, read_bounded_text
from autodev.state.hashing import canonical_json, plan_content_hash, sha256_hex
from autodev.state.paths import normalize_repo_path
from autodev.state.schemas import (
    EFFORTS,
    PRIORITIES,
    AcceptanceCriterion,
    Effort,
    ModelTier,
    Phase,
    Plan,
    Priority,
    Task,
)
from autodev.state.validation import check_id, validate_dag

__all__ = [
    "MODEL_NAMES",
    "TIER_NAMES",
    "compute_content_hash",
    "parse_plan_markdown",
    "parse_task_blocks",
    "read_plan_markdown",
    "render_plan_markdown",
    "validate_dag",
]

_BOM = "\ufeff"

_DEFAULT_AGENT = "developer"
# A whole Files/Depends value meaning "nothing"; render backticks items that would read as one.
_EMPTY_VALUES = frozenset({"", "none", "-", "n/a"})

_RE_PLAN_TITLE = re.compile(r"#[ \t]+Plan[ \t]*:(.*)", re.IGNORECASE)
_RE_PLAN_LIKE = re.compile(r"#[ \t]+Plan\b", re.IGNORECASE)
_RE_PHASE = re.compile(r"##[ \t]+Phase[ \t]+([^:]*?)[ \t]*:(.*)", re.IGNORECASE)
_RE_PHASE_LIKE = re.compile(r"##[ \t]+Phase\b", re.IGNORECASE)
_RE_TASK = re.compile(r"###[ \t]+Task[ \t]+([^:]*?)[ \t]*:(.*)", re.IGNORECASE)
_RE_TASK_LIKE = re.compile(r"###[ \t]+Task\b", re.IGNORECASE)
_FIELD_KEY = r"description|files|depends[ \t]+on|depends|dependencies|acceptance[ \t]+criteria|acceptance"
# "- Files: x", "- **Files:** x" and "- **Files**: x"; bold is matched only as a pair so that a
# value starting with bold text keeps its asterisks.
_RE_FIELD = re.compile(
    rf"[-*+][ \t]+(?:\*\*({_FIELD_KEY})(?::\*\*|\*\*:)|({_FIELD_KEY}):)(.*)", re.IGNORECASE
)
# One-value lines: "- Model: sonnet", "- **Effort:** 1h", and the indented form without a bullet
# ("  Priority: P1").
_RE_LEVEL = re.compile(
    r"(?:[-*+][ \t]+)?(?:\*\*(model|effort|priority)(?::\*\*|\*\*:)|(model|effort|priority):)(.*)",
    re.IGNORECASE,
)
# The names a Model line may give, each the tier AutoDev runs the task's roles on.
MODEL_NAMES: dict[str, ModelTier] = {
    "haiku": "fast",
    "sonnet": "standard",
    "opus": "strong",
    "fast": "fast",
    "standard": "standard",
    "strong": "strong",
}
# How a tier is written back: the names plan writers use.
TIER_NAMES: dict[ModelTier, str] = {"fast": "haiku", "standard": "sonnet", "strong": "opus"}
# What each one-value line accepts (lower-cased) and what it stores; how the error words the choice.
_LEVEL_VALUES: dict[str, tuple[dict[str, str], str]] = {
    "model": (dict(MODEL_NAMES), "a model level; write haiku, sonnet or opus (or leave the line out: opus)"),
    "effort": (
        {effort.lower(): effort for effort in EFFORTS},
        f"an effort; write one of {', '.join(EFFORTS)}",
    ),
    "priority": ({p.lower(): p for p in PRIORITIES}, f"a priority; write one of {', '.join(PRIORITIES)}"),
}
_RE_ACCEPT_ITEM = re.compile(r"[-*+][ \t]+\[([ xX])\](.*)")
_RE_CHECKBOX_PREFIX = re.compile(r"\[([ xX])\](.*)")
_RE_BULLET = re.compile(r"[-*+](?:[ \t]+(.*))?")
_RE_FENCE = re.compile(r"(?:`{3,}|~{3,})[ \t]*[\w.+-]*")
_RE_DEPENDS_SPLIT = re.compile(r"[,\s]+")

_FieldName = Literal["description", "files", "depends", "acceptance"]
# What an indented line that follows a field belongs to.
_Mode = Literal["none", "description", "files", "depends", "acceptance"]


def _field_name(raw_key: str) -> _FieldName:
    key = raw_key.lower()
    if key.startswith("desc"):
        return "description"
    if key.startswith("files"):
        return "files"
    if key.startswith("acc"):
        return "acceptance"
    return "depends"


@dataclass(slots=True)
class _Criterion:
    text: str
    met: bool


@dataclass(slots=True)
class _TaskDraft:
    id: str
    title: str
    line: int
    description: list[str] = field(default_factory=list)
    # dicts as insertion-ordered sets: repeated entries are kept once, in first-seen order.
    files: dict[str, None] = field(default_factory=dict)
    depends: dict[str, int] = field(default_factory=dict)
    acceptance: list[_Criterion] = field(default_factory=list)
    model: ModelTier | None = None
    effort: Effort | None = None
    priority: Priority | None = None
    # The line each one-value field was given on (a second one is an error naming the first).
    level_lines: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _PhaseDraft:
    id: str
    title: str
    line: int
    description: list[str] = field(default_factory=list)
    tasks: list[_TaskDraft] = field(default_factory=list)


class _Scanner:
    """The line scanner's state: where we are in the hierarchy and which field is open."""

    def __init__(self, source: str | None, known_ids: Collection[str] = ()) -> None:
        self.source = source
        # Tasks outside the parsed text that its tasks may depend on (a plan that tasks are added to).
        self.known_ids = frozenset(known_ids)
        self.plan_line: int | None = None
        self.plan_like: tuple[int, str] | None = None
        self.title = ""
        self.description: list[str] = []
        self.phases: list[_PhaseDraft] = []
        self.phase: _PhaseDraft | None = None
        self.task: _TaskDraft | None = None
        self.phase_lines: dict[str, int] = {}
        self.task_lines: dict[str, int] = {}
        self.mode: _Mode = "none"
        self.mode_indent = 0
        # What the plan may mean but does not say exactly (shown, and kept in the plan's metadata).
        self.warnings: list[str] = []

    def error(self, message: str, line: int | None) -> PlanParseError:
        return PlanParseError(message, line=line, source=self.source)

    def feed(self, lineno: int, raw: str) -> None:
        text = raw.strip()
        if not text:
            return
        indent = _indent(raw)
        if self.plan_line is None:
            self._preamble(lineno, text)
            return
        if self.mode == "description" and indent >= self.mode_indent + 2 and self.task is not None:
            self.task.description.append(text)
            return
        if _RE_FENCE.fullmatch(text):
            return
        if text.startswith("#") and self._heading(lineno, text):
            self.mode = "none"
            return
        if self.task is not None:
            self._task_line(lineno, text, indent, self.task)
        elif self.phase is not None:
            self.phase.description.append(text)
        else:
            self.description.append(text)

    def _preamble(self, lineno: int, text: str) -> None:
        match = _RE_PLAN_TITLE.fullmatch(text)
        if match is None:
            if self.plan_like is None and _RE_PLAN_LIKE.match(text):
                self.plan_like = (lineno, text)
            return
        title = match.group(1).strip()
        if not title:
            raise self.error("the plan title is empty; write '# Plan: <title>'", lineno)
        self.plan_line = lineno
        self.title = title

    def _heading(self, lineno: int, text: str) -> bool:
        if _RE_PLAN_LIKE.match(text):
            raise self.error(
                f"second plan heading {quote(text)} (the plan starts on line {self.plan_line}); "
                "keep one '# Plan: <title>' per document",
                lineno,
            )
        match = _RE_PHASE.fullmatch(text)
        if match is not None:
            self._start_phase(lineno, match.group(1), match.group(2).strip())
            return True
        if _RE_PHASE_LIKE.match(text):
            raise self.error(f"malformed phase heading {quote(text)}; write '## Phase <id>: <title>'", lineno)
        match = _RE_TASK.fullmatch(text)
        if match is not None:
            self._start_task(lineno, text, match.group(1), match.group(2).strip())
            return True
        if _RE_TASK_LIKE.match(text):
            raise self.error(f"malformed task heading {quote(text)}; write '### Task <id>: <title>'", lineno)
        return False

    def _start_phase(self, lineno: int, phase_id: str, title: str) -> None:
        self.close_phase()
        check_id("phase", phase_id, line=lineno, source=self.source)
        self._check_unique("phase", phase_id, lineno, self.phase_lines)
        if not title:
            raise self.error(
                f"phase {phase_id} has an empty title; write '## Phase {phase_id}: <title>'", lineno
            )
        self.phase = _PhaseDraft(id=phase_id, title=title, line=lineno)
        self.phases.append(self.phase)
        self.task = None

    def _start_task(self, lineno: int, heading: str, task_id: str, title: str) -> None:
        if self.phase is None:
            raise self.error(
                f"task heading {quote(heading)} appears before any phase heading; "
                "add '## Phase <id>: <title>' above it",
                lineno,
            )
        check_id("task", task_id, line=lineno, source=self.source)
        self._check_unique("task", task_id, lineno, self.task_lines)
        if not title:
            raise self.error(
                f"task {task_id} has an empty title; write '### Task {task_id}: <title>'", lineno
            )
        self.task = _TaskDraft(id=task_id, title=title, line=lineno)
        self.phase.tasks.append(self.task)

    def _check_unique(self, kind: str, item_id: str, lineno: int, seen: dict[str, int]) -> None:
        # Ids become file names, and on case-insensitive file systems "A" and "a" would collide.
        key = item_id.lower()
        first = seen.get(key)
        if first is not None:
            raise self.error(
                f"duplicate {kind} id {quote(item_id)} (first used on line {first}, ids are compared "
                f"ignoring case); give every {kind} its own id",
                lineno,
            )
        seen[key] = lineno

    def close_phase(self) -> None:
        if self.phase is not None and not self.phase.tasks:
            raise self.error(
                f"phase {self.phase.id} {quote(self.phase.title)} has no tasks; add "
                "'### Task <id>: <title>' under it or remove the phase",
                self.phase.line,
            )

    def _task_line(self, lineno: int, text: str, indent: int, task: _TaskDraft) -> None:
        level = _RE_LEVEL.fullmatch(text)
        # Without a bullet only an indented line is such a line: "Model: ..." at the margin is prose.
        if level is not None and (text[0] in "-*+" or indent >= 2):
            self.mode = "none"
            self._level(lineno, task, (level.group(1) or level.group(2)).lower(), level.group(3))
            return
        match = _RE_FIELD.fullmatch(text)
        if match is not None:
            self._field(lineno, task, _field_name(match.group(1) or match.group(2)), indent, match)
            return
        match = _RE_ACCEPT_ITEM.fullmatch(text)
        if match is not None:
            _add_criterion(task, match.group(2), met=match.group(1) != " ")
            if self.mode != "acceptance":
                self.mode = "none"
            return
        if self.mode == "acceptance":
            bullet = _RE_BULLET.fullmatch(text)
            if bullet is not None:
                _add_criterion(task, bullet.group(1) or "", met=False)
                return
            if indent > self.mode_indent and task.acceptance:
                task.acceptance[-1].text += " " + text
                return
        elif self.mode in ("files", "depends") and indent > self.mode_indent:
            bullet = _RE_BULLET.fullmatch(text)
            if bullet is not None:
                self._list_items(lineno, task, self.mode, bullet.group(1) or "")
                return
        self.mode = "none"
        task.description.append(text)

    def _field(
        self, lineno: int, task: _TaskDraft, name: _FieldName, indent: int, match: re.Match[str]
    ) -> None:
        value = match.group(3).strip()
        self.mode = "none"
        self.mode_indent = indent
        if name == "description":
            self.mode = "description"
            if value:
                task.description.append(value)
        elif name == "acceptance":
            self.mode = "acceptance"
            if value.lower() not in _EMPTY_VALUES:
                checkbox = _RE_CHECKBOX_PREFIX.match(value)
                if checkbox is None:
                    _add_criterion(task, value, met=False)
                else:
                    _add_criterion(task, checkbox.group(2), met=checkbox.group(1) != " ")
        elif not value:
            # The list follows as bullets on the next, deeper-indented lines.
            self.mode = name
        elif value.lower() not in _EMPTY_VALUES:
            self._list_items(lineno, task, name, value)

    def _level(self, lineno: int, task: _TaskDraft, key: str, value: str) -> None:
        """A Model, Effort or Priority line: one per task, one of its known values."""
        label = key.capitalize()
        first = task.level_lines.get(key)
        if first is not None:
            raise self.error(
                f"task {task.id} has a second {label} line (the first is on line {first}); keep one", lineno
            )
        values, choice = _LEVEL_VALUES[key]
        words = value.split()
        stored = values.get(_unquote(words[0]).strip("*").lower()) if words else None
        if stored is None:
            shown = quote(words[0]) if words else "nothing"
            raise self.error(f"task {task.id}: {label} {shown} is not {choice}", lineno)
        task.level_lines[key] = lineno
        setattr(task, key, stored)
        if len(words) > 1:
            extra = " ".join(words[1:])
            where = f"{self.source}:{lineno}" if self.source else f"line {lineno}"
            self.warnings.append(
                f"{where}: task {task.id}: {quote(extra)} after the {label} value is ignored"
            )

    def _list_items(self, lineno: int, task: _TaskDraft, name: _Mode, value: str) -> None:
        if name == "files":
            for item in value.split(","):
                path = _unquote(item)
                if path:
                    task.files[self._repo_path(lineno, task, path)] = None
            return
        for item in _RE_DEPENDS_SPLIT.split(value):
            dep = _unquote(item)
            if dep:
                check_id("dependency", dep, line=lineno, source=self.source)
                task.depends.setdefault(dep, lineno)

    def _repo_path(self, lineno: int, task: _TaskDraft, path: str) -> str:
        # Normalizing can expose a backtick or a space ("./`a" -> "`a") that the next parse of the
        # rendered plan would strip, so repeat until the path is stable.
        clean = path
        try:
            while True:
                stable = _unquote(normalize_repo_path(clean))
                if stable == clean:
                    return stable
                clean = stable
        except PathEscapeError as exc:
            raise self.error(
                f"task {task.id}: file {quote(path)} is not a relative path inside the repository; "
                "drop the leading '/' or drive letter and any '..' that climbs out of it",
                lineno,
            ) from exc

    def finish(self) -> None:
        if self.plan_line is None:
            if self.plan_like is not None:
                lineno, text = self.plan_like
                raise self.error(f"malformed plan heading {quote(text)}; write '# Plan: <title>'", lineno)
            raise self.error("missing '# Plan: <title>' heading; start the plan with one", None)
        self.close_phase()
        if not self.phases:
            raise self.error(
                "no phases found; add '## Phase <id>: <title>' headings with "
                "'### Task <id>: <title>' headings under them",
                None,
            )
        known = {task.id for phase in self.phases for task in phase.tasks} | self.known_ids
        for phase in self.phases:
            for task in phase.tasks:
                for dep, lineno in task.depends.items():
                    if dep == task.id:
                        raise self.error(
                            f"task {task.id} depends on itself; remove {quote(dep)} from its Depends",
                            lineno,
                        )
                    if dep not in known:
                        raise self.error(
                            f"task {task.id} depends on unknown task {quote(dep)}; use the id of a "
                            "task in this plan or remove it from Depends",
                            lineno,
                        )


def _indent(raw: str) -> int:
    body = raw.lstrip()
    return len(raw[: len(raw) - len(body)].expandtabs(4))


def _unquote(item: str) -> str:
    """``item`` without surrounding whitespace and backticks, however they are nested."""
    previous = None
    while item != previous:
        previous = item
        item = item.strip().strip("`")
    return item


def _add_criterion(task: _TaskDraft, text: str, *, met: bool) -> None:
    text = text.strip()
    if text:
        task.acceptance.append(_Criterion(text=text, met=met))


def _build_phases(scanner: _Scanner) -> list[Phase]:
    return [
        Phase(
            id=draft.id,
            title=draft.title,
            description="\n".join(draft.description),
            tasks=[
                Task(
                    id=task.id,
                    phase_id=draft.id,
                    title=task.title,
                    description="\n".join(task.description),
                    files=list(task.files),
                    depends_on=list(task.depends),
                    acceptance=[
                        AcceptanceCriterion(description=item.text, met=item.met) for item in task.acceptance
                    ],
                    assigned_agent=_DEFAULT_AGENT,
                    model=task.model,
                    effort=task.effort,
                    priority=task.priority,
                )
                for task in draft.tasks
            ],
        )
        for draft in scanner.phases
    ]


def compute_content_hash(plan: Plan) -> str:
    """sha256 hex of the plan's canonical JSON without ``content_hash`` and ``updated_at``.

    The same value the state layer checks snapshots against, so a parsed plan can be saved as is.
    """
    return plan_content_hash(plan)


def parse_plan_markdown(
    md: str, spec_hash: str, *, source: str | None = None, created_at: str | None = None
) -> Plan:
    """Parse architect markdown in the canonical format into a ``Plan``.

    Lines before ``# Plan: <title>`` and code-fence lines are ignored; free text and unknown
    bullets are kept in the description of the heading above them. ``plan_id`` and
    ``content_hash`` depend only on the content and ``spec_hash``, so parsing the same text twice
    gives equal plans when ``created_at`` is given. Raises ``PlanParseError`` naming the line (when
    there is one) and ``source``.
    """
    md = md.removeprefix(_BOM)
    if not md.strip():
        raise PlanParseError(
            "empty plan markdown; expected a '# Plan: <title>' heading followed by phases and tasks",
            source=source,
        )
    scanner = _Scanner(source)
    for lineno, raw in enumerate(md.splitlines(), start=1):
        scanner.feed(lineno, raw)
    scanner.finish()
    phases = _build_phases(scanner)
    tasks = [task for phase in phases for task in phase.tasks]
    validate_dag(tasks, source=source)

    description = "\n".join(scanner.description)
    structure = {
        "title": scanner.title,
        "description": description,
        "phases": [phase.model_dump(mode="json") for phase in phases],
    }
    plan_id = "plan-" + sha256_hex(canonical_json(structure) + spec_hash)[:12]
    if created_at is None:
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
    plan = Plan(
        plan_id=plan_id,
        spec_hash=spec_hash,
        title=scanner.title,
        description=description,
        phases=phases,
        metadata={"warnings": scanner.warnings} if scanner.warnings else {},
        created_at=created_at,
        updated_at=created_at,
    )
    return plan.model_copy(update={"content_hash": compute_content_hash(plan)})


def parse_task_blocks(
    md: str, phase_id: str, *, known_ids: Collection[str] = (), source: str | None = None
) -> tuple[list[Task], list[str]]:
    """Tasks written as in a plan (``### Task <id>: <title>`` and its lines) but outside one: what an
    architect adds to a plan (the slices of a task). They belong to ``phase_id``; their ``Depends`` may name
    each other and ``known_ids`` (the plan's tasks). Text before the first task heading is ignored. Returns
    the tasks and the warnings; raises ``PlanParseError`` as ``parse_plan_markdown`` does, and when there is
    no task at all.
    """
    scanner = _Scanner(source, known_ids)
    scanner.plan_line, scanner.title = 0, "tasks"
    scanner.phase = _PhaseDraft(id=phase_id, title="tasks", line=0)
    scanner.phases.append(scanner.phase)
    for lineno, raw in enumerate(md.removeprefix(_BOM).splitlines(), start=1):
        scanner.feed(lineno, raw)
    if not scanner.phase.tasks:
        raise scanner.error("no task found; write each one as '### Task <id>: <title>' with its lines", None)
    if len(scanner.phases) > 1:
        raise scanner.error(
            f"phase heading on line {scanner.phases[1].line}: write tasks only, under no phase heading",
            scanner.phases[1].line,
        )
    scanner.finish()
    return _build_phases(scanner)[0].tasks, scanner.warnings


def read_plan_markdown(path: Path) -> str:
    """The text of the plan markdown file ``path``, for ``parse_plan_markdown``.

    Raises ``PlanParseError`` naming ``path`` when it is missing, not a regular file, larger than
    ``MAX_INPUT_FILE_BYTES`` or not UTF-8 text.
    """
    source = str(path)
    try:
        return read_bounded_text(
            path,
            limit=MAX_INPUT_FILE_BYTES,
            what="the plan markdown",
            follow_symlinks=True,
            error=lambda problem: PlanParseError(problem, source=source),
            remedy="give the path of a plan markdown file",
            encoding="utf-8-sig",
        )
    except FileNotFoundError:
        raise PlanParseError("file not found", source=source) from None
    except OSError as exc:
        raise PlanParseError(f"cannot read it ({exc.strerror or exc})", source=source) from exc


def render_plan_markdown(plan: Plan) -> str:
    """Write ``plan`` in the canonical format; parsing the result gives the same plan back.

    Only what the author controls is written (titles, descriptions, files, dependencies, acceptance
    criteria); run state such as status and retry counts is not part of the markdown.
    """
    lines = [f"# Plan: {_one_line(plan.title)}", *_text_lines(plan.description)]
    for phase in plan.phases:
        lines += ["", f"## Phase {phase.id}: {_one_line(phase.title)}"]
        lines += _text_lines(phase.description)
        for task in phase.tasks:
            lines += ["", f"### Task {task.id}: {_one_line(task.title)}"]
            description = _text_lines(task.description)
            if description:
                lines.append(f"- Description: {description[0]}")
                lines += [f"  {line}" for line in description[1:]]
            if task.files:
                lines.append(f"- Files: {_render_list(task.files)}")
            if task.model is not None:
                lines.append(f"- Model: {TIER_NAMES[task.model]}")
            if task.effort is not None:
                lines.append(f"- Effort: {task.effort}")
            if task.priority is not None:
                lines.append(f"- Priority: {task.priority}")
            if task.depends_on:
                lines.append(f"- Depends: {_render_list(task.depends_on)}")
            if task.acceptance:
                lines.append("- Acceptance:")
                lines += [
                    f"  - [{'x' if item.met else ' '}] {_one_line(item.description)}"
                    for item in task.acceptance
                ]
    return "\n".join(lines) + "\n"


def _text_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _one_line(text: str) -> str:
    return " ".join(_text_lines(text))


def _render_list(items: list[str]) -> str:
    rendered = ", ".join(items)
    if rendered.lower() in _EMPTY_VALUES:
        return ", ".join(f"`{item}`" for item in items)
    return rendered
