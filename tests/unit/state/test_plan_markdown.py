"""Plan markdown parsing, its error messages and the canonical rendering."""

from __future__ import annotations

import re
import textwrap
from datetime import datetime, timedelta

import pytest

from autodev.errors import PlanParseError
from autodev.state.plan_markdown import (
    compute_content_hash,
    parse_plan_markdown,
    parse_task_blocks,
    render_plan_markdown,
    validate_dag,
)
from autodev.state.schemas import AcceptanceCriterion, Plan, Task

SPEC_HASH = "f" * 64
CREATED = "2024-05-01T12:00:00+00:00"


def parse(md: str, *, source: str | None = None) -> Plan:
    return parse_plan_markdown(textwrap.dedent(md), SPEC_HASH, source=source, created_at=CREATED)


def parse_error(md: str) -> PlanParseError:
    with pytest.raises(PlanParseError) as info:
        parse(md)
    return info.value


MINIMAL = """\
# Plan: Add users
## Phase 1: Models
### Task 1.1: User model
- Description: Create the User model
"""


# --- valid plans ----------------------------------------------------------------------------------


def test_minimal_plan_fields() -> None:
    plan = parse(MINIMAL)

    assert plan.title == "Add users"
    assert plan.description == ""
    assert plan.spec_hash == SPEC_HASH
    assert plan.created_at == CREATED
    assert plan.updated_at == CREATED
    assert plan.metadata == {}
    assert re.fullmatch(r"plan-[0-9a-f]{12}", plan.plan_id)
    assert plan.content_hash == compute_content_hash(plan)
    assert [phase.id for phase in plan.phases] == ["1"]
    task = plan.phases[0].tasks[0]
    assert task == Task(
        id="1.1",
        phase_id="1",
        title="User model",
        description="Create the User model",
        assigned_agent="developer",
    )
    assert task.status == "pending"


def test_created_at_defaults_to_utc_iso_seconds() -> None:
    plan = parse_plan_markdown(MINIMAL, SPEC_HASH)

    stamp = datetime.fromisoformat(plan.created_at)
    assert stamp.utcoffset() == timedelta(0)
    assert stamp.microsecond == 0
    assert plan.updated_at == plan.created_at


def test_multi_phase_plan_with_cross_phase_dependencies() -> None:
    plan = parse(
        """\
        # Plan: Users API
        Expose users over HTTP.
        Second plan line.

        ## Phase 1: Models
        Data layer first.
        ### Task 1.1: User model
        - Files: src/models/user.py
        ### Task 1.2: Repository
        - Depends: 1.1
        ## Phase 2: API
        ### Task 2.1: Endpoint
        - Depends: 1.2, 1.1
        ### Task 2.2: Docs
        - Depends: 2.1
        """
    )

    assert plan.description == "Expose users over HTTP.\nSecond plan line."
    assert [(p.id, p.title, p.description) for p in plan.phases] == [
        ("1", "Models", "Data layer first."),
        ("2", "API", ""),
    ]
    assert [(t.id, t.phase_id, t.depends_on) for t in plan.iter_tasks()] == [
        ("1.1", "1", []),
        ("1.2", "1", ["1.1"]),
        ("2.1", "2", ["1.2", "1.1"]),
        ("2.2", "2", ["2.1"]),
    ]


def test_dependency_on_a_later_task_is_allowed() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task a: first
        - Depends: b
        ### Task b: second
        """
    )

    assert plan.iter_tasks()[0].depends_on == ["b"]


def test_description_continuation_lines_and_free_text_are_kept() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: T
        Free text right under the heading.
        - Description: Build the parser
          so that it handles
             deeper indentation too
          - Files: this is continuation, not a field
        - Notes: an unknown bullet
        - Files: a.py
        A trailing remark.
        """
    )

    assert plan.iter_tasks()[0].description == (
        "Free text right under the heading.\n"
        "Build the parser\n"
        "so that it handles\n"
        "deeper indentation too\n"
        "- Files: this is continuation, not a field\n"
        "- Notes: an unknown bullet\n"
        "A trailing remark."
    )
    assert plan.iter_tasks()[0].files == ["a.py"]


def test_description_on_following_lines() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: T
        - Description:
          first line
          second line
        """
    )

    assert plan.iter_tasks()[0].description == "first line\nsecond line"


def test_preamble_and_code_fences_are_ignored() -> None:
    plan = parse(
        """\
        Sure! Here is the plan you asked for.
        ### Task 9.9: not part of the plan
        ```markdown
        # Plan: Fenced
        ## Phase 1: A
        ### Task 1.1: T
        - Description: inside the fence
        ```
        """
    )

    assert plan.title == "Fenced"
    assert [t.id for t in plan.iter_tasks()] == ["1.1"]
    assert plan.iter_tasks()[0].description == "inside the fence"


@pytest.mark.parametrize(
    ("files_line", "depends_line", "acceptance_line"),
    [
        ("- Files: a.py", "- Depends: 1.1", "- Acceptance:"),
        ("- FILES: a.py", "- depends on: 1.1", "- acceptance criteria:"),
        ("- files: a.py", "- Dependencies: 1.1", "- ACCEPTANCE CRITERIA:"),
        ("- **Files:** a.py", "- **Depends on**: 1.1", "- **Acceptance:**"),
        ("* Files: a.py", "+ Depends: 1.1", "* Acceptance:"),
    ],
)
def test_field_keys_are_case_insensitive_with_aliases(
    files_line: str, depends_line: str, acceptance_line: str
) -> None:
    md = (
        "# Plan: P\n## Phase 1: A\n### Task 1.1: base\n### Task 1.2: T\n"
        f"{files_line}\n{depends_line}\n{acceptance_line}\n  - [ ] done\n"
    )

    task = parse(md).iter_tasks()[1]

    assert task.files == ["a.py"]
    assert task.depends_on == ["1.1"]
    assert task.acceptance == [AcceptanceCriterion(description="done", met=False)]


def test_bold_description_value_keeps_its_asterisks() -> None:
    plan = parse("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Description: **Bold** start\n")

    assert plan.iter_tasks()[0].description == "**Bold** start"


def test_acceptance_criteria_checked_and_unchecked() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: T
        - Acceptance:
          - [ ] open item
          - [x] done item
          - [X] also done
          - plain bullet item
          - [ ] wrapped item that
            continues here
          - [ ]
        """
    )

    assert plan.iter_tasks()[0].acceptance == [
        AcceptanceCriterion(description="open item", met=False),
        AcceptanceCriterion(description="done item", met=True),
        AcceptanceCriterion(description="also done", met=True),
        AcceptanceCriterion(description="plain bullet item", met=False),
        AcceptanceCriterion(description="wrapped item that continues here", met=False),
    ]


def test_inline_acceptance_value_and_stray_checkbox_are_criteria() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: T
        - Acceptance: [x] inline one
        - Description: text
        - [ ] stray criterion
        """
    )

    task = plan.iter_tasks()[0]
    assert task.acceptance == [
        AcceptanceCriterion(description="inline one", met=True),
        AcceptanceCriterion(description="stray criterion", met=False),
    ]
    assert task.description == "text"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("none", []),
        ("None", []),
        ("-", []),
        ("", []),
        ("`src/a.py`, src/b.py", ["src/a.py", "src/b.py"]),
        ("./src//a.py, src/x/../b.py", ["src/a.py", "src/b.py"]),
        ("a.py, a.py, b.py,", ["a.py", "b.py"]),
        ("`none`", ["none"]),
        ("./`a`, b`/.", ["a", "b"]),
    ],
)
def test_files_values(value: str, expected: list[str]) -> None:
    plan = parse(f"# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Files: {value}\n")

    assert plan.iter_tasks()[0].files == expected


def test_files_and_depends_as_bullet_lists() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: base
        ### Task 1.2: T
        - Files:
          - `src/a.py`
          - src/b.py
        - Depends on:
          - 1.1
        """
    )

    task = plan.iter_tasks()[1]
    assert task.files == ["src/a.py", "src/b.py"]
    assert task.depends_on == ["1.1"]
    assert task.description == ""


@pytest.mark.parametrize("value", ["none", "NONE", "-", "", "n/a"])
def test_depends_none_means_no_dependencies(value: str) -> None:
    plan = parse(f"# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Depends: {value}\n")

    assert plan.iter_tasks()[0].depends_on == []


def test_depends_accepts_backticks_spaces_and_repeats() -> None:
    plan = parse(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: a
        ### Task 1.2: b
        ### Task 1.3: c
        - Depends: `1.1` 1.2, 1.1
        """
    )

    assert plan.iter_tasks()[2].depends_on == ["1.1", "1.2"]


def test_same_text_gives_same_plan_and_ids_depend_on_content_and_spec() -> None:
    first = parse(MINIMAL)

    assert parse(MINIMAL) == first
    other_spec = parse_plan_markdown(MINIMAL, "0" * 64, created_at=CREATED)
    assert other_spec.plan_id != first.plan_id
    other_content = parse(MINIMAL.replace("Create", "Write"))
    assert other_content.plan_id != first.plan_id
    assert other_content.content_hash != first.content_hash


def test_content_hash_ignores_updated_at_but_covers_status() -> None:
    plan = parse(MINIMAL)
    touched = plan.model_copy(update={"updated_at": "2030-01-01T00:00:00+00:00"})
    started = plan.model_copy(deep=True)
    started.phases[0].tasks[0].status = "in_progress"

    assert compute_content_hash(touched) == plan.content_hash
    assert compute_content_hash(started) != plan.content_hash


def test_large_plan_with_long_dependency_chain_parses() -> None:
    lines = ["# Plan: Big"]
    for phase in range(50):
        lines.append(f"## Phase {phase}: phase {phase}")
        for task in range(100):
            task_id = f"{phase}.{task}"
            lines += [f"### Task {task_id}: task {task_id}", f"- Files: src/m{phase}/f{task}.py"]
            if phase or task:
                previous = f"{phase}.{task - 1}" if task else f"{phase - 1}.99"
                lines.append(f"- Depends: {previous}")
            lines += ["- Acceptance:", "  - [ ] works"]

    plan = parse("\n".join(lines))

    tasks = plan.iter_tasks()
    assert len(tasks) == 5000
    assert tasks[-1].depends_on == ["49.98"]


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("md", ["", "  \n\n\t\n"])
def test_empty_markdown(md: str) -> None:
    error = parse_error(md)

    assert error.line is None
    assert "empty plan markdown" in error.message


def test_missing_plan_heading() -> None:
    error = parse_error("## Phase 1: A\n### Task 1.1: T\n")

    assert error.line is None
    assert "missing '# Plan: <title>' heading" in error.message


def test_plan_heading_without_colon_is_reported_with_its_line() -> None:
    error = parse_error("intro\n# Plan Add users\n## Phase 1: A\n### Task 1.1: T\n")

    assert error.line == 2
    assert "malformed plan heading '# Plan Add users'" in error.message


def test_task_before_any_phase() -> None:
    error = parse_error("# Plan: P\n\n### Task 1.1: T\n## Phase 1: A\n")

    assert error.line == 3
    assert "before any phase heading" in error.message
    assert "### Task 1.1: T" in error.message


@pytest.mark.parametrize(
    ("md", "line"),
    [
        ("# Plan: P\n## Phase 1: Empty\n## Phase 2: B\n### Task 2.1: T\n", 2),
        ("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n\n## Phase 2: Empty\ntext\n", 5),
    ],
)
def test_phase_without_tasks(md: str, line: int) -> None:
    error = parse_error(md)

    assert error.line == line
    assert "has no tasks" in error.message
    assert "Empty" in error.message


def test_no_phases() -> None:
    error = parse_error("# Plan: P\nJust a description.\n")

    assert error.line is None
    assert "no phases found" in error.message


def test_duplicate_task_id_reports_the_second() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n## Phase 2: B\n### Task 1.1: again\n")

    assert error.line == 5
    assert "duplicate task id '1.1'" in error.message
    assert "line 3" in error.message


def test_task_ids_differing_only_in_case_are_duplicates() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task a1: T\n### Task A1: U\n")

    assert error.line == 4
    assert "duplicate task id 'A1'" in error.message


def test_duplicate_phase_id() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n## Phase 1: B\n### Task 1.2: U\n")

    assert error.line == 4
    assert "duplicate phase id '1'" in error.message


@pytest.mark.parametrize(
    ("heading", "fragment"),
    [
        ("### Task 1..2: T", "invalid task id '1..2'"),
        ("### Task 1 2: T", "invalid task id '1 2'"),
        ("### Task .1: T", "invalid task id '.1'"),
        ("### Task " + "a" * 41 + ": T", "invalid task id"),
        ("### Task plan: T", "task id 'plan' is reserved"),
        ("### Task PLAN: T", "task id 'PLAN' is reserved"),
    ],
)
def test_invalid_task_ids(heading: str, fragment: str) -> None:
    error = parse_error(f"# Plan: P\n## Phase 1: A\n{heading}\n")

    assert error.line == 3
    assert fragment in error.message


def test_task_id_of_forty_characters_is_accepted() -> None:
    task_id = "a" * 40

    plan = parse(f"# Plan: P\n## Phase 1: A\n### Task {task_id}: T\n")

    assert plan.iter_tasks()[0].id == task_id


def test_invalid_phase_id() -> None:
    error = parse_error("# Plan: P\n## Phase 1/2: A\n### Task 1.1: T\n")

    assert error.line == 2
    assert "invalid phase id '1/2'" in error.message


@pytest.mark.parametrize(
    ("heading", "fragment"),
    [
        ("## Phase 1 Setup", "malformed phase heading '## Phase 1 Setup'"),
        ("### Task: Setup", "malformed task heading '### Task: Setup'"),
    ],
)
def test_malformed_headings(heading: str, fragment: str) -> None:
    error = parse_error(f"# Plan: P\n## Phase 0: A\n### Task 0.1: T\n{heading}\n")

    assert error.line == 4
    assert fragment in error.message


def test_dependency_on_unknown_task_names_both_tasks() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n\n- Depends: 9.9\n")

    assert error.line == 5
    assert "task 1.1 depends on unknown task '9.9'" in error.message


def test_invalid_dependency_id() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Depends: 1.0 (models)\n")

    assert error.line == 4
    assert "invalid dependency id '(models)'" in error.message


def test_task_depending_on_itself() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Depends: 1.1\n")

    assert error.line == 4
    assert "task 1.1 depends on itself" in error.message


def test_dependency_cycle_names_the_tasks() -> None:
    error = parse_error(
        """\
        # Plan: P
        ## Phase 1: A
        ### Task a: T
        - Depends: c
        ### Task b: U
        - Depends: a
        ### Task c: V
        - Depends: b
        ### Task d: W
        - Depends: a
        """
    )

    assert error.line is None
    assert "dependency cycle" in error.message
    cycle = re.search(r"cycle: (\S+(?: -> \S+)+)", error.message)
    assert cycle is not None
    names = cycle.group(1).rstrip(";").split(" -> ")
    assert names[0] == names[-1]
    assert sorted(names[:-1]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("md", "line", "fragment"),
    [
        ("# Plan:   \n## Phase 1: A\n### Task 1.1: T\n", 1, "plan title is empty"),
        ("# Plan: P\n## Phase 1:\n### Task 1.1: T\n", 2, "phase 1 has an empty title"),
        ("# Plan: P\n## Phase 1: A\n### Task 1.1:  \n", 3, "task 1.1 has an empty title"),
    ],
)
def test_empty_titles(md: str, line: int, fragment: str) -> None:
    error = parse_error(md)

    assert error.line == line
    assert fragment in error.message


def test_second_plan_heading() -> None:
    error = parse_error("# Plan: P\n## Phase 1: A\n### Task 1.1: T\n# Plan: Q\n")

    assert error.line == 4
    assert "second plan heading '# Plan: Q'" in error.message
    assert "line 1" in error.message


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.py", "src/../../x.py", "C:\\x.py"])
def test_files_outside_the_repository(path: str) -> None:
    error = parse_error(f"# Plan: P\n## Phase 1: A\n### Task 1.1: T\n- Files: ok.py, {path}\n")

    assert error.line == 4
    assert f"task 1.1: file {path!r}" in error.message


def test_error_message_names_the_source() -> None:
    with pytest.raises(PlanParseError) as info:
        parse("# Plan: P\n## Phase 1: A\n", source="architect.md")

    assert info.value.source == "architect.md"
    assert str(info.value).startswith("architect.md, line 2: phase 1 'A' has no tasks")


# --- validate_dag ---------------------------------------------------------------------------------


def _task(task_id: str, *deps: str) -> Task:
    return Task(id=task_id, phase_id="1", title=task_id, depends_on=list(deps))


def test_validate_dag_accepts_a_dag() -> None:
    validate_dag([_task("a"), _task("b", "a"), _task("c", "a", "b")])


@pytest.mark.parametrize(
    ("tasks", "fragment"),
    [
        ([_task("a", "zz")], "'zz'"),
        ([_task("a", "a")], "task a depends on itself"),
        ([_task("a", "b"), _task("b", "a")], "dependency cycle"),
    ],
)
def test_validate_dag_rejects(tasks: list[Task], fragment: str) -> None:
    with pytest.raises(PlanParseError) as info:
        validate_dag(tasks)

    assert info.value.line is None
    assert fragment in info.value.message


# --- rendering ------------------------------------------------------------------------------------

CANONICAL = """\
# Plan: Users API
Expose users over HTTP.

## Phase 1: Models
Data layer first.

### Task 1.1: User model
- Description: Create the User model
  with email validation
- Files: src/models/user.py, src/models/__init__.py
- Acceptance:
  - [ ] model exists
  - [x] email validated

### Task 1.2: Repository
- Depends: 1.1

## Phase 2: API

### Task 2.1: Endpoint
- Description: Add GET /users
- Files: src/api.py
- Depends: 1.2, 1.1
"""


def test_render_writes_the_canonical_format() -> None:
    plan = parse(CANONICAL)

    assert render_plan_markdown(plan) == CANONICAL


def test_render_of_a_forgiving_plan_is_canonical_and_reparses_equal() -> None:
    plan = parse(
        """\
        Preamble.
        ```
        # Plan: P
        ## Phase 1: A
        ### Task 1.1: T
        Free text.
        - **Files:** `a.py`
        - Notes: kept
        - acceptance criteria:
        * [X] done
        - plain bullet
        ```
        """
    )

    rendered = render_plan_markdown(plan)

    assert rendered == (
        "# Plan: P\n\n## Phase 1: A\n\n### Task 1.1: T\n"
        "- Description: Free text.\n  - Notes: kept\n"
        "- Files: a.py\n- Acceptance:\n  - [x] done\n  - [ ] plain bullet\n"
    )
    assert parse(rendered) == plan


def test_render_quotes_items_that_would_read_as_none() -> None:
    plan = parse(
        "# Plan: P\n## Phase 1: A\n### Task none: T\n- Files: `none`\n### Task 1.2: U\n- Depends: `none`\n"
    )

    rendered = render_plan_markdown(plan)

    assert "- Files: `none`\n" in rendered
    assert "- Depends: `none`\n" in rendered
    assert parse(rendered) == plan


def test_render_leaves_out_run_state() -> None:
    plan = parse(CANONICAL)
    worked_on = plan.model_copy(deep=True)
    task = worked_on.phases[0].tasks[0]
    task.status = "complete"
    task.retry_count = 2
    task.evidence_bundle = "evidence/1.1"

    assert render_plan_markdown(worked_on) == render_plan_markdown(plan)


# --- the Model line -------------------------------------------------------------------------------------

MODEL_PLAN = """# Plan: Levels
## Phase 1: All
### Task 1.1: Mechanical
- Files: a.py
- Model: haiku
### Task 1.2: Patterned
  Model: sonnet
- Depends: 1.1
### Task 1.3: Tier names work too
- **Model:** standard
### Task 1.4: Unclear
- Description: no Model line
Model: this line at the margin is prose, not a Model line
"""


def test_a_model_line_gives_the_tasks_tier_and_none_means_the_default() -> None:
    plan = parse_plan_markdown(MODEL_PLAN, "h")

    assert [task.model for task in plan.iter_tasks()] == ["fast", "standard", "standard", None]
    assert "prose, not a Model line" in plan.iter_tasks()[3].description
    assert "warnings" not in plan.metadata


def test_the_model_line_survives_a_render_and_a_parse() -> None:
    plan = parse_plan_markdown(MODEL_PLAN, "h", created_at="2026-12-03T00:00:00+00:00")
    rendered = render_plan_markdown(plan)

    assert "- Model: haiku" in rendered and "- Model: sonnet" in rendered
    again = parse_plan_markdown(rendered, "h", created_at="2026-12-03T00:00:00+00:00")
    assert [task.model for task in again.iter_tasks()] == [task.model for task in plan.iter_tasks()]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("- Model: gpt-7", "Model 'gpt-7' is not a model level; write haiku, sonnet or opus"),
        ("- Model:", "Model nothing is not a model level"),
    ],
)
def test_an_unknown_model_is_an_error_naming_its_line(line: str, message: str) -> None:
    text = MODEL_PLAN.replace("- Model: haiku", line)

    with pytest.raises(PlanParseError, match=message) as caught:
        parse_plan_markdown(text, "h", source="plan.md")

    assert caught.value.line == 5


def test_two_model_lines_are_an_error_naming_both() -> None:
    text = MODEL_PLAN.replace("- Files: a.py\n", "- Model: opus\n- Files: a.py\n")

    with pytest.raises(PlanParseError, match=r"second Model line \(the first is on line 4\)") as caught:
        parse_plan_markdown(text, "h")

    assert caught.value.line == 6


def test_words_after_the_model_value_are_a_warning_kept_in_the_plan() -> None:
    text = MODEL_PLAN.replace("- Model: haiku", "- Model: haiku (it is a rename)")

    plan = parse_plan_markdown(text, "h", source="plan.md")

    assert plan.iter_tasks()[0].model == "fast"
    assert plan.metadata["warnings"] == [
        "plan.md:5: task 1.1: '(it is a rename)' after the Model value is ignored"
    ]


EFFORT_PLAN = """# Plan: Sizes
## Phase 1: All
### Task 1.1: Small
- Effort: <1h
- Priority: p1
### Task 1.2: Big
  Effort: 1D
  Priority: P0 (release blocker)
### Task 1.3: Unsized
"""


def test_effort_and_priority_lines_are_read_and_written_back() -> None:
    plan = parse_plan_markdown(EFFORT_PLAN, "h", created_at="2026-12-03T00:00:00+00:00")

    assert [(task.effort, task.priority) for task in plan.iter_tasks()] == [
        ("<1h", "P1"),
        ("1d", "P0"),
        (None, None),
    ]
    assert plan.metadata["warnings"] == [
        "line 8: task 1.2: '(release blocker)' after the Priority value is ignored"
    ]
    again = parse_plan_markdown(render_plan_markdown(plan), "h", created_at="2026-12-03T00:00:00+00:00")
    assert [(t.effort, t.priority) for t in again.iter_tasks()] == [
        (t.effort, t.priority) for t in plan.iter_tasks()
    ]


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        (
            "- Effort: <1h",
            "- Effort: 2h",
            r"Effort '2h' is not an effort; write one of <1h, 1h, 5h, 1d, 1w",
            4,
        ),
        (
            "- Priority: p1",
            "- Priority: urgent",
            r"Priority 'urgent' is not a priority; write one of P0, P1",
            5,
        ),
        (
            "- Priority: p1",
            "- Priority: p1\n- Priority: P2",
            r"second Priority line \(the first is on line 5\)",
            6,
        ),
    ],
)
def test_a_bad_effort_or_priority_is_an_error_naming_its_line(
    old: str, new: str, message: str, line: int
) -> None:
    with pytest.raises(PlanParseError, match=message) as caught:
        parse_plan_markdown(EFFORT_PLAN.replace(old, new), "h")

    assert caught.value.line == line


# --- task blocks outside a plan (the slices an architect adds) -----------------------------------------


def test_task_blocks_parse_into_tasks_of_the_given_phase_that_may_depend_on_the_plan() -> None:
    text = (
        "Preamble the architect wrote.\n"
        "### Task 2.1.1: First slice\n- Files: a.py\n- Model: haiku\n- Effort: <1h\n- Depends: 1.1\n"
        "- Acceptance:\n  - [ ] works\n"
        "### Task 2.1.2: Second slice\n- Effort: 1h extra\n- Depends: 2.1.1\n"
    )

    tasks, warnings = parse_task_blocks(text, "2", known_ids={"1.1", "2.1"})

    assert [(t.id, t.phase_id, t.model, t.effort, t.depends_on) for t in tasks] == [
        ("2.1.1", "2", "fast", "<1h", ["1.1"]),
        ("2.1.2", "2", None, "1h", ["2.1.1"]),
    ]
    assert tasks[0].acceptance[0].description == "works"
    assert warnings and "extra" in warnings[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no tasks here", "no task found"),
        ("### Task a: A\n- Depends: zz\n", r"line 2: task a depends on unknown task 'zz'"),
        ("### Task a: A\n## Phase 3: More\n### Task b: B\n", "write tasks only, under no phase heading"),
        ("### Task a: A\n- Model: giant\n", "line 2"),
    ],
)
def test_task_blocks_that_cannot_be_used_are_errors_with_their_line(text: str, message: str) -> None:
    with pytest.raises(PlanParseError, match=message):
        parse_task_blocks(text, "1", known_ids={"1.1"}, source="slices")
