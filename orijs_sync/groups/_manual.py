"""Manual processing of a group queue (GroupMQ's ``reserve``, ``reserveBatch``,
``heartbeat``, ``complete``, ``deadLetter`` and its low-level ``retry``: ``fail``), and
the reservation and failure details the worker shares with it.

A reservation writes its token into the job's ``processing:{id}`` hash; ``complete``,
``heartbeat``, ``fail`` and ``dead_letter`` act only while that hash still holds it, so a call
made after the job was recovered (its deadline passed), removed or reserved again
does nothing and returns ``False``.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..base.util import Seconds, dumps, now_ms, well_formed
from ..engine.children import trace_text
from . import _options as opt
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

SCAN_LIMIT = 100          # most ready groups one reserve call looks at
DEAD_LETTER_REASON = "dead-lettered"
FAILED_REASON = "failed by hand"


def reserve_jobs(queue: "GroupQueue", n: int, token: str, preferred: str = "",
                 run: Optional[Callable[..., Any]] = None) -> List[GroupJob]:
    """Reserve up to ``n`` jobs, one per free group (``preferred`` first), each held
    for the queue's job timeout under ``token``; none while the queue is paused."""
    runner = run or queue.run_script
    replies = runner("reserve", now_ms(), queue.job_timeout_ms, n, preferred, token,
                     max(SCAN_LIMIT, n))
    return [GroupJob.from_reply(reply, queue, token) for reply in replies]


def reserve_by_hand(queue: "GroupQueue", n: int) -> List[GroupJob]:
    """``reserve_jobs`` under a token of its own, each job's ``processed_on`` set to
    the reservation time (what ``complete`` and ``dead_letter`` record)."""
    reserved_at = now_ms()
    jobs = reserve_jobs(queue, n, f"manual:{uuid.uuid4().hex}")
    for job in jobs:
        job.processed_on = reserved_at
    return jobs


def held(job: Any, queue: "GroupQueue") -> GroupJob:
    """The job, when it is a reserved ``GroupJob`` of this queue; else a clear error."""
    if not isinstance(job, GroupJob):
        raise opt.GroupOptionError(f"job must be a GroupJob from reserve() or "
                                   f"reserve_batch(), not {type(job).__name__}")
    if job.queue is not None and job.queue.ns != queue.ns:
        raise opt.GroupOptionError(f"job {job.id!r} belongs to group queue "
                                   f"{job.queue.name!r}, not {queue.name!r}")
    if not job.token:
        raise opt.GroupOptionError(f"job {job.id!r} was not reserved (get it from reserve() "
                                   "or reserve_batch(): completing, heartbeating, failing "
                                   "and dead-lettering act on a reservation)")
    return job


def error_fields(error: Any) -> Tuple[str, str, str]:
    """(message, name, stack) of an exception, or of a plain message (name ``Error``,
    as GroupMQ names a string error), as written to the job hash."""
    if isinstance(error, BaseException):
        stack = trace_text(error)          # process mode: the child's traceback
        return well_formed(str(error)), type(error).__name__, well_formed(stack)
    if not isinstance(error, str):
        raise opt.GroupOptionError(f"error must be an exception or a message string, not "
                                   f"{type(error).__name__}")
    return well_formed(error), "Error", ""


def completion_fields(queue: "GroupQueue", job: GroupJob, text: str, started: int,
                      now: int) -> str:
    """The completed job's hash fields (JSON list), read only when jobs are kept."""
    if not queue.keep_completed:
        return ""
    return dumps(["processedOn", str(started), "finishedOn", str(now), "attempts",
                  str(job.attempts_made), "maxAttempts", str(job.max_attempts),
                  "returnvalue", text])


def complete(queue: "GroupQueue", job: GroupJob, result: Any) -> bool:
    """Complete a reserved job (no next job taken); False when it was no longer held."""
    text = dumps(result, "result")
    now = now_ms()
    started = job.processed_on or now
    fields = completion_fields(queue, job, text, started, now)
    reply = queue.run_script("complete", "", now, queue.job_timeout_ms, queue.keep_completed,
                             "0", job.id, job.group_id, job.token, fields)
    if reply[0] == 0:
        return False
    job.status, job.returnvalue, job.finished_on = "completed", result, now
    return True


def heartbeat(queue: "GroupQueue", job: GroupJob, extend: Optional[Seconds]) -> bool:
    """Hold a reserved job ``extend`` seconds (default: the job timeout) from now."""
    extend_ms = queue.job_timeout_ms if extend is None \
        else opt.seconds_ms(extend, "extend", positive=True) or 1
    now = now_ms()
    lost = queue.run_script("heartbeat", now, extend_ms, job.id, job.token)
    if lost:
        return False
    job.deadline_at = now + extend_ms
    return True


def fail(queue: "GroupQueue", job: GroupJob, fields: Tuple[str, str, str], *,
         backoff_ms: int = 0, started: Optional[int] = None,
         attempts_cap: int = 0) -> List[Any]:
    """Write a failed attempt of a held job (fail.lua), its error as ``error_fields``
    gives it: retried after ``backoff_ms`` while attempts remain (fewer than the job's
    ``maxAttempts`` and, when set, ``attempts_cap``), else failed for good. Returns
    the script's reply: ``[0]`` when the job was no longer held, else
    ``["retry" | "failed", attempts]``."""
    message, name, stack = fields
    now = now_ms()
    return list(queue.run_script("fail", job.id, job.group_id, job.token, now, backoff_ms,
                                 queue.keep_failed, message, name, stack,
                                 started or job.processed_on or now, attempts_cap))


def dead_letter(queue: "GroupQueue", job: GroupJob, error: Any) -> bool:
    """Fail a reserved job for good, whatever attempts it has left."""
    fields = error_fields(DEAD_LETTER_REASON if error is None else error)
    return _record(job, fields, fail(queue, job, fields, attempts_cap=1), 0)


def fail_by_hand(queue: "GroupQueue", job: GroupJob, error: Any,
                 backoff: Optional[Seconds]) -> bool:
    """Fail this attempt of a reserved job: retried after ``backoff`` seconds while it
    has attempts left (GroupMQ's low-level ``retry``), else failed for good."""
    fields = error_fields(FAILED_REASON if error is None else error)
    backoff_ms = opt.seconds_ms(backoff, "backoff") or 0
    return _record(job, fields, fail(queue, job, fields, backoff_ms=backoff_ms), backoff_ms)


def _record(job: GroupJob, fields: Tuple[str, str, str], reply: List[Any],
            backoff_ms: int) -> bool:
    """What fail.lua's ``reply`` did, on ``job``: False when it was no longer held."""
    if not reply[0]:
        return False
    job.attempts_made = int(reply[1])
    job.failed_reason, job.stacktrace = fields[0], fields[2] or None
    if reply[0] == "failed":
        job.status = "failed"
    else:
        job.status = "delayed" if backoff_ms else "waiting"
    return True
