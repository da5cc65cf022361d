"""Small text helpers shared by the phases: prompts carry excerpts, evidence files keep everything."""

from __future__ import annotations

__all__ = ["clip"]


def clip(text: str, limit: int) -> str:
    """``text`` with its middle cut out when it is longer than ``limit`` characters (head and tail kept)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"
