"""Worker connections named as BullMQ names them, and the list of a queue's workers.

BullMQ gives a worker's blocking connection the name ``{prefix}:{base64(queue)}``
(``CLIENT SETNAME``), followed by ``:w:{name}`` when the worker has a name; its
``Queue.getWorkers()`` (and bull-board's workers panel) lists the connections
whose name matches. A Python worker names its blocking connection the same way,
so each side lists the other's workers. A server that refuses ``CLIENT SETNAME``
(an ACL user without it, a managed Redis without ``CLIENT``) leaves the
connection unnamed: the worker runs on, it is only not listed.
"""
from __future__ import annotations

import base64
import logging
from typing import Any, Callable, Dict, List, Optional

import redis

from .. import errors

log = logging.getLogger(__name__)

ConnectFunc = Callable[[Any], None]


def queue_client_name(prefix: str, queue: str) -> str:
    """BullMQ's client name of a queue: ``{prefix}:{base64 of the queue name}``."""
    return f"{prefix}:{base64.b64encode(queue.encode('utf-8')).decode('ascii')}"


def worker_client_name(prefix: str, queue: str, worker_name: Optional[str]) -> str:
    """The name of a worker's connection: the queue's, plus ``:w:{name}`` if named."""
    base = queue_client_name(prefix, queue)
    return f"{base}:w:{worker_name}" if worker_name else base


def naming_connect_func(name: str, inner: Optional[ConnectFunc] = None) -> ConnectFunc:
    """A redis-py ``redis_connect_func``: the usual handshake (or ``inner``), then
    ``CLIENT SETNAME name`` on every new connection (reconnects and forks included),
    tolerating a server that refuses it."""
    def connect(conn: Any) -> None:
        if inner is not None:
            inner(conn)
        else:
            conn.on_connect()
        try:
            conn.send_command("CLIENT", "SETNAME", name)
            conn.read_response()
        except redis.exceptions.ResponseError as exc:
            log.info("Redis refused CLIENT SETNAME %s (%s): this worker is not listed by "
                     "getWorkers()", name, exc)
    return connect


def parse_client_list(text: str) -> List[Dict[str, str]]:
    """``CLIENT LIST`` output -> one dict of its ``key=value`` fields per client."""
    clients = []
    for line in text.splitlines():
        fields: Dict[str, str] = {}
        for item in line.split(" "):
            key, sep, value = item.partition("=")
            if sep:
                fields[key] = value
        if fields:
            clients.append(fields)
    return clients


def list_workers(client: Any, prefix: str, queue: str) -> List[Dict[str, str]]:
    """The connections of the queue's workers (either language), as ``CLIENT LIST``
    describes them, with ``name`` the queue name and ``rawname`` the connection name,
    as BullMQ's ``getWorkers()`` returns them."""
    base = queue_client_name(prefix, queue)
    try:
        raw = client.execute_command("CLIENT", "LIST")
    except (redis.exceptions.ResponseError, errors.PermissionDenied) as exc:
        log.warning("Redis refused CLIENT LIST (%s): the workers of %s cannot be listed",
                    exc, queue)
        return []
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    workers = []
    for fields in parse_client_list(text):
        name = fields.get("name", "")
        if name == base or name.startswith(base + ":w:"):
            workers.append(dict(fields, name=queue, rawname=name))
    return workers
