"""Guardrails around every agent call: tool-call, duration, diff and cost limits, loop detection (issue 4)."""
