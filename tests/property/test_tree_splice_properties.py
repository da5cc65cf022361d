"""On random repositories, a landing and a task's change that meet nowhere and delete nothing: the tree
``splice_tree`` writes is the one ``git merge-tree --write-tree`` writes. Names are drawn from a few that
sort around one another (``a-b``, ``a.c``, ``a0`` beside a directory ``a``), so several entries go into one
tree at once, before, between and after the others."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.git_trees import branches, commit, entries_between, object_writer, tree_of, write
from support.parallel import git

from autodev.workspace.trees import paths_meet, splice_tree

NAMES = ["a", "a-b", "a.c", "a0", "b", "ü z"]

paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)


def _fits(path: str, others: set[str]) -> bool:
    """Whether ``path`` can be a file beside ``others``: no file where it needs a directory or the reverse."""
    return not any(other != path and paths_meet([other], [path]) for other in others)


def _consistent(candidates: list[str], taken: set[str]) -> list[str]:
    chosen: list[str] = []
    for path in candidates:
        if path not in chosen and _fits(path, taken | set(chosen)):
            chosen.append(path)
    return chosen


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(paths, min_size=1, max_size=8),
    landing=st.lists(paths, min_size=1, max_size=5),
    task=st.lists(paths, min_size=1, max_size=5),
    executable=st.booleans(),
)
def test_a_spliced_tree_is_gits_merge_on_random_trees(
    base: list[str], landing: list[str], task: list[str], executable: bool
) -> None:
    base_files = _consistent(base, set())
    # Each side edits base files or adds new ones; the two sides' paths never meet.
    landed = _consistent(landing, set(base_files))
    landed += [path for path in landing if path in base_files and path not in landed]
    own = [
        path for path in _consistent(task, set(base_files) | set(landed)) if not paths_meet([path], landed)
    ]
    edited = [path for path in task if path in base_files and not paths_meet([path], landed)]
    own += [path for path in edited if path not in own]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        git(root, "init", "-q")
        for path in base_files:
            write(root, path, f"base {path}\n")
        commit(root, "base")

        def land(where: Path) -> None:
            for path in landed:
                write(where, path, f"landed {path}\n")

        def change(where: Path) -> None:
            for path in own:
                write(where, path, f"task {path}\n")
                if executable:
                    (where / path).chmod(0o755)

        start, landing_commit, task_commit = branches(root, land, change)
        spliced = splice_tree(
            object_writer(root), tree_of(root, landing_commit), entries_between(root, start, task_commit)
        )
        merged = git(root, "merge-tree", "--write-tree", landing_commit, task_commit).strip()
        assert spliced == merged
