"""Repeating group jobs, stored as GroupMQ 1.1 stores them (``repeat:schedule``,
``repeat:{key}``, ``repeat:lookup:{group}:{options}``); each period runs once
whatever the number of schedulers (repeat_run.lua compares and sets)."""
from __future__ import annotations

import json
import logging
import random
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Union

from ..base.util import dumps, now_ms
from ..job_scheduler import cron_next_millis
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

log = logging.getLogger(__name__)

Repeat = Dict[str, Union[int, str]]


def options_json(repeat: Repeat) -> str:
    """The options as Node's ``JSON.stringify`` writes them (part of GroupMQ's keys)."""
    return json.dumps(repeat, separators=(",", ":"), ensure_ascii=False)


def next_run(repeat: Repeat, now: int) -> int:
    if "every" in repeat:
        return now + int(repeat["every"])
    nxt = cron_next_millis(str(repeat["pattern"]), now)     # local time, as cron-parser
    return nxt if nxt is not None else now


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return out or "0"


def add(queue: "GroupQueue", gid: str, data: Any, data_text: str, order: int, attempts: int,
        repeat: Repeat) -> GroupJob:
    now = now_ms()
    rjson = options_json(repeat)
    repeat_key = f"{gid}:{rjson}:{now}:{_base36(random.getrandbits(48))}"
    nxt = next_run(repeat, now)
    definition = {"groupId": gid, "data": data, "maxAttempts": attempts, "orderMs": order,
                  "repeat": repeat, "nextRunTime": nxt, "lastRunTime": None, "removed": False}
    job_id = queue.run_script("repeat_add", repeat_key, dumps(definition, "repeat definition"),
                              nxt, f"{gid}:{rjson}", gid, data_text, attempts, now, order)
    return GroupJob(id=job_id, group_id=gid, data=data, max_attempts=attempts, order_ms=order,
                    timestamp=now, status="waiting")


def remove(queue: "GroupQueue", gid: str, repeat: Repeat) -> bool:
    return bool(queue.run_script("repeat_remove", f"{gid}:{options_json(repeat)}"))


def run_due(queue: "GroupQueue", now: int, limit: int = 64) -> int:
    """Add one run of every repeating job that is due; returns how many this call added."""
    client = queue.client
    ran = 0
    due: List[str] = client.zrangebyscore(queue.key("repeat", "schedule"), 0, now,
                                          start=0, num=limit)  # type: ignore[assignment]
    for repeat_key in due:
        text = client.get(queue.key("repeat", repeat_key))
        if text is None:
            client.zrem(queue.key("repeat", "schedule"), repeat_key)
            continue
        definition = json.loads(text)
        if definition.get("removed"):
            client.zrem(queue.key("repeat", "schedule"), repeat_key)
            continue
        nxt = next_run(definition["repeat"], now)
        updated = dict(definition, nextRunTime=nxt, lastRunTime=now)
        ran += int(queue.run_script(
            "repeat_run", repeat_key, text, dumps(updated, "repeat definition"), nxt, now,
            str(uuid.uuid4()), queue.keep_completed, definition["groupId"],
            dumps(definition.get("data"), "repeat data"),
            int(definition.get("maxAttempts") or queue.max_attempts),
            int(definition.get("orderMs") or now)))
    return ran
