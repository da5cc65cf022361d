"""AutoDev configuration: the ``AutodevConfig`` model, its layered loader and the ``init`` template.

Precedence, lowest first: built-in defaults, ``[tool.autodev]`` in ``pyproject.toml``,
``.autodev/config.toml``, ``AUTODEV_*`` environment variables, command-line overrides.
"""

from __future__ import annotations

from autodev.config.loader import NON_CONFIG_ENV, ConfigEntry, explain_config, load_config
from autodev.config.schema import (
    AGENT_CLIS,
    CAPABILITY_TIERS,
    PLATFORMS,
    ROLE_NAMES,
    AutodevConfig,
    EnvironmentSettings,
    GateSettings,
    GuardrailSettings,
    InlineSettings,
    ModelPrice,
    ProviderSettings,
    QAGatesSettings,
    RoleSettings,
    TierModels,
    TournamentSettings,
    TournamentsSettings,
    WorktreeSetupSettings,
)
from autodev.config.template import render_config_template

__all__ = [
    "AGENT_CLIS",
    "CAPABILITY_TIERS",
    "NON_CONFIG_ENV",
    "PLATFORMS",
    "ROLE_NAMES",
    "AutodevConfig",
    "ConfigEntry",
    "EnvironmentSettings",
    "GateSettings",
    "GuardrailSettings",
    "InlineSettings",
    "ModelPrice",
    "ProviderSettings",
    "QAGatesSettings",
    "RoleSettings",
    "TierModels",
    "TournamentSettings",
    "TournamentsSettings",
    "WorktreeSetupSettings",
    "explain_config",
    "load_config",
    "render_config_template",
]
