"""Imported at start-up by a project's Python running in one of AutoDev's task worktrees (and only there:
AutoDev puts this directory on ``PYTHONPATH`` for the gates it runs in a worktree).

An environment may hold an editable install of the main checkout. A path-based one (a ``.pth`` line naming
the checkout or its ``src/``) and a finder-based one (setuptools' ``__editable__`` finders, the
``editables`` redirector) would both serve the main checkout's modules wherever the worktree lacks one, so
the code under test would not be the worktree's. Here every path entry into the main checkout is dropped
(the worktree's own source root is already first on ``PYTHONPATH``) and those finders are pointed at the
worktree. Then the environment's own ``sitecustomize``, if it has one, runs as it would have.
"""

from __future__ import annotations

import importlib
import os
import sys


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _moved(path: object, main: str, tree: str, state: str) -> str | None:
    """``path`` mapped from the main checkout into the worktree; None when it points elsewhere."""
    if not isinstance(path, str) or not path:
        return None
    real = os.path.realpath(path)
    if _inside(real, main) and not _inside(real, state):
        return tree + real[len(main) :]
    return None


def _redirect() -> None:
    main_env, tree_env = os.environ.get("AUTODEV_MAIN_CHECKOUT"), os.environ.get("AUTODEV_WORKTREE")
    if not main_env or not tree_env:
        return
    main, tree = os.path.realpath(main_env), os.path.realpath(tree_env)
    state = os.path.join(main, ".autodev")  # the worktrees themselves live under it
    sys.path[:] = [entry for entry in sys.path if _moved(entry, main, tree, state) is None]
    for finder in sys.meta_path:
        module = sys.modules.get(getattr(finder, "__module__", "") or "")
        mapping = getattr(module, "MAPPING", None)  # setuptools' editable finder: name -> package dir
        if isinstance(mapping, dict):
            for name, target in list(mapping.items()):
                moved = _moved(target, main, tree, state)
                if moved is not None:
                    mapping[name] = moved
        namespaces = getattr(module, "NAMESPACES", None)  # name -> [dirs]
        if isinstance(namespaces, dict):
            for name, targets in list(namespaces.items()):
                if isinstance(targets, list):
                    namespaces[name] = [_moved(t, main, tree, state) or t for t in targets]
        redirections = getattr(finder, "_redirections", None)  # editables' RedirectingFinder
        if isinstance(redirections, dict):
            for name, target in list(redirections.items()):
                moved = _moved(target, main, tree, state)
                if moved is not None:
                    redirections[name] = moved


def _chain() -> None:
    """Run the environment's own ``sitecustomize`` (this one took its name on ``sys.path``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    own = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")  # the environment's own, if it has one
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
        if own is not None:
            sys.modules["sitecustomize"] = own
    finally:
        sys.path[:] = saved


_redirect()
_chain()
