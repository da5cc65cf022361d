"""The built-in agent roles: ``build_registry()`` gives the orchestrator one ``AgentSpec`` per role.

Prompts ship as package data (``autodev/agents/prompts/<role>.md``) and are read when the registry is
built, never at import. Tools follow one rule: only the developer and the test engineer change files;
every other role reports, and the orchestrator writes whatever it reports. The tournament roles see
the candidates in their prompt and get no tools at all, so every judge decides on the same evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from autodev.adapters.base import ToolName
from autodev.agents.spec import AgentAction, AgentSpec
from autodev.config.schema import ROLE_NAMES, CapabilityTier, RoleName
from autodev.errors import AutodevError

__all__ = ["build_registry", "get_spec"]

_REPORT: tuple[ToolName, ...] = ("read", "search")
_WRITE: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")
_TEXT_ONLY: tuple[ToolName, ...] = ()
# A role without tools answers in one turn; the slack covers a refused tool attempt.
_TEXT_TURNS = 3


@dataclass(frozen=True, slots=True)
class _RoleDefaults:
    tools: tuple[ToolName, ...]
    model_tier: CapabilityTier
    max_turns: int
    action: AgentAction
    output_contract: str


_ROLES: Mapping[RoleName, _RoleDefaults] = MappingProxyType(
    {
        "explorer": _RoleDefaults(
            _REPORT,
            "fast",
            30,
            "explore",
            "Findings, a FILES: list of referenced paths, optional LESSON: lines.",
        ),
        "domain_expert": _RoleDefaults(
            _REPORT,
            "standard",
            20,
            "consult",
            "A TOPIC: line, findings, a CONFIDENCE: HIGH|MEDIUM|LOW line.",
        ),
        "architect": _RoleDefaults(
            _REPORT,
            "strong",
            30,
            "document",
            "Only the canonical plan markdown, starting at '# Plan: <title>'.",
        ),
        "developer": _RoleDefaults(
            _WRITE,
            "standard",
            50,
            "implement",
            "Changes on disk, a short summary, a CHANGED: list of the files changed, optional LESSON: lines.",
        ),
        "reviewer": _RoleDefaults(
            _REPORT,
            "standard",
            20,
            "review",
            "A VERDICT: APPROVED|NEEDS_CHANGES|REJECTED line, an ISSUES: list, optional LESSON: lines.",
        ),
        "test_engineer": _RoleDefaults(
            _WRITE,
            "standard",
            40,
            "test",
            "Tests on disk, then a final RESULTS: passed=N failed=M total=T line.",
        ),
        "critic_sounding_board": _RoleDefaults(
            _REPORT,
            "strong",
            20,
            "critique",
            "VERDICT: APPROVED|NEEDS_REVISION|REJECTED, an ISSUES: list, RECOMMENDATION: and LESSON: lines.",
        ),
        "critic_t": _RoleDefaults(
            _TEXT_ONLY,
            "standard",
            _TEXT_TURNS,
            "critique",
            "Only an ISSUES: list of candidate A's problems, no rewrite.",
        ),
        "architect_b": _RoleDefaults(
            _TEXT_ONLY,
            "standard",
            _TEXT_TURNS,
            "design",
            "Only the revised artefact: plan markdown from '# Plan:' or a DIRECTION: block.",
        ),
        "synthesizer": _RoleDefaults(
            _TEXT_ONLY,
            "standard",
            _TEXT_TURNS,
            "design",
            "Only the merged artefact, in the candidates' form.",
        ),
        "judge": _RoleDefaults(
            _TEXT_ONLY,
            "standard",
            _TEXT_TURNS,
            "review",
            "One 'RANKING: X > Y > Z' line using each label once, best first, then a short justification.",
        ),
    }
)


def _read_prompt(role: RoleName) -> str:
    resource = resources.files("autodev.agents").joinpath("prompts", f"{role}.md")
    try:
        return resource.read_text(encoding="utf-8")
    except OSError as exc:
        raise AutodevError(
            f"the prompt of role {role!r} cannot be read from the installed package ({resource}): {exc}; "
            "reinstall autodev"
        ) from exc


def build_registry() -> dict[str, AgentSpec]:
    """One ``AgentSpec`` per role, keyed by role name, each prompt read once from the package."""
    registry: dict[str, AgentSpec] = {}
    for role in ROLE_NAMES:
        defaults = _ROLES[role]
        registry[role] = AgentSpec(
            role=role,
            prompt=_read_prompt(role),
            tools=defaults.tools,
            model_tier=defaults.model_tier,
            max_turns=defaults.max_turns,
            action=defaults.action,
            output_contract=defaults.output_contract,
        )
    return registry


def get_spec(registry: Mapping[str, AgentSpec], role: str) -> AgentSpec:
    """The spec of ``role``; raises ``AutodevError`` listing the known roles when it is missing."""
    spec = registry.get(role)
    if spec is None:
        known = ", ".join(sorted(registry)) or "none"
        raise AutodevError(f"role {role!r} not in registry; known roles: {known}")
    return spec
