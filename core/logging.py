"""structlog setup: a readable console renderer when stderr is a terminal, JSON lines otherwise.

Logs go to stderr so command output on stdout stays machine-readable.
"""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def _stderr_logger(*args: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr`` (resolved per logger, so a replaced stream is followed)."""
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(level: str = "info", json_output: bool | None = None) -> None:
    """Configure structlog once per process.

    :param level: minimum level, one of :data:`LEVELS`.
    :param json_output: force JSON (True) or console (False); None = JSON unless stderr is a TTY.
    """
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not valid; valid: {', '.join(LEVELS)}")
    if json_output is None:
        json_output = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
