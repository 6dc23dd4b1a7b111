"""Ordering method "in-memory" (GroupMQ's grace collection), for one GroupWorker.

When the worker picks up a group's job it waits ``ordering_window`` measured from
the pickup (not from the job's ``order_ms``), looking at the group's waiting count
every 10 ms. Each time more jobs have arrived the wait restarts, its length
multiplied by ``ordering_grace_period_decay`` (never below 20 ms); the whole
collection lasts at most ``ordering_max_wait_multiplier`` windows. Then the
group's earliest job runs (swapped in for the held one when it sorts before it)
and up to ``ordering_max_batch_size`` of the jobs collected follow it, each
chained by the finisher, without another wait; the next job after them starts a
new collection.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, Set

from ..base.util import now_ms
from .job import GroupJob

if TYPE_CHECKING:  # pragma: no cover
    from .queue import GroupQueue

log = logging.getLogger(__name__)

POLL = 0.010          # seconds between looks at the group's waiting count
MIN_GRACE = 0.020     # the shortest a decayed grace gets (seconds)


class GraceCollector:
    """The worker's collection state: how many more chained jobs of each group run
    without a wait, and which chained jobs those are. One lock guards both."""

    def __init__(self, queue: "GroupQueue", new_token: Callable[[], str],
                 stop: threading.Event) -> None:
        self.queue = queue
        self.new_token = new_token
        self.stop = stop
        self._lock = threading.Lock()
        self._batch_left: Dict[str, int] = {}
        self._no_wait: Set[str] = set()

    def chained(self, job: GroupJob) -> None:
        """The finisher took ``job`` as its group's next one: part of the batch?"""
        with self._lock:
            left = self._batch_left.get(job.group_id, 0)
            if left > 0:
                self._no_wait.add(job.id)
                if left == 1:
                    del self._batch_left[job.group_id]
                else:
                    self._batch_left[job.group_id] = left - 1

    def order(self, job: GroupJob) -> GroupJob:
        """The job to run now in place of the held ``job`` (maybe ``job`` itself)."""
        with self._lock:
            if job.id in self._no_wait:
                self._no_wait.discard(job.id)
                return job
            self._batch_left.pop(job.group_id, None)
        collected = self._collect(job.group_id)
        with self._lock:
            batch = min(collected, self.queue.ordering_max_batch_size)
            if batch:
                self._batch_left[job.group_id] = batch
        return self._earliest(job)

    def _collect(self, group_id: str) -> int:
        """Wait out the grace period; returns how many jobs wait in the group."""
        q = self.queue
        window = q.ordering_window_ms / 1000.0
        started = last_arrival = time.monotonic()
        grace, seen = window, 0
        key = q.key("g", group_id)
        while time.monotonic() - last_arrival < grace:
            if self.stop.wait(POLL):
                break
            count = int(q.client.zcard(key))
            if count > seen:
                seen, last_arrival = count, time.monotonic()
                grace = max(MIN_GRACE, grace * q.ordering_grace_period_decay)
            if time.monotonic() - started > window * q.ordering_max_wait_multiplier:
                log.warning("group %s: ordering grace exceeded %sx the window; proceeding",
                            group_id, q.ordering_max_wait_multiplier)
                break
        return int(q.client.zcard(key))

    def _earliest(self, job: GroupJob) -> GroupJob:
        """Swap in the group's head when it sorts before the held job."""
        token = self.new_token()
        reply = self.queue.run_script("reorder", job.id, job.group_id, job.token, now_ms(),
                                      self.queue.job_timeout_ms, token)
        return GroupJob.from_reply(reply, self.queue, token) if reply else job
