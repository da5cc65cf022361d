"""QA gates run through one check runner: syntax, lint, build, test, secretscan.

``run_gates`` checks a change with the repository's own tools for each language ``detect_languages``
finds; every tool runs through ``run_check`` (argv, no shell, pinned cwd, deadline, bounded output, a
digest for evidence). A gate that could not run is an ``error``, never a pass; it is ``skipped`` only when
the configuration says so, and ``GateResult.skipped_by`` records who said it. ``probe_tools`` is the tool
report of ``autodev doctor``.
"""

from autodev.qa.detect import LANGUAGES, Language, detect_languages
from autodev.qa.gates import FILES_TOKEN, GATE_NAMES, GateName, GateResult, GateStatus, SkipCause, run_gates
from autodev.qa.runner import CHECK_STATUSES, CheckResult, CheckSpec, CheckStatus, run_check
from autodev.qa.tools import PROBED_TOOLS, ResolvedTool, probe_tools, resolve_tool

__all__ = [
    "CHECK_STATUSES",
    "FILES_TOKEN",
    "GATE_NAMES",
    "LANGUAGES",
    "PROBED_TOOLS",
    "CheckResult",
    "CheckSpec",
    "CheckStatus",
    "GateName",
    "GateResult",
    "GateStatus",
    "Language",
    "ResolvedTool",
    "SkipCause",
    "detect_languages",
    "probe_tools",
    "resolve_tool",
    "run_check",
    "run_gates",
]
