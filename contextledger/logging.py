"""Logging setup: structlog, human-readable by default, JSON lines on request.

The library only calls ``structlog.get_logger``; applications configure output. The CLI calls
``configure_logging``; embedding applications may call it too or configure structlog
themselves.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Final, TextIO, cast

import structlog

LEVELS: Final = ("debug", "info", "warning", "error")


def configure_logging(
    level: str = "warning", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Send structlog output at ``level`` and above to ``stream`` (stderr by default), as
    JSON lines when ``json`` is true. Raises ``ValueError`` for an unknown level."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    out: TextIO = stream or cast(TextIO, _CurrentStderr())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


class _CurrentStderr(io.TextIOBase):
    """Whatever ``sys.stderr`` is when a line is written (test runners and embedding
    applications replace it; a stream captured at configuration time may be closed)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()
