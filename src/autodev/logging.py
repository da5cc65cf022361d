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

_LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}


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


class _SafeFileLogger:
    """Appends rendered lines to a file, and stops (without raising) once the file cannot be written.

    A full disk or a read-only ``.autodev/`` must never turn a log line into a failed command. The file is
    opened for each line rather than held: logging is reconfigured by every library call that owns it,
    and a handle kept by a replaced configuration would leak.
    """

    def __init__(self, path: Path) -> None:
        self._path: Path | None = path

    def msg(self, message: str) -> None:
        if self._path is None:
            return
        try:
            with self._path.open("a", encoding="utf-8") as stream:
                stream.write(message + "\n")
        except OSError:
            self._path = None

    log = debug = info = warn = warning = msg
    err = error = critical = exception = fatal = failure = msg


def configure_logging(log_file: Path | None, *, verbose: bool = False, level: str | None = None) -> None:
    """Send events as JSON lines to ``log_file`` (if given); with ``verbose`` also to stderr for people.

    ``level`` (debug, info, warning, error, critical; the CLI passes ``AUTODEV_LOG_LEVEL``) sets the
    threshold; without it, debug with ``verbose`` and info otherwise.
    """
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
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            log_file = None
    factory: Any = structlog.ReturnLoggerFactory()
    if log_file is not None:
        file_logger = _SafeFileLogger(log_file)

        def factory(*_args: Any) -> _SafeFileLogger:
            return file_logger

    threshold = logging.DEBUG if verbose else logging.INFO
    if level and level.upper() in _LEVELS:
        threshold = _LEVELS[level.upper()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
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
