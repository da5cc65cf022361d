"""``KnowledgeStore``: lessons agents wrote down, kept and offered to later prompts.

Developer, reviewer, test engineer and critic outputs may carry ``LESSON:`` lines ("tests need the
``--import-mode=importlib`` flag"). ``add_from_text`` stores them, de-duplicated by their normalized text and
bounded to ``max_lessons`` (the least recently seen go first); ``inject_block`` picks the few most relevant
to a new prompt.

The store lives in ``.autodev/knowledge.json`` and is *not* part of the ledger: it is derived, advisory data,
not plan state, and nothing about a plan's progress depends on it. That is also why its content is never
fatal: a file that cannot be parsed is moved aside (``knowledge.json.corrupt-<timestamp>``) with a warning
and the store starts empty, and a failed write is logged and the lessons kept in memory. What is in its
place is checked like any state file, though: a link, a FIFO or a device, or a file larger than
``MAX_STATE_FILE_BYTES`` (64 MiB), is a ``StateError`` that names it, rather than something to wait on or
to silently replace.

Recency is a logical clock (``Lesson.last_seen`` counts sightings across the store) rather than wall time,
so eviction and ranking are deterministic.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.errors import StateError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.logging import get_logger
from autodev.markdown_text import unwrap_emphasis
from autodev.state.atomic import atomic_write_text
from autodev.state.paths import AutodevPaths, ensure_state_dir

__all__ = ["INJECT_HEADER", "KNOWLEDGE_FILE_NAME", "KnowledgeStore", "Lesson"]

KNOWLEDGE_FILE_NAME = "knowledge.json"
INJECT_HEADER = "LESSONS FROM EARLIER TASKS:"

_log = get_logger("autodev.knowledge")

# A LESSON: line, whatever its decoration: bullets, numbering, quote and heading markers in front; bold,
# italics or backticks around the key ("**LESSON:**", "**LESSON**:") or around the whole line.
_LESSON_LINE = re.compile(
    r"(?:(?:[-*+]|\d{1,3}[.)])[ \t]+|>[ \t]*|#{1,6}[ \t]+)*"
    r"(?P<open>[*_`]{0,2})lesson(?P<close>[*_`]{0,2})[ \t]*:(?P<after>[*_`]{1,2}(?=\s|$))?(?P<text>.*)",
    re.IGNORECASE,
)
_NONE_VALUES = frozenset({"", "-", "none", "(none)", "n/a", "na", "nothing"})
_TOKEN = re.compile(r"[a-z0-9]+")
# Words too common to make two texts related; short tokens (< 3 chars) are dropped as well.
_STOPWORDS = frozenset(
    {
        "the", "and", "for", "with", "that", "this", "from", "into", "not", "are", "was", "were", "but",
        "you", "your", "its", "has", "have", "had", "all", "any", "can", "use", "when", "then", "than",
        "them", "they", "their", "there", "here", "what", "which", "who", "how", "why", "will", "should",
        "must", "may", "also", "only", "each", "every", "one", "some", "more", "most", "other", "such",
        "out", "about", "over", "under", "before", "after", "does", "did", "done", "been", "being",
        "src", "lib", "file", "files", "task", "tasks",
    }
)  # fmt: skip


class Lesson(BaseModel):
    """One lesson: its text, where it was first learned, how often and how recently it was seen."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="The lesson, one line, whitespace collapsed.")
    role: str = Field(description="The agent role that first wrote it.")
    task_id: str = Field(description="The task whose output first carried it.")
    count: int = Field(default=1, ge=1, description="How many outputs carried it.")
    last_seen: int = Field(
        ge=0, description="Store-wide sighting number of its latest sighting (a logical clock)."
    )

    @property
    def key(self) -> str:
        """The text lessons are de-duplicated by."""
        return _normalize(self.text)


class _KnowledgeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    lessons: list[Lesson] = Field(default_factory=list)


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(" .!;")


def _tokens(texts: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for text in texts:
        found.update(_TOKEN.findall(text.casefold()))
    return {token for token in found if len(token) >= 3 and token not in _STOPWORDS}


class KnowledgeStore:
    """Lessons from earlier agent outputs, persisted in ``.autodev/knowledge.json``.

    ``max_lessons`` bounds how many are kept; ``max_chars`` how long one may be (longer ones are cut and end
    with an ellipsis). Safe to share between threads.
    """

    def __init__(self, paths: AutodevPaths, *, max_lessons: int = 200, max_chars: int = 300) -> None:
        if max_lessons < 1:
            raise ValueError(f"max_lessons must be at least 1 (got {max_lessons})")
        if max_chars < 2:
            raise ValueError(f"max_chars must be at least 2 (got {max_chars})")
        self.paths = paths
        self.max_lessons = max_lessons
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._lessons: dict[str, Lesson] = {}
        self._clock = 0
        self._load()

    @property
    def path(self) -> Path:
        """``.autodev/knowledge.json`` of this repository."""
        return self.paths.state_dir / KNOWLEDGE_FILE_NAME

    def __len__(self) -> int:
        return len(self._lessons)

    def lessons(self) -> list[Lesson]:
        """Copies of every stored lesson, most recently seen first."""
        with self._lock:
            ordered = sorted(self._lessons.values(), key=lambda lesson: -lesson.last_seen)
            return [lesson.model_copy() for lesson in ordered]

    def extract(self, text: str) -> list[str]:
        """The ``LESSON:`` lines of ``text``, cleaned, cut to ``max_chars``, once each, in order."""
        found: list[str] = []
        seen: set[str] = set()
        for line in text.splitlines():
            match = _LESSON_LINE.fullmatch(line.strip())
            if match is None:
                continue
            value = match["text"].strip()
            opener = match["open"]
            if opener and not match["close"] and not match["after"] and value.endswith(opener):
                # The wrapper spans the whole line ("**LESSON: text**"): drop its closing half.
                value = value[: -len(opener)]
            lesson = " ".join(unwrap_emphasis(value).split())
            if lesson.rstrip(".").casefold() in _NONE_VALUES:
                continue
            if len(lesson) > self.max_chars:
                lesson = lesson[: self.max_chars - 1].rstrip() + "\u2026"
            key = _normalize(lesson)
            if key and key not in seen:
                seen.add(key)
                found.append(lesson)
        return found

    def add_from_text(self, text: str, *, role: str, task_id: str) -> list[Lesson]:
        """Store the ``LESSON:`` lines of ``text``; return them as stored (count and recency updated).

        A lesson already known (same normalized text) is not added again: its count goes up and it becomes
        the most recently seen. Beyond ``max_lessons``, the least recently seen lessons are dropped.
        """
        extracted = self.extract(text)
        if not extracted:
            return []
        with self._lock:
            keys: list[str] = []
            for lesson_text in extracted:
                self._clock += 1
                key = _normalize(lesson_text)
                known = self._lessons.get(key)
                if known is None:
                    self._lessons[key] = Lesson(
                        text=lesson_text, role=role, task_id=task_id, last_seen=self._clock
                    )
                else:
                    known.count += 1
                    known.last_seen = self._clock
                keys.append(key)
            self._evict()
            self._save()
            return [self._lessons[key].model_copy() for key in keys if key in self._lessons]

    def relevant(self, query: str, files: Sequence[str] = (), limit: int = 5) -> list[Lesson]:
        """Up to ``limit`` lessons sharing words with ``query`` or the ``files`` paths, best first.

        Ranked by how many words they share, then by how often they were seen, then by how recently; a
        lesson sharing no word is not relevant. The order is fully deterministic.
        """
        wanted = _tokens([query, *files])
        if not wanted or limit < 1:
            return []
        with self._lock:
            scored = [(len(wanted & _tokens([lesson.text])), lesson) for lesson in self._lessons.values()]
            ranked = sorted(
                ((score, lesson) for score, lesson in scored if score > 0),
                key=lambda item: (-item[0], -item[1].count, -item[1].last_seen, item[1].key),
            )
            return [lesson.model_copy() for _, lesson in ranked[:limit]]

    def inject_block(self, query: str, files: Sequence[str] = (), limit: int = 5) -> str:
        """A short prompt block of the lessons relevant to ``query`` and ``files``; "" when there are none."""
        lessons = self.relevant(query, files, limit)
        if not lessons:
            return ""
        return "\n".join([INJECT_HEADER, *(f"- {lesson.text}" for lesson in lessons)])

    # --- internals ----------------------------------------------------------------------------------

    def _evict(self) -> None:
        excess = len(self._lessons) - self.max_lessons
        if excess <= 0:
            return
        oldest = sorted(self._lessons.values(), key=lambda lesson: (lesson.last_seen, lesson.key))
        for lesson in oldest[:excess]:
            del self._lessons[lesson.key]

    def _load(self) -> None:
        path = self.path
        try:
            raw = read_bounded(
                path,
                limit=MAX_STATE_FILE_BYTES,
                what="the knowledge store",
                follow_symlinks=False,
                error=led_by(path, StateError),
                remedy="replace it with the real file, or delete it to start with no lessons",
            )
        except FileNotFoundError:
            return
        except OSError as exc:
            _log.warning("knowledge.unreadable", path=str(path), error=str(exc))
            return
        try:
            stored = _KnowledgeFile.model_validate_json(raw)
        except (ValidationError, ValueError) as exc:
            self._move_aside(path, exc)
            return
        for lesson in stored.lessons:
            # A hand-edited file may repeat a lesson: merge rather than hold a duplicate.
            known = self._lessons.get(lesson.key)
            if known is None:
                self._lessons[lesson.key] = lesson
            else:
                known.count += lesson.count
                known.last_seen = max(known.last_seen, lesson.last_seen)
        self._clock = max((lesson.last_seen for lesson in self._lessons.values()), default=0)
        self._evict()

    def _move_aside(self, path: Path, exc: Exception) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        try:
            path.replace(target)
        except OSError as move_exc:
            _log.warning(
                "knowledge.corrupt", path=str(path), error=str(exc), moved_to=None, move_error=str(move_exc)
            )
            return
        _log.warning("knowledge.corrupt", path=str(path), error=str(exc), moved_to=str(target))

    def save(self) -> None:
        """Write ``knowledge.json`` from memory again (after someone else changed the file)."""
        with self._lock:
            self._save()

    def _save(self) -> None:
        ordered = sorted(self._lessons.values(), key=lambda lesson: lesson.last_seen)
        document = _KnowledgeFile(lessons=ordered).model_dump(mode="json")
        try:
            ensure_state_dir(self.paths)
            atomic_write_text(self.path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            _log.warning("knowledge.write_failed", path=str(self.path), error=str(exc))
