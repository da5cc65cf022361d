"""The error tree in ``autodev.errors`` names every ``AutodevError`` there is, with its place in the tree."""

from __future__ import annotations

import importlib
import pkgutil
import re

import autodev
from autodev import errors
from autodev.errors import AutodevError


def _every_subclass(cls: type[AutodevError]) -> list[type[AutodevError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_every_subclass(sub)]
    return found


def test_every_error_class_is_in_the_documented_tree_under_its_parent() -> None:
    for module in pkgutil.walk_packages(autodev.__path__, "autodev."):
        importlib.import_module(module.name)
    assert errors.__doc__ is not None
    tree = errors.__doc__.split("::", 1)[1]
    # Each line's class and its depth: a parent is the nearest line above with one level less.
    depth = {
        match.group(2): len(match.group(1))
        for match in re.finditer(r"^([ │├└─]*)(\w+Error)\b", tree, re.MULTILINE)
    }
    missing = sorted(c.__name__ for c in _every_subclass(AutodevError) if c.__name__ not in depth)
    assert missing == []
    for cls in _every_subclass(AutodevError):
        parent = cls.__mro__[1].__name__
        assert depth[cls.__name__] > depth[parent], f"{cls.__name__} is not drawn under {parent}"
