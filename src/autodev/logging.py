"""Structured logging set-up: JSON lines to ``.autodev/logs/autodev.jsonl``, a console only with ``-v``.

Library modules only call ``structlog.get_logger(...)``; nothing is configured at import. The CLI (and the
``Orchestrator`` when its caller has not configured structlog) call ``configure_logging`` once.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

__all__ = ["configure_logging", "configure_quiet_logging"]


class _ConsoleTee:
    """A processor that also renders each event for a person on stderr, then passes it on unchanged."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._render = structlog.dev.ConsoleRenderer(colors=stream.isatty())

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        line = self._render(logger, method, dict(event_dict))
        print(line, file=self._stream)
        return event_dict


def configure_logging(log_file: Path | None, *, verbose: bool = False) -> None:
    """Send events as JSON lines to ``log_file`` (if given); with ``verbose`` also to stderr for people."""
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if verbose:
        processors.append(_ConsoleTee(sys.stderr))
    processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        factory: Any = structlog.WriteLoggerFactory(
            file=log_file.open("a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        )
    else:
        factory = structlog.ReturnLoggerFactory()
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )


def configure_quiet_logging() -> None:
    """Drop every event (tests, library use without a log file): the return logger writes nothing."""
    structlog.configure(
        processors=[],
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
