"""The OriJS pages: event types (their queue, subscribers and recent failures), workflows,
a workflow's executions, and one execution step by step (state, timings, results, the
failing step and the rollbacks that ran)."""
from __future__ import annotations

from . import data_orijs
from .web import HTTPError, Request, Response, route


def _prefixes(req: Request) -> "tuple[str, str]":
    return req.dashboard.events_prefix, req.dashboard.workflows_prefix


@route("GET", "/events")
def events(req: Request) -> Response:
    events_prefix, _ = _prefixes(req)
    found, truncated = data_orijs.read_event_types(req.client, req.prefix, events_prefix)
    failures = [(t, row) for t in found for row in t.failures]
    return req.dashboard.render(req, "events.html", types=found, truncated=truncated,
                                events_prefix=events_prefix, failures=failures)


@route("GET", "/workflows")
def workflows(req: Request) -> Response:
    _, workflows_prefix = _prefixes(req)
    names, truncated = data_orijs.read_workflows(req.client, req.prefix, workflows_prefix)
    found = [(name, data_orijs.read_executions(req.client, name, req.prefix,
                                               workflows_prefix, limit=5)) for name in names]
    return req.dashboard.render(req, "workflows.html", workflows=found, truncated=truncated,
                                workflows_prefix=workflows_prefix)


@route("GET", "/workflows/{workflow}")
def workflow(req: Request, workflow: str) -> Response:
    _, workflows_prefix = _prefixes(req)
    rows = data_orijs.read_executions(req.client, workflow, req.prefix, workflows_prefix,
                                      limit=50)
    return req.dashboard.render(req, "workflow.html", workflow=workflow, executions=rows,
                                queue=f"{workflows_prefix}.{workflow}")


@route("GET", "/workflows/{workflow}/{flow_id}")
def execution(req: Request, workflow: str, flow_id: str) -> Response:
    _, workflows_prefix = _prefixes(req)
    found = data_orijs.read_execution(req.client, workflow, flow_id, req.prefix,
                                      workflows_prefix)
    if found is None:
        raise HTTPError(404, f"No execution {flow_id!r} of workflow {workflow!r}.")
    return req.dashboard.render(req, "execution.html", ex=found)
