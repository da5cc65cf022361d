"""The structured handoff from the orchestrator to a specialist role."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autodev.agents.spec import AgentAction

__all__ = ["DelegationAction", "DelegationEnvelope"]

# One literal for both layers: the agents layer defines what a role does, the envelope carries it.
DelegationAction = AgentAction


class DelegationEnvelope(BaseModel):
    """Structured task handoff to a specialist role."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    target_agent: str
    action: DelegationAction
    files: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    acceptance: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)

    def render_as_task_message(self) -> str:
        """The envelope as the plain-text block an agent reads, without a trailing newline.

        ``TASK``, ``AGENT`` and ``ACTION`` are always present; ``FILES``, ``CONSTRAINTS``,
        ``ACCEPTANCE`` and ``CONTEXT`` only when they hold something. Multi-line values become an
        indented ``|`` block; context values that are not strings are written as compact JSON.
        """
        lines = [f"TASK: {self.task_id}", f"AGENT: {self.target_agent}", f"ACTION: {self.action}"]
        lines += _list_section("FILES", self.files)
        lines += _list_section("CONSTRAINTS", self.constraints)
        if self.acceptance is not None and self.acceptance.strip():
            lines += _entry("", "ACCEPTANCE", self.acceptance)
        if self.context:
            lines.append("CONTEXT:")
            for key, value in self.context.items():
                text = value if isinstance(value, str) else _compact_json(value)
                lines += _entry("  ", key, text)
        return "\n".join(lines)


def _list_section(label: str, items: list[str]) -> list[str]:
    if not items:
        return []
    lines = [f"{label}:"]
    for item in items:
        first, *rest = item.splitlines() or [""]
        lines.append(f"  - {first}".rstrip())
        lines += [f"    {line}".rstrip() for line in rest]
    return lines


def _entry(indent: str, label: str, text: str) -> list[str]:
    parts = text.splitlines()
    if len(parts) <= 1:
        return [f"{indent}{label}: {text.strip()}".rstrip()]
    # A block keeps the value's own indentation (code, lists) readable under its label.
    return [f"{indent}{label}: |", *(f"{indent}  {part}".rstrip() for part in parts)]


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)
