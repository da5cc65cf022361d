"""The decoration agents wrap around a value, taken off."""

from __future__ import annotations

import pytest

from autodev.markdown_text import unwrap_emphasis


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("**APPROVED**", "APPROVED"),
        ("  `src/app.py`  ", "src/app.py"),
        ("**`x`**", "x"),
        ("_*nested*_", "nested"),
        ("**a** and **b**", "**a** and **b**"),
        ("**", "**"),
        ("plain", "plain"),
    ],
)
def test_only_decoration_around_the_whole_value_is_taken_off(written: str, meant: str) -> None:
    assert unwrap_emphasis(written) == meant
