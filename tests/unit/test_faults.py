"""The machine's faults told apart from the work's: which errors pause a run instead of blocking a task."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from autodev.errors import EnvironmentFaultError, StateError
from autodev.faults import environment_fault


@pytest.mark.parametrize(
    ("number", "name"),
    [(errno.ENOSPC, "ENOSPC"), (errno.EDQUOT, "EDQUOT"), (errno.EMFILE, "EMFILE"), (errno.EROFS, "EROFS")],
)
def test_an_oserror_of_the_machine_is_a_resumable_fault_naming_the_step_and_errno(
    number: int, name: str
) -> None:
    fault = environment_fault(OSError(number, os.strerror(number), "/x/ledger.jsonl"), "task 1.1 (commit)")

    assert isinstance(fault, EnvironmentFaultError) and fault.exit_code == 3
    assert fault.message.startswith(f"task 1.1 (commit) stopped, {name} ")
    assert "/x/ledger.jsonl" in fault.message and "autodev resume" in fault.message


def test_the_cause_chain_and_gits_own_words_are_read() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise StateError("cannot write plan.json; the ledger is unchanged") from exc
    except StateError as wrapped:
        fault = environment_fault(wrapped, "the command")
    assert fault is not None and "the ledger is unchanged" in fault.message and "ENOSPC" in fault.message

    git_said = RuntimeError("git commit failed: fatal: cannot write: No space left on device")
    fault = environment_fault(git_said, "task 2 (commit)")
    assert fault is not None and "ENOSPC" in fault.message


def test_other_errors_are_no_fault_unless_a_watched_file_system_is_full(tmp_path: Path) -> None:
    assert environment_fault(ValueError("bad value"), "task 1") is None
    assert environment_fault(OSError(errno.ENOENT, "No such file"), "task 1") is None
    assert environment_fault(RuntimeError("unable to write new index file"), "x", watched=[tmp_path]) is None
