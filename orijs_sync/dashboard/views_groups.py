"""The group queue pages: every group queue found, one queue's groups (stuck ones first,
each with its running job and its waiting jobs in order), one group job."""
from __future__ import annotations

from . import data_groups
from .web import HTTPError, Request, Response, route


@route("GET", "/groups")
def group_queues(req: Request) -> Response:
    names, truncated = data_groups.list_group_queues(req.client)
    found = [data_groups.read_group_queue(req.client, name, max_groups=200, max_jobs=0,
                                          max_finished=0) for name in names[:100]]
    return req.dashboard.render(req, "groups.html", queues=found, total=len(names),
                                truncated=truncated)


@route("GET", "/groups/{queue}")
def group_queue(req: Request, queue: str) -> Response:
    state = data_groups.read_group_queue(req.client, queue)
    if not state.groups and not any(state.counts.values()) and not state.paused:
        raise HTTPError(404, f"No group queue {queue!r} (no key groupmq:{queue}:...).")
    return req.dashboard.render(req, "group_queue.html", q=state)


@route("GET", "/groups/{queue}/jobs/{job_id}")
def group_job(req: Request, queue: str, job_id: str) -> Response:
    job = data_groups.read_group_job(req.client, queue, job_id)
    if job is None:
        raise HTTPError(404, f"No job {job_id!r} in group queue {queue!r}.")
    return req.dashboard.render(req, "group_job.html", queue=queue, job=job)
