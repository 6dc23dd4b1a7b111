"""Handlers the process-mode tests run in child processes, imported there by name
(``"proc_handlers:cpu"``: this folder is on the test run's sys.path, which children
inherit). Each reports through Redis or its return value what it saw."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List

import redis

from orijs_sync import errors
from orijs_sync.job import Job


def _redis(job: Job) -> "redis.Redis[str]":
    return redis.Redis.from_url(job.data["url"], decode_responses=True)


def _started(job: Job) -> None:
    """Tell the test this job runs, in which process (a list per job id)."""
    if "url" in job.data:
        _redis(job).rpush(f"started:{job.data['tag']}", f"{job.id}:{os.getpid()}")


def pid(job: Job) -> int:
    _started(job)
    return os.getpid()


def spin(seconds: float) -> int:
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def cpu(job: Job) -> Dict[str, Any]:
    """Pure-Python CPU work for ``job.data['seconds']``; counts its runs in Redis."""
    _started(job)
    if "url" in job.data:
        _redis(job).incr(f"runs:{job.data['tag']}:{job.id}")
    spin(float(job.data.get("seconds", 0.05)))
    return {"pid": os.getpid()}




def raising(job: Job) -> None:
    raise ValueError(f"bad input: {job.data['x']}")


class Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"needs two arguments: {a}, {b}")

    def __reduce__(self) -> Any:
        raise TypeError("not today")


def raising_unpicklable(job: Job) -> None:
    raise Unpicklable(1, 2)


def unrecoverable(job: Job) -> None:
    raise errors.UnrecoverableError("give up now")


def delaying(job: Job) -> None:
    job.move_to_delayed(time.time() + 60)
    raise errors.DelayedError()


def rate_limited_once(job: Job) -> str:
    if _redis(job).incr(f"rl:{job.data['tag']}") == 1:
        raise errors.RateLimitError()
    return "second run"


def exiting(job: Job) -> None:
    _started(job)
    os._exit(3)


def hanging(job: Job) -> None:
    _started(job)
    while True:
        pass


def sleeping(job: Job) -> str:
    _started(job)
    time.sleep(float(job.data.get("seconds", 30)))
    return "slept"


def not_json(job: Job) -> Any:
    return {1, 2}


def sockets(job: Job) -> List[str]:
    """The socket inodes this process holds (a forked child would hold its parent's)."""
    return socket_inodes()


def socket_inodes() -> List[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.append(target)
    return found


def parent_of_two(job: Job) -> Any:
    """First run: add two children and wait for them; second run: sum their values."""
    values = job.get_children_values()
    if values:
        return sum(values.values())
    from orijs_sync import FlowProducer
    with FlowProducer(connection=job.data["url"]) as flows:
        flows.add_bulk([{"name": "step", "queue_name": job.data["children"], "data": {"n": n},
                         "opts": {"parent": job}} for n in (1, 2)])
    assert job.move_to_waiting_children() is True
    return None


def times_ten(job: Job) -> int:
    return int(job.data["n"]) * 10
