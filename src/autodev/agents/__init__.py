"""Agent roles: the ``AgentSpec`` registry and the role prompts (issue 3)."""
