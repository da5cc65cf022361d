"""The delegation envelope's schema and the text block agents read."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from autodev.orchestrator.delegation_envelope import DelegationEnvelope

SEED_BLOCK = """\
TASK: 2.1
AGENT: developer
ACTION: implement
FILES:
  - src/models/user.py
ACCEPTANCE: User model with email validation
CONTEXT:
  task_title: Add user model
  task_description: Create User Pydantic model with email validation"""


def test_seed_example_renders_exactly() -> None:
    envelope = DelegationEnvelope(
        task_id="2.1",
        target_agent="developer",
        action="implement",
        files=["src/models/user.py"],
        acceptance="User model with email validation",
        context={
            "task_title": "Add user model",
            "task_description": "Create User Pydantic model with email validation",
        },
    )

    assert envelope.render_as_task_message() == SEED_BLOCK


def test_empty_sections_are_omitted() -> None:
    envelope = DelegationEnvelope(task_id="1.1", target_agent="reviewer", action="review")

    assert envelope.render_as_task_message() == "TASK: 1.1\nAGENT: reviewer\nACTION: review"


def test_blank_acceptance_is_omitted() -> None:
    envelope = DelegationEnvelope(task_id="1.1", target_agent="reviewer", action="review", acceptance="  ")

    assert "ACCEPTANCE" not in envelope.render_as_task_message()


def test_constraints_follow_files() -> None:
    envelope = DelegationEnvelope(
        task_id="1.1",
        target_agent="developer",
        action="implement",
        files=["a.py", "b.py"],
        constraints=["no new dependencies", "keep the public API"],
    )

    assert envelope.render_as_task_message() == (
        "TASK: 1.1\nAGENT: developer\nACTION: implement\n"
        "FILES:\n  - a.py\n  - b.py\n"
        "CONSTRAINTS:\n  - no new dependencies\n  - keep the public API"
    )


def test_multi_line_values_stay_indented_under_their_label() -> None:
    envelope = DelegationEnvelope(
        task_id="1.1",
        target_agent="developer",
        action="implement",
        constraints=["first line\nsecond line"],
        acceptance="tests pass\nlint is clean",
        context={"issues": "- missing test\n  - for the empty case"},
    )

    assert envelope.render_as_task_message() == (
        "TASK: 1.1\nAGENT: developer\nACTION: implement\n"
        "CONSTRAINTS:\n  - first line\n    second line\n"
        "ACCEPTANCE: |\n  tests pass\n  lint is clean\n"
        "CONTEXT:\n  issues: |\n    - missing test\n      - for the empty case"
    )


class _Ref(BaseModel):
    path: str


def test_non_string_context_values_are_compact_json() -> None:
    envelope = DelegationEnvelope(
        task_id="1.1",
        target_agent="test_engineer",
        action="test",
        context={
            "attempt": 2,
            "flaky": False,
            "previous": None,
            "files": ["a.py", "b.py"],
            "limits": {"max_s": 900, "note": "é"},
            "ref": _Ref(path="x.py"),
        },
    )

    assert envelope.render_as_task_message().split("CONTEXT:\n")[1] == (
        "  attempt: 2\n"
        "  flaky: false\n"
        "  previous: null\n"
        '  files: ["a.py","b.py"]\n'
        '  limits: {"max_s":900,"note":"é"}\n'
        '  ref: {"path":"x.py"}'
    )


def test_unknown_keys_are_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        DelegationEnvelope.model_validate(
            {"task_id": "1.1", "target_agent": "developer", "action": "implement", "priority": 1}
        )

    assert [(error["type"], error["loc"]) for error in info.value.errors()] == [
        ("extra_forbidden", ("priority",))
    ]


def test_unknown_action_is_rejected() -> None:
    with pytest.raises(ValidationError):
        DelegationEnvelope.model_validate({"task_id": "1.1", "target_agent": "developer", "action": "deploy"})
