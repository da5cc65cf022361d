"""The size of a change, read from its patch: lines added and deleted per file, as ``git diff --numstat``
counts them, without another git process (the patch is at hand already)."""

from __future__ import annotations

import re

__all__ = ["numstat"]

_HEADER = re.compile(r'^diff --git "?a/(?P<old>.*?)"? "?b/(?P<new>.*?)"?$')


def numstat(patch: str) -> list[tuple[str, int | None, int | None]]:
    """``(path, added, deleted)`` per file of a unified git patch, in its order; None counts for a binary
    file. A rename or copy is counted under its new path."""
    stats: list[tuple[str, int | None, int | None]] = []
    path: str | None = None
    added = deleted = 0
    binary = in_hunk = False

    def close() -> None:
        if path is not None:
            stats.append((path, None, None) if binary else (path, added, deleted))

    for line in patch.splitlines():
        header = _HEADER.match(line)
        if header is not None:
            close()
            path, added, deleted, binary, in_hunk = header["new"], 0, 0, False, False
            continue
        if path is None:
            continue
        if line.startswith("@@"):
            in_hunk = True
        elif not in_hunk:
            if line.startswith(("Binary files ", "GIT binary patch")):
                binary = True
            elif line.startswith("rename to "):
                path = line.removeprefix("rename to ")
        elif line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            deleted += 1
    close()
    return stats
