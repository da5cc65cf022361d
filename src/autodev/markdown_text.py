"""Reading the plain words out of an agent's markdown: the decoration models wrap around a value."""

from __future__ import annotations

__all__ = ["unwrap_emphasis"]

_WRAPPERS = ("**", "__", "`", "*", "_")


def unwrap_emphasis(text: str) -> str:
    """``text`` without decoration wrapped around all of it (bold, italics, backticks), however nested:
    ``**`x`**`` is ``x``, while ``**a** and **b**`` stays as it is (no decoration is around all of it)."""
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for wrapper in _WRAPPERS:
            inner = text[len(wrapper) : -len(wrapper)]
            if (
                len(text) > 2 * len(wrapper)
                and text.startswith(wrapper)
                and text.endswith(wrapper)
                and wrapper not in inner
            ):
                text = inner.strip()
                changed = True
                break
    return text
