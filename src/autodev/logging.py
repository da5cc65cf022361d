"""Structured logging set-up: JSON lines to ``.autodev/logs/autodev.jsonl``, a console only with ``-v``.

Library modules take a logger from ``get_logger(name)``; nothing is configured at import. The CLI (and the
``Orchestrator`` when its caller has not configured structlog) call ``configure_logging`` once.

``get_logger`` returns a proxy that imports structlog on the first event: structlog pulls in asyncio and
rich at import (about 80 ms), which read-only commands such as ``autodev status --json`` never need.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

__all__ = ["configure_logging", "configure_quiet_logging", "get_logger"]


class _LazyLogger:
    """Stands in for ``structlog.get_logger(name)`` until an event is actually logged.

    If nobody configured structlog by then, events are dropped: a library must not print on its caller's
    stdout (structlog's unconfigured default) unless asked to.
    """

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is not None:
            return getattr(self._logger, method)
        import structlog

        if not structlog.is_configured():
            # Not cached: once the application configures structlog, this logger starts writing.
            return getattr(_dropping_logger(), method)
        self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)


def _dropping_logger() -> Any:
    import structlog

    return structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[],
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
    )


def get_logger(name: str) -> Any:
    """A structlog logger for ``name``, bound on first use (so configuration done later still applies)."""
    return _LazyLogger(name)


class _ConsoleTee:
    """A processor that also renders each event for a person on stderr, then passes it on unchanged."""

    def __init__(self, stream: TextIO) -> None:
        import structlog

        self._stream = stream
        self._render = structlog.dev.ConsoleRenderer(colors=stream.isatty())

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        line = self._render(logger, method, dict(event_dict))
        print(line, file=self._stream)
        return event_dict


def configure_logging(log_file: Path | None, *, verbose: bool = False) -> None:
    """Send events as JSON lines to ``log_file`` (if given); with ``verbose`` also to stderr for people."""
    import structlog

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
        factory: Any = structlog.WriteLoggerFactory(file=log_file.open("a", encoding="utf-8"))
    else:
        factory = structlog.ReturnLoggerFactory()
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG if verbose else logging.INFO),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )


def configure_quiet_logging() -> None:
    """Drop every event (tests, library use without a log file): the return logger writes nothing."""
    import structlog

    structlog.configure(
        processors=[],
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
