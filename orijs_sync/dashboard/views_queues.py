"""The queues list (paginated; the names come from the cached directory) and a
queue's page (counts, limits, throughput chart, workers, queue actions)."""
from __future__ import annotations

from . import charts, data
from .actions import CLEAN_STATES
from .web import HTTPError, Request, Response, route

QUEUES_PER_PAGE = 50


@route("GET", "/")
@route("GET", "/queues")
def queues(req: Request) -> Response:
    names = req.dashboard.queues.names()
    pages = max(1, -(-len(names) // QUEUES_PER_PAGE))
    page = req.int_param("page", 1, minimum=1, maximum=pages)
    shown = names[(page - 1) * QUEUES_PER_PAGE: page * QUEUES_PER_PAGE]
    found = data.summaries(req.client, req.prefix, shown, points=data.CHART_POINTS)
    workers = data.workers_by_queue(req.client, req.prefix, shown)
    for summary in found:
        summary.workers = workers[summary.name]
    drawn = {q.name: charts.throughput(q.completed_per_minute, q.failed_per_minute,
                                       width=120, height=24) for q in found}
    return req.dashboard.render(req, "queues.html", queues=found, total=len(names),
                                page=page, pages=pages, states=data.STATES, charts=drawn,
                                complete=req.dashboard.queues.complete)


@route("GET", "/queues/{queue}")
def queue(req: Request, queue: str) -> Response:
    summary = data.summaries(req.client, req.prefix, [queue], points=data.CHART_POINTS)[0]
    if summary.total == 0 and not req.client.exists(f"{req.prefix}:{queue}:meta"):
        raise HTTPError(404, f"No queue {queue!r} under the prefix {req.prefix!r}.")
    summary.workers = data.workers_by_queue(req.client, req.prefix, [queue])[queue]
    chart = charts.throughput(summary.completed_per_minute, summary.failed_per_minute,
                              width=480, height=120, axis=True)
    return req.dashboard.render(req, "queue.html", q=summary, chart=chart,
                                states=data.STATES, clean_states=CLEAN_STATES)

