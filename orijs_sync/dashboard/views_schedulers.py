"""The job schedulers page: every queue holding schedulers, each scheduler with its
pattern or interval, next run and the latest jobs it produced."""
from __future__ import annotations

from . import data_schedulers
from .web import Request, Response, route

QUEUES_SHOWN = 50


@route("GET", "/schedulers")
def schedulers(req: Request) -> Response:
    names, truncated = data_schedulers.scheduler_queues(req.client, req.prefix)
    found = [(name, data_schedulers.read_schedulers(req.client, req.prefix, name))
             for name in names[:QUEUES_SHOWN]]
    return req.dashboard.render(req, "schedulers.html", queues=found, total=len(names),
                                truncated=truncated)
