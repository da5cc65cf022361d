"""The stale-base check of a run (``autodev.workspace.base_freshness``): at ``autodev run`` start, with a
fetch of the base ref unless ``--no-fetch``, and again before the execute phase's first writer, without one (a
delegation must not wait on the network).

A checkout ``base_behind_threshold`` or more commits behind its base stops the run before any agent works,
exit 3, with the counts and the choice: ``autodev refresh-base`` (a strict fast-forward), or
``--stale-base-ok`` to build on it as it is. That choice is recorded (``base_checked``, accepted) for the base
commit, so a resumed run does not ask again, and the agents are told in their project context. Each check is
recorded once per run and result, so its warning is given once.
"""

from __future__ import annotations

from autodev.errors import EXIT_SUSPENDED, AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.run_context import RunContext
from autodev.workspace.base_freshness import BaseFreshness, check_base

__all__ = [
    "StaleBaseError",
    "check_base_at_start",
    "check_base_before_writers",
    "read_base_before_writers",
]

_log = get_logger("autodev.base_check")


class StaleBaseError(AutodevError):
    """The checkout is too far behind its base to build on without the user's say; nothing was started."""

    exit_code = EXIT_SUSPENDED


async def check_base_at_start(session: RunContext, *, fetch: bool) -> BaseFreshness:
    """The check at ``autodev run`` start (module docstring); ``StaleBaseError`` to ask the user."""
    base = await _check(session, fetch=fetch)
    if base.ref is not None:
        session.emit(ProgressEvent("note", base.line()))
    if base.stale and not session.stale_base_ok:
        raise StaleBaseError(_question(base))
    return base


async def read_base_before_writers(session: RunContext) -> BaseFreshness:
    """What the check before the first writer judges (``check_base_before_writers``): git reads only, no
    fetch, nothing recorded or said."""
    return await _check(session, fetch=False)


def check_base_before_writers(session: RunContext, base: BaseFreshness) -> BaseFreshness:
    """The check before the first writer, of ``base`` as ``read_base_before_writers`` found it, recorded in
    the ledger; ``StaleBaseError`` to ask the user unless they chose this base already."""
    if base.ref is None:
        return base
    pm = session.plan_manager
    accepted = session.stale_base_ok or pm.stale_base_accepted(base.ref_commit)
    if base.stale and not accepted:
        raise StaleBaseError(_question(base))
    if pm.record_base_check(base.record(), accepted=base.stale) and base.stale:
        session.emit(
            ProgressEvent("note", f"building on a checkout behind its base, as you chose: {base.line()}")
        )
    return base


async def _check(session: RunContext, *, fetch: bool) -> BaseFreshness:
    config = session.config
    base = await check_base(
        session.git,
        fetch=fetch,
        fetch_timeout_s=config.base_fetch_timeout_s,
        threshold=config.base_behind_threshold,
    )
    _log.info("base.checked", **base.record())
    return base


def _question(base: BaseFreshness) -> str:
    return (
        f"the checkout is {base.behind} commit(s) behind {base.ref} (at least base_behind_threshold = "
        f"{base.threshold}): {base.line()}; `autodev refresh-base` fast-forwards it, or run again with "
        "--stale-base-ok to build on it as it is"
    )
