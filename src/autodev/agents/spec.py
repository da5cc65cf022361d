"""What one agent role is: its prompt, the capabilities it is offered, its default model tier and turns.

An ``AgentSpec`` holds the built-in defaults of a role; ``AgentSpec.effective`` applies the user's
configuration on top of them for one platform. Tools are an explicit list: a role that only reports
(explorer, reviewer, the tournament roles, ...) is never offered ``write``, ``edit`` or ``bash``, so the
orchestrator stays the only writer of anything those roles produce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from autodev.adapters.base import ToolName
from autodev.config.schema import CAPABILITY_TIERS, AutodevConfig, CapabilityTier, Platform, RoleName

__all__ = ["WRITE_TOOLS", "AgentAction", "AgentSpec", "EffectiveRoleSettings", "shifted_tier"]

# The orchestrator's ``DelegationAction``, spelled out here because agents sit below the orchestrator
# and must not import from it; a test keeps the two literals equal.
AgentAction = Literal[
    "implement",
    "review",
    "test",
    "explore",
    "critique",
    "consult",
    "document",
    "design",
]

WRITE_TOOLS: frozenset[ToolName] = frozenset({"write", "edit", "bash"})
"""Capabilities that can change the working tree (``bash`` can run anything, so it counts)."""


def shifted_tier(tier: CapabilityTier, offset: int) -> CapabilityTier:
    """``tier`` moved ``offset`` levels up (positive) or down, kept within fast..strong."""
    index = min(max(CAPABILITY_TIERS.index(tier) + offset, 0), len(CAPABILITY_TIERS) - 1)
    return CAPABILITY_TIERS[index]


@dataclass(frozen=True, slots=True)
class EffectiveRoleSettings:
    """The model and turn limit one role runs with on one platform, after configuration.

    ``model`` is ``None`` when the platform has no model for the requested tier: the agent CLI then
    uses its own default model.
    """

    model: str | None
    max_turns: int


class AgentSpec(BaseModel):
    """The built-in definition of one agent role."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: RoleName = Field(description="The role this spec defines.")
    prompt: str = Field(description="The role's system prompt, ending with its output contract.")
    tools: tuple[ToolName, ...] = Field(
        description="Capabilities the role is offered; () means none, never 'all tools'."
    )
    model_tier: CapabilityTier = Field(
        description="Capability tier used when the configuration names no model for the role."
    )
    max_turns: int = Field(ge=1, description="Agent turns per call when the configuration sets none.")
    action: AgentAction = Field(description="The delegation action the role performs.")
    output_contract: str = Field(description="One line: what the role's reply must contain.")

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty or blank")
        return value

    @field_validator("tools")
    @classmethod
    def _tools_unique(cls, value: tuple[ToolName, ...]) -> tuple[ToolName, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"lists a tool more than once: {value}")
        return value

    @field_validator("output_contract")
    @classmethod
    def _contract_one_line(cls, value: str) -> str:
        if not value.strip() or "\n" in value:
            raise ValueError("must be one non-empty line")
        return value

    @property
    def can_write(self) -> bool:
        """Whether the role is offered any capability that can change files."""
        return bool(WRITE_TOOLS.intersection(self.tools))

    def effective(
        self, config: AutodevConfig, platform: Platform, *, task_tier: CapabilityTier | None = None
    ) -> EffectiveRoleSettings:
        """The model name and turn limit this role runs with on ``platform`` under ``config``.

        A ``[roles.<role>]`` override wins over the built-in defaults, field by field. For a call made
        for a task, ``task_tier`` (the task's Model) takes the built-in tier's place, moved by the role's
        ``tier_offset``; a model set for the role still wins. The model (a tier or a model name) is then
        resolved through ``config.resolve_model``.
        """
        override = config.roles.get(self.role)
        requested: str = self.model_tier
        if override is not None and override.model is not None:
            requested = override.model
        elif task_tier is not None:
            requested = shifted_tier(task_tier, override.tier_offset if override is not None else 0)
        turns = self.max_turns if override is None or override.max_turns is None else override.max_turns
        return EffectiveRoleSettings(model=config.resolve_model(platform, requested), max_turns=turns)
