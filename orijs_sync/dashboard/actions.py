"""The actions: POST forms (CSRF-checked, ``authorize``d and refused when read-only by
``app.Dashboard`` before they run), each answering with a redirect and a flash message
saying what happened, or why nothing did (the job moved meanwhile)."""
from __future__ import annotations

from typing import Callable

from .. import errors
from ..base.util import to_seconds
from ..queue import Queue
from .web import Request, Response, route

CLEAN_STATES = ("completed", "failed", "delayed", "wait", "prioritized", "paused")
RETRY_STATES = ("failed", "completed")


def _queue(req: Request, name: str) -> Queue:
    return Queue(name, connection=req.dashboard.connection, prefix=req.prefix)


def _job_action(req: Request, queue: str, job_id: str, verb: str,
                run: Callable[[Queue], str]) -> Response:
    """Run a job action; a job gone or moved meanwhile is refused with a message naming
    the state it is in now."""
    q = _queue(req, queue)
    back = req.url("queues", queue, "jobs", job_id)
    try:
        req.flash(run(q))
    except (errors.InvalidStateError, errors.JobNotFound) as exc:
        state = q.get_job_state(job_id)
        now = "it no longer exists" if state == "unknown" else f"it is {state} now"
        req.flash(f"Cannot {verb} job {job_id}: {now} ({exc}).", "error")
    if not req.client.exists(q.keys.job(job_id)):
        back = req.url("queues", queue)
    return Response.redirect(back)


@route("POST", "/queues/{queue}/jobs/{job_id}/retry", action="retry")
def retry(req: Request, queue: str, job_id: str) -> Response:
    state = req.form.get("state", "failed")
    if state not in RETRY_STATES:
        state = "failed"

    def run(q: Queue) -> str:
        job = q.get_job(job_id)
        if job is None:
            raise errors.JobNotFound(f"no job {job_id}")
        job.retry(state)
        return f"Job {job_id} moved from {state} back to waiting."
    return _job_action(req, queue, job_id, "retry", run)


@route("POST", "/queues/{queue}/jobs/{job_id}/promote", action="promote")
def promote(req: Request, queue: str, job_id: str) -> Response:
    def run(q: Queue) -> str:
        job = q.get_job(job_id)
        if job is None:
            raise errors.JobNotFound(f"no job {job_id}")
        job.promote()
        return f"Job {job_id} promoted: it runs now."
    return _job_action(req, queue, job_id, "promote", run)


@route("POST", "/queues/{queue}/jobs/{job_id}/remove", action="remove")
def remove(req: Request, queue: str, job_id: str) -> Response:
    def run(q: Queue) -> str:
        if not req.client.exists(q.keys.job(job_id)):
            raise errors.JobNotFound(f"no job {job_id}")
        if not q.remove(job_id):
            raise errors.InvalidStateError("a worker holds its lock (or a child's)")
        return f"Job {job_id} removed."
    return _job_action(req, queue, job_id, "remove", run)


@route("POST", "/queues/{queue}/pause", action="pause")
def pause(req: Request, queue: str) -> Response:
    _queue(req, queue).pause()
    req.flash(f"Queue {queue} paused: workers take no new job.")
    return Response.redirect(req.url("queues", queue))


@route("POST", "/queues/{queue}/resume", action="resume")
def resume(req: Request, queue: str) -> Response:
    _queue(req, queue).resume()
    req.flash(f"Queue {queue} resumed.")
    return Response.redirect(req.url("queues", queue))


@route("POST", "/queues/{queue}/drain", action="drain")
def drain(req: Request, queue: str) -> Response:
    removed = _queue(req, queue).drain()
    req.flash(f"Queue {queue} drained: {removed} waiting job(s) removed.")
    return Response.redirect(req.url("queues", queue))


@route("POST", "/queues/{queue}/clean", action="clean")
def clean(req: Request, queue: str) -> Response:
    state = req.form.get("state", "completed")
    try:
        if state not in CLEAN_STATES:
            raise errors.InvalidArgument(f"state must be one of {', '.join(CLEAN_STATES)}")
        grace = to_seconds(float(req.form.get("grace", "0") or 0), "grace") or 0.0
        removed = _queue(req, queue).clean(grace, 0, state)
    except (ValueError, errors.ValidationError) as exc:
        req.flash(f"Cannot clean {queue}: {exc}.", "error")
    else:
        req.flash(f"Cleaned {queue}: {len(removed)} {state} job(s) older than "
                  f"{grace:g} s removed.")
    return Response.redirect(req.url("queues", queue))
