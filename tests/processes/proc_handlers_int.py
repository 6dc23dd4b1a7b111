"""Handlers the process-mode tests of group workers, the event provider and the CLI run
in child processes, imported there by name (``"proc_handlers_int:pid"``): pytest puts
this folder on the test run's sys.path (the tests folder has no ``__init__.py``), and
the children get the parent's sys.path. Each returns its process id, so a test sees
where it ran."""
from __future__ import annotations

import os
import time
from typing import Any, Dict

import redis

from orijs_sync.events.context import current_context
from orijs_sync.events.message import EventMessage
from orijs_sync.groups.job import GroupJob
from orijs_sync.groups.testing import record


def pid(job: Any) -> int:
    """Its pid, after ``job.data["sleep"]`` seconds (so two jobs overlap)."""
    time.sleep(float((job.data or {}).get("sleep", 0)))
    return os.getpid()


def by_request(job: Any) -> int:
    """Raises, exits or sleeps as the job's data asks; returns its pid."""
    data = job.data or {}
    if "raise" in data:
        raise ValueError(f"bad input: {data['raise']}")
    if data.get("exit"):
        os._exit(3)
    return pid(job)


def hanging(job: Any) -> None:
    while True:
        time.sleep(0.05)


def _redis(data: Dict[str, Any]) -> "redis.Redis[str]":
    return redis.Redis.from_url(data["url"], decode_responses=True)


def group_ordered(job: GroupJob) -> int:
    """Each run's start and end in one Redis list (``groups.testing.record``)."""
    client, who = _redis(job.data), str(os.getpid())
    try:
        record(client, job.data["log"], "start", job.id, job.group_id, job.data["n"], who)
        time.sleep(float(job.data.get("sleep", 0.01)))
        record(client, job.data["log"], "end", job.id, job.group_id, job.data["n"], who)
    finally:
        client.close()
    return os.getpid()


def slow_first_run(job: GroupJob) -> int:
    """The first run of any job with this log says so in Redis and sleeps a minute;
    every other run returns at once the number of this job's runs."""
    client, log = _redis(job.data), job.data["log"]
    try:
        run = client.incr(f"{log}:runs:{job.id}")
        if client.incr(f"{log}:runs") == 1:
            client.rpush(log, f"started {job.id} {os.getpid()}")
            time.sleep(60)
        return int(run)
    finally:
        client.close()


# -- event subscribers (a handler gets the EventMessage) -------------------------------

def event_pid(message: EventMessage) -> Dict[str, Any]:
    """Its pid, the payload, and what the propagation context says in the child."""
    ctx = current_context()
    time.sleep(float(message.payload.get("sleep", 0)))
    return {"pid": os.getpid(), "payload": message.payload,
            "caused_by": None if ctx is None else ctx.event_id,
            "meta": None if ctx is None else ctx.meta}


def event_raising(message: EventMessage) -> None:
    raise ValueError(f"bad event: {message.payload['x']}")


def event_exit_on_request(message: EventMessage) -> int:
    if message.payload.get("exit"):
        os._exit(3)
    return os.getpid()
