"""The log lines a worker writes about its jobs (docs/logging.md lists the logger tree).

A failed attempt is a WARNING with its traceback (the child's, in process mode), a job
that failed for good an ERROR, a completion a DEBUG line; each line carries ``extra``
fields a JSON formatter picks up: ``queue``, ``job_id``, ``job_name``, ``attempt``,
``worker``. The library never configures logging: it only writes to its loggers.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional

WORKER_LOG = logging.getLogger("orijs_sync.worker")


def job_extra(queue: str, job_id: str, job_name: str, attempt: int,
              worker: str) -> Dict[str, Any]:
    """The structured fields of a job's log lines (``LogRecord`` attributes)."""
    return {"queue": queue, "job_id": job_id, "job_name": job_name, "attempt": attempt,
            "worker": worker}


def log_failure(logger: logging.Logger, extra: Dict[str, Any], exc: BaseException, *,
                attempts: int, retry_in_ms: Optional[int]) -> None:
    """One failed attempt: WARNING while it is retried, ERROR when it failed for good."""
    final = retry_in_ms is None
    if retry_in_ms is None:
        left = "no attempt left" if extra["attempt"] >= attempts else "not retried"
        what = f"failed for good ({left})"
    else:
        what = f"failed; retried in {retry_in_ms / 1000.0:g} s"
    text = (f"job {extra['job_id']} ({extra['job_name']}) of queue {extra['queue']} {what}, "
            f"attempt {extra['attempt']} of {attempts}: {type(exc).__name__}: {exc}")
    level = logging.ERROR if final else logging.WARNING
    child = getattr(exc, "child_traceback", None)
    if child:     # process mode: the traceback is the child's, as text
        logger.log(level, "%s\n%s", text, child.rstrip(), extra=extra)
    else:
        logger.log(level, "%s", text, exc_info=(type(exc), exc, exc.__traceback__),
                   extra=extra)


def log_completed(logger: logging.Logger, extra: Dict[str, Any]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("job %s (%s) of queue %s completed, attempt %s", extra["job_id"],
                     extra["job_name"], extra["queue"], extra["attempt"], extra=extra)
