"""The jobs of one state (a page at a time; search by id or by name) and a job's page
(data, options, result, failure, logs, progress, attempts, dates, parent and children).

A page of jobs costs a fixed number of round trips whatever the size of the state: one
pipeline reading the page's ids and the state's length, one pipeline of ``HMGET``s of
the listed fields. Search by name reads the newest ``NAME_SEARCH_WINDOW`` jobs only."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..base.util import loads
from ..keys import QueueKeys
from ..queue import Queue
from . import data
from .web import HTTPError, Request, Response, route

NAME_SEARCH_WINDOW = 1000
LOG_LINES = 200
CHILDREN_SHOWN = 100
ASCENDING = ("wait", "paused", "prioritized", "delayed")   # next to run first
LIST_FIELDS = ("name", "timestamp", "processedOn", "finishedOn", "atm", "failedReason",
               "progress", "delay", "priority")


@route("GET", "/queues/{queue}/jobs/{job_id}")
def job_page(req: Request, queue: str, job_id: str) -> Response:
    q = Queue(queue, connection=req.dashboard.connection, prefix=req.prefix)
    job = q.get_job(job_id)
    if job is None:
        raise HTTPError(404, f"No job {job_id!r} in queue {queue!r}.")
    state = q.get_job_state(job_id)
    logs = q.get_job_logs(job_id, 0, LOG_LINES - 1, asc=False)
    children = _children(job, req.prefix)
    parent = _parent(job.parent, job.parent_key, req.prefix)
    return req.dashboard.render(req, "job.html", queue=queue, job=job, state=state,
                                logs=logs, log_limit=LOG_LINES, children=children,
                                parent=parent, children_shown=CHILDREN_SHOWN)


@route("GET", "/queues/{queue}/{state}")
def jobs_page(req: Request, queue: str, state: str) -> Response:
    if state not in data.STATES:
        raise HTTPError(404, f"No state {state!r}: one of {', '.join(data.STATES)}.")
    wanted_id = req.query.get("id", "").strip()
    if wanted_id:
        return _find_by_id(req, queue, state, wanted_id)
    name = req.query.get("name", "")
    size = req.dashboard.page_size
    keys = QueueKeys(req.prefix, queue)
    if name:
        ids, total = _search_by_name(req.client, keys, state, name)
        pages = max(1, -(-total // size))
        page = req.int_param("page", 1, minimum=1, maximum=pages)
        ids = ids[(page - 1) * size: page * size]
    else:
        total = _state_length(req.client, keys, state)
        pages = max(1, -(-total // size))
        page = req.int_param("page", 1, minimum=1, maximum=pages)
        ids, total = _page_of_ids(req.client, keys, state, (page - 1) * size, page * size - 1)
        pages = max(1, -(-total // size))
    rows = _rows(req.client, keys, ids)
    return req.dashboard.render(req, "jobs.html", queue=queue, state=state, rows=rows,
                                page=page, pages=pages, total=total, name=name,
                                window=NAME_SEARCH_WINDOW, states=data.STATES)


def _find_by_id(req: Request, queue: str, state: str, job_id: str) -> Response:
    if req.client.exists(QueueKeys(req.prefix, queue).job(job_id)):
        return Response.redirect(req.url("queues", queue, "jobs", job_id))
    req.flash(f"No job {job_id!r} in queue {queue!r}.", "error")
    return Response.redirect(req.url("queues", queue, state))


def _state_length(client: Any, keys: QueueKeys, state: str) -> int:
    key = keys.key(state)
    return int(client.llen(key) if state in data.LIST_STATES else client.zcard(key))


def _page_of_ids(client: Any, keys: QueueKeys, state: str, start: int,
                 end: int) -> Tuple[List[str], int]:
    """The ids ranked ``start``..``end`` in a state, and the state's length (one MULTI,
    so both agree)."""
    key = keys.key(state)
    pipe = client.pipeline(transaction=True)
    if state in data.LIST_STATES:
        if state in ASCENDING:          # pushed on the left: the next to run is rightmost
            pipe.lrange(key, -(end + 1), -(start + 1))
        else:
            pipe.lrange(key, start, end)
        pipe.llen(key)
    else:
        (pipe.zrange if state in ASCENDING else pipe.zrevrange)(key, start, end)
        pipe.zcard(key)
    ids, total = pipe.execute()
    if state in data.LIST_STATES and state in ASCENDING:
        ids = list(reversed(ids))
    return list(ids), int(total)


def _search_by_name(client: Any, keys: QueueKeys, state: str,
                    name: str) -> Tuple[List[str], int]:
    """Ids among the newest ``NAME_SEARCH_WINDOW`` of a state whose name holds ``name``
    (case-insensitive)."""
    ids, _ = _page_of_ids(client, keys, state, 0, NAME_SEARCH_WINDOW - 1)
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(keys.job(job_id), "name")
    needle = name.casefold()
    found = [job_id for job_id, job_name in zip(ids, pipe.execute() if ids else [])
             if job_name is not None and needle in job_name.casefold()]
    return found, len(found)


def _rows(client: Any, keys: QueueKeys, ids: Sequence[str]) -> List[Dict[str, Any]]:
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), *LIST_FIELDS)
    rows = []
    for job_id, values in zip(ids, pipe.execute() if ids else []):
        row: Dict[str, Any] = dict(zip(LIST_FIELDS, values))
        row["id"] = job_id
        row["missing"] = all(value is None for value in values)
        row["progress"] = loads(row["progress"], "") if row["progress"] else ""
        reason = row["failedReason"] or ""
        row["failedReason"] = reason if len(reason) <= 200 else reason[:200] + "…"
        rows.append(row)
    return rows


def split_job_key(key: str, prefix: str) -> Optional[Tuple[str, str]]:
    """``{prefix}:{queue}:{id}`` -> (queue, id); None for a key under another prefix."""
    head = prefix + ":"
    if not key.startswith(head):
        return None
    queue, sep, job_id = key[len(head):].partition(":")
    return (queue, job_id) if sep and queue and job_id else None


def _parent(parent: Any, parent_key: Optional[str], prefix: str) -> Optional[Dict[str, Any]]:
    if not parent_key and not isinstance(parent, dict):
        return None
    key = parent_key or f"{parent.get('queueKey', '')}:{parent.get('id', '')}"
    return {"key": key, "link": split_job_key(key, prefix)}


def _children(job: Any, prefix: str) -> Dict[str, List[Dict[str, Any]]]:
    """The job's children by outcome (at most ``CHILDREN_SHOWN`` of each), with links."""
    deps = job.get_dependencies(count=CHILDREN_SHOWN)
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for kind, entries in (("processed", deps["processed"]), ("unprocessed", deps["unprocessed"]),
                          ("ignored", deps["ignored"]), ("failed", deps["failed"])):
        items = entries.items() if isinstance(entries, dict) else ((key, None) for key in entries)
        groups[kind] = [{"key": key, "value": value, "link": split_job_key(key, prefix)}
                        for key, value in items]
    return groups
