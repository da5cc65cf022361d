"""Canonical JSON and the content hash that ties a plan snapshot to what it claims to contain."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autodev.state.schemas import Plan

__all__ = ["canonical_json", "plan_content_hash", "sha256_hex"]


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: equal values always give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def plan_content_hash(plan: Plan) -> str:
    """sha256 of the plan without ``content_hash`` and ``updated_at`` (which change with every save)."""
    return sha256_hex(canonical_json(plan.model_dump(mode="json", exclude={"content_hash", "updated_at"})))
