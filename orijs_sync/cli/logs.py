"""The long-running commands' logging: ``--log-level``, ``--log-format text|json``, and
Redis URLs with their password masked for the start-up banner."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, Dict, Optional
from urllib.parse import urlsplit, urlunsplit

from .. import errors

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The attributes every LogRecord has: anything else on a record came with ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


def iso_time(seconds: float) -> str:
    """A UTC ISO 8601 date with milliseconds."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, then the
    fields the library attaches with ``extra=`` (``queue``, ``job_id``, ``job_name``,
    ``attempt``, ``worker``, ``group_id``...) and ``exc_info`` (a traceback, as text)."""

    def format(self, record: logging.LogRecord) -> str:
        line: Dict[str, Any] = {"time": iso_time(record.created), "level": record.levelname,
                                "logger": record.name, "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        return json.dumps(line, default=str)


def add_logging_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", default="INFO", type=str.upper, choices=LEVELS,
                   help="the lowest level logged (default: INFO)")
    p.add_argument("--log-format", default=None, choices=FORMATS,
                   help="text (default) or json: one object per line with time, level, "
                        "logger, message and the job's fields (queue, job_id, job_name, "
                        "attempt, worker)")


def setup_logging(level: str, log_format: Optional[str]) -> None:
    """A handler on the root logger writing to stderr in ``log_format``. When the root
    logger already has handlers (a Django project's ``LOGGING``), they are kept and only
    the level is set; asking for a format then is refused (configure it there)."""
    root = logging.getLogger()
    if root.handlers:
        if log_format is not None:
            raise errors.InvalidArgument(
                "--log-format: the root logger is already configured (e.g. by Django's "
                "LOGGING setting): set the format there", "log_format", log_format)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if log_format == "json"
                             else logging.Formatter(TEXT_FORMAT))
        root.addHandler(handler)
    root.setLevel(level)


def mask_url(url: Any) -> str:
    """A Redis URL (or connection) to show: its password replaced by ``***``
    (``redis://:***@host:6379/0``, ``redis://user:***@host:6379/0``)."""
    if not isinstance(url, str):
        return str(getattr(url, "address", type(url).__name__))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
