"""GroupWorker through faults, on real Redis: a run of a job recovered and taken again
by the same worker (each run's own token), outcome writes through a Redis outage,
and writes given up. Waits are generous guards; nothing asserts on timing."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Iterable, Iterator, List

import pytest

from orijs_sync.base.util import now_ms
from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.testing import RedisServer, wait_until

OUTAGE = 2.5      # seconds Redis refuses connections in the outage tests


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own (it is halted and restarted), its data kept
    across the restart (AOF), as a production Redis's would be."""
    with RedisServer(appendonly=True) as server:
        yield server


class Runs:
    """A handler whose runs each wait for their own release; records every run. The
    runs numbered in ``failing`` raise."""

    def __init__(self, failing: Iterable[int] = ()) -> None:
        self.lock = threading.Lock()
        self.started: List[str] = []             # job ids, one per run, in order
        self.returned = 0
        self.failing = set(failing)
        self.release: Dict[int, threading.Event] = {}

    def __call__(self, job: GroupJob) -> Any:
        with self.lock:
            self.started.append(job.id)
            run = len(self.started)
            gate = self.release.setdefault(run, threading.Event())
        gate.wait(30)
        with self.lock:
            self.returned += 1
        if run in self.failing:
            raise RuntimeError(f"run {run} fails")
        return {"run": run}

    def done(self) -> int:
        with self.lock:
            return self.returned

    def let_go(self, run: int) -> None:
        with self.lock:
            self.release.setdefault(run, threading.Event()).set()

    def runs(self) -> List[str]:
        with self.lock:
            return list(self.started)



def finish_j_during_an_outage(own_redis, handler, ended: str) -> None:
    """J runs; Redis stops; J's handler ends (``ended``) and its write fails for OUTAGE
    seconds; Redis comes back and K is let go."""
    wait_until(lambda: handler.runs() == ["J"], 30, "J running")
    own_redis.halt()
    handler.let_go(1)
    wait_until(lambda: handler.done() == 1, 30, ended)
    time.sleep(OUTAGE)                 # the outage goes on: the write fails meanwhile
    own_redis.restart()
    handler.let_go(2)

def test_late_finish_of_an_earlier_run_on_the_same_worker_is_refused(gq, caplog):
    """Run 1 of J is recovered (as if its deadline had passed) and the same worker takes
    J again (run 2): run 1's late completion must be refused (each run has its own
    token), not complete J under run 2 and hand out the group's next job."""
    caplog.set_level(logging.WARNING, logger="orijs_sync.groups")
    gq.add(group_id="g", data={}, job_id="J")
    gq.add(group_id="g", data={}, job_id="K")
    handler = Runs()
    completed: List[str] = []
    with GroupWorker(gq, handler, concurrency=2, stalled_interval=60) as w:
        w.on("completed", lambda job, result: completed.append(job.id))
        wait_until(lambda: handler.runs() == ["J"], 30, "run 1 of J")
        far = now_ms() + 10 ** 9           # every deadline has passed by then
        assert gq.run_script("stalled", far, 0, 5, 100) == ["J", "g", "recovered"]
        wait_until(lambda: handler.runs() == ["J", "J"], 30, "run 2 of J")
        handler.let_go(1)                  # run 1 returns late
        wait_until(lambda: completed or "stopped being ours" in caplog.text, 30,
                   "run 1's completion written or refused")
        assert completed == [], "run 1's late completion was accepted"
        assert gq.get_job("J").status == "active" and gq.get_job("K").status == "waiting"
        assert handler.runs() == ["J", "J"]
        handler.let_go(2)
        handler.let_go(3)
        assert gq.wait_for_empty(30)
    assert completed == ["J", "K"] and handler.runs() == ["J", "J", "K"]


def test_a_completion_is_written_through_a_redis_outage(own_redis, gname):
    """The handler returns while Redis refuses connections: the completion is retried
    until Redis is back, then the group's next job runs (the worker neither drops the
    write nor keeps the job held and heartbeated forever)."""
    gq = GroupQueue(gname, connection=own_redis.url, job_timeout=10)
    gq.add(group_id="g", data={}, job_id="J")
    gq.add(group_id="g", data={}, job_id="K")
    handler = Runs()
    completed: List[str] = []
    with GroupWorker(gq, handler, stalled_interval=60) as w:
        w.on("completed", lambda job, result: completed.append(job.id))
        finish_j_during_an_outage(own_redis, handler, "J's handler returned")
        wait_until(lambda: completed == ["J", "K"], 30, "J, then K, completed")
    assert handler.runs() == ["J", "K"] and gq.is_empty()
    gq.close()


def test_a_completion_given_up_is_not_heartbeated_and_the_stalled_check_recovers_it(
        own_redis, gname):
    """Redis stays down longer than the retries last (the job timeout): the write is
    given up, the worker stops holding (heartbeating) the job, and once Redis is back
    the stalled check recovers it and it runs again."""
    gq = GroupQueue(gname, connection=own_redis.url, job_timeout=1)
    gq.add(group_id="g", data={}, job_id="J")
    handler = Runs()
    completed: List[str] = []
    stalled: List[str] = []
    with GroupWorker(gq, handler, stalled_interval=0.2) as w:
        w.on("completed", lambda job, result: completed.append(job.id))
        w.on("stalled", lambda job_id, group_id: stalled.append(job_id))
        wait_until(lambda: handler.runs() == ["J"], 30, "J running")
        own_redis.halt()
        handler.let_go(1)
        wait_until(lambda: handler.done() == 1, 30, "J's handler returned")
        wait_until(lambda: not w.is_processing(), 20, "the write given up, J let go")
        own_redis.restart()
        handler.let_go(2)
        wait_until(lambda: completed == ["J"], 30, "J recovered and run again")
    assert stalled == ["J"] and handler.runs() == ["J", "J"]
    gq.close()


def test_a_failure_is_written_through_a_redis_outage(own_redis, gname):
    """The handler raises while Redis refuses connections: the failed attempt is
    written once Redis is back (retried, not dropped), and the job's retry runs."""
    gq = GroupQueue(gname, connection=own_redis.url, job_timeout=10, max_attempts=2)
    gq.add(group_id="g", data={}, job_id="J")
    handler = Runs(failing=[1])
    seen: List[Any] = []
    with GroupWorker(gq, handler, backoff=0, stalled_interval=60) as w:
        w.on("failed", lambda job, exc: seen.append(("failed", job.id, job.attempts_made)))
        w.on("completed", lambda job, result: seen.append(("completed", job.id)))
        finish_j_during_an_outage(own_redis, handler, "J's handler raised")
        wait_until(lambda: len(seen) == 2, 30, "J's failed attempt, then its retry")
    assert seen == [("failed", "J", 1), ("completed", "J")]
    assert handler.runs() == ["J", "J"] and gq.is_empty()
    gq.close()
