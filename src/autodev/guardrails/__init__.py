"""Guardrails around every agent call: tool-call, duration, diff and cost limits, loop detection."""

from __future__ import annotations

from autodev.guardrails.enforcer import GuardrailEnforcer, TaskUsage
from autodev.guardrails.errors import BudgetExceededError, CostUnknownError, LoopDetectedError
from autodev.guardrails.loop_detector import LOOP_DETECTED_REASON, LoopDetector

__all__ = [
    "LOOP_DETECTED_REASON",
    "BudgetExceededError",
    "CostUnknownError",
    "GuardrailEnforcer",
    "LoopDetectedError",
    "LoopDetector",
    "TaskUsage",
]
