"""LoopDetector: the same answer to the same question, for one role and task, N times in a row, is a loop."""

from __future__ import annotations

import pytest

from autodev.errors import EXIT_FAILED, GuardrailExceededError
from autodev.guardrails import LOOP_DETECTED_REASON, LoopDetectedError, LoopDetector


def test_the_threshold_th_identical_output_is_a_loop() -> None:
    detector = LoopDetector(3)
    assert [detector.observe("1.1", "developer", "same answer") for _ in range(4)] == [
        False,
        False,
        True,
        True,
    ]
    assert detector.streak("1.1", "developer") == 4


def test_a_different_output_restarts_the_streak() -> None:
    detector = LoopDetector(2)
    assert not detector.observe("1.1", "developer", "first")
    assert not detector.observe("1.1", "developer", "second")
    assert not detector.observe("1.1", "developer", "first")
    assert detector.streak("1.1", "developer") == 1
    assert detector.observe("1.1", "developer", "first")


def test_streaks_are_per_role_and_per_task() -> None:
    detector = LoopDetector(2)
    assert not detector.observe("1.1", "developer", "same")
    # Same text from another role or another task does not extend the developer's streak on 1.1.
    assert not detector.observe("1.1", "reviewer", "same")
    assert not detector.observe("1.2", "developer", "same")
    assert detector.observe("1.1", "developer", "same")
    assert detector.streak("1.1", "reviewer") == 1
    assert detector.streak("1.2", "developer") == 1


def test_whitespace_and_case_differences_count_as_the_same_output() -> None:
    detector = LoopDetector(3)
    assert not detector.observe("1.1", "developer", "Fixed the bug.\n\nVERDICT: done")
    assert not detector.observe("1.1", "developer", "  fixed   the bug.  verdict:\tDONE\n")
    assert detector.observe("1.1", "developer", "FIXED THE BUG. VERDICT: DONE")


def test_reset_forgets_every_role_of_one_task_only() -> None:
    detector = LoopDetector(2)
    detector.observe("1.1", "developer", "x")
    detector.observe("1.1", "reviewer", "x")
    detector.observe("1.2", "developer", "x")
    detector.reset("1.1")
    assert detector.streak("1.1", "developer") == 0
    assert detector.streak("1.1", "reviewer") == 0
    assert not detector.observe("1.1", "developer", "x")
    assert detector.observe("1.2", "developer", "x")


def test_a_threshold_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        LoopDetector(1)


def test_loop_detected_error_is_a_guardrail_breach_with_the_loop_reason() -> None:
    detector = LoopDetector(2)
    detector.observe("1.1", "developer", "same")
    assert detector.observe("1.1", "developer", "same")
    error = LoopDetectedError(
        f"task 1.1: developer returned the same output {detector.streak('1.1', 'developer')} times in a row",
        task_id="1.1",
        role="developer",
    )
    # A GuardrailExceededError blocks the task (seed 001, 5.9); its limit is the blocked reason.
    assert isinstance(error, GuardrailExceededError)
    assert error.exit_code == EXIT_FAILED
    assert (error.task_id, error.role, error.limit) == ("1.1", "developer", LOOP_DETECTED_REASON)
    assert LOOP_DETECTED_REASON == "loop_detected"
    assert error.message == "task 1.1: developer returned the same output 2 times in a row"


def test_the_same_answer_to_a_new_question_is_no_loop() -> None:
    # A reviewer that approves three different changes in the same words is doing its work.
    detector = LoopDetector(3)
    answers = [detector.observe("1.1", "reviewer", "VERDICT: APPROVED", f"diff {n}") for n in range(3)]
    assert answers == [False, False, False]
    assert detector.streak("1.1", "reviewer") == 1
    # The same answer to the same question, again and again, is one.
    assert [detector.observe("1.1", "reviewer", "VERDICT: APPROVED", "diff 2") for _ in range(2)] == [
        False,
        True,
    ]
