"""``LoopDetector``: notice an agent role that keeps giving the same answer to the same question.

The orchestrator feeds every successful call's text to ``observe``, with what the call was asked about (its
task-specific context: the change to review, the failures to fix). When one role has given the same answer
to the same question for one task ``threshold`` times in a row, ``observe`` answers True and the
orchestrator blocks the task with reason ``LOOP_DETECTED_REASON``; the detector itself raises nothing
(``LoopDetectedError`` is there for callers that prefer raising). The same answer to a new question is no
loop: a reviewer that approves three different changes with the same words is doing its work.

Answers are compared by a hash of their normalized text (whitespace collapsed, case folded), so a reply
that differs only in spacing or capitals still counts as the same; questions by a hash of their exact text.
Only the latest hash and its streak are kept per (task, role): memory stays constant however long a task
runs.
"""

from __future__ import annotations

import hashlib

__all__ = ["LOOP_DETECTED_REASON", "LoopDetector"]

LOOP_DETECTED_REASON = "loop_detected"
"""The ``blocked_reason`` the orchestrator gives a task stopped by the loop detector."""


def _digest(text: str) -> str:
    normalized = " ".join(text.split()).casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


class LoopDetector:
    """Counts consecutive identical outputs per (task, role); ``threshold`` in a row is a loop."""

    def __init__(self, threshold: int) -> None:
        if threshold < 2:
            raise ValueError(f"threshold must be at least 2 (got {threshold}); one output is never a loop")
        self.threshold = threshold
        # (task_id, role) -> (hash of the latest output, how many times in a row it was seen)
        self._streaks: dict[tuple[str, str], tuple[str, int]] = {}

    def observe(self, task_id: str, role: str, text: str, question: str = "") -> bool:
        """Record one answer to ``question``; True when it is the ``threshold``-th (or later) identical answer
        to the same question in a row."""
        key = (task_id, role)
        digest = _digest(text) + hashlib.sha256(question.encode("utf-8", "surrogateescape")).hexdigest()
        previous = self._streaks.get(key)
        count = previous[1] + 1 if previous is not None and previous[0] == digest else 1
        self._streaks[key] = (digest, count)
        return count >= self.threshold

    def streak(self, task_id: str, role: str) -> int:
        """How many times in a row ``role``'s latest output for ``task_id`` was seen (0 before any)."""
        current = self._streaks.get((task_id, role))
        return 0 if current is None else current[1]

    def reset(self, task_id: str) -> None:
        """Forget every role's streak for ``task_id`` (a task re-queued or restarted starts afresh)."""
        for key in [key for key in self._streaks if key[0] == task_id]:
            del self._streaks[key]
