"""structlog JSON logs on stderr, with session_id, seq and request_id bound where known.

structlog is imported when a process first logs or configures logging, not when a module
that logs is imported: importing it (its dev renderer pulls in rich's tracebacks and
pygments) was the largest part of `seedline status`'s start-up.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", service: str = "seedline") -> None:
    import structlog

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(service=service)


class _Logger:
    """structlog's logger for ``name``, fetched on first use."""

    __slots__ = ("_name", "_logger")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attribute)


def get_logger(name: str) -> Any:
    """A structlog logger (a BoundLogger's methods: info, warning, bind, ...)."""
    return _Logger(name)
