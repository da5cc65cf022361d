"""Agent roles: the ``AgentSpec`` registry, the role prompts and the parsers of their output contracts.

``build_registry()`` gives one ``AgentSpec`` per role (prompt, tools, default model tier and turns);
``AgentSpec.effective`` applies the configuration for one platform; the ``parse_*`` functions read a
role's reply without ever turning a missing or malformed answer into a pass.
"""

from autodev.agents.parsing import (
    LESSON_MAX_CHARS,
    Confidence,
    CriticParse,
    CriticVerdict,
    ReviewParse,
    ReviewVerdict,
    TestCounts,
    parse_confidence,
    parse_critic_verdict,
    parse_files,
    parse_lessons,
    parse_ranking,
    parse_review_verdict,
    parse_test_results,
    parse_topic,
)
from autodev.agents.registry import build_registry, get_spec
from autodev.agents.spec import WRITE_TOOLS, AgentAction, AgentSpec, EffectiveRoleSettings

__all__ = [
    "LESSON_MAX_CHARS",
    "WRITE_TOOLS",
    "AgentAction",
    "AgentSpec",
    "Confidence",
    "CriticParse",
    "CriticVerdict",
    "EffectiveRoleSettings",
    "ReviewParse",
    "ReviewVerdict",
    "TestCounts",
    "build_registry",
    "get_spec",
    "parse_confidence",
    "parse_critic_verdict",
    "parse_files",
    "parse_lessons",
    "parse_ranking",
    "parse_review_verdict",
    "parse_test_results",
    "parse_topic",
]
