"""The plain queue (Queue + two Workers of concurrency 4) through a seeded schedule of
network faults (latency, holds, cuts, refusals): every acknowledged add completes, no job
runs twice at once, nothing is stuck once the network heals (close(timeout) while Redis
is held: test_fault_close.py)."""
from __future__ import annotations

import contextlib
import time

import redis
from fault_helpers import (
    RECOVERY,
    Raised,
    Runs,
    ScheduleRun,
    add_while_faulting,
    make_schedule,
    start_workers,
)

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until

SEED = 33_001
MAX_JOBS = 400


def test_plain_queue_through_network_faults(proxy, proxied_url, redis_url, namespace):
    qname = f"fq-{namespace}"
    runs, raised = Runs(), Raised()

    def handler(job):
        runs.start(job.id)
        try:
            time.sleep(0.005 * (job.data["n"] % 5))
            return job.data["n"]
        finally:
            runs.end(job.id)

    r = redis.Redis.from_url(redis_url, decode_responses=True)
    check = Queue(qname, connection=redis_url)          # reads Redis directly
    keys = check.keys
    options = dict(connection=proxied_url, concurrency=4, lock_duration=5, stalled_interval=2,
                   max_stalled_count=50, drain_delay=1, max_reconnect_delay=0.5)
    schedule = ScheduleRun(proxy, make_schedule(SEED))
    with contextlib.ExitStack() as stack:
        stack.callback(r.close)
        stack.callback(check.close)
        queue = Queue(qname, connection=proxied_url)
        stack.callback(queue.close)
        workers = [Worker(qname, handler, **options) for _ in range(2)]
        start_workers(stack, workers)
        stack.callback(schedule.stop)
        schedule.start()
        acked, n = add_while_faulting(schedule, lambda n: queue.add("x", {"n": n}).id,
                                      raised, MAX_JOBS)
        timeline = schedule.describe()

        def completed() -> set:
            return set(r.zrange(keys.completed, 0, -1))

        # Nothing acknowledged is lost, nothing is stuck: with the network healthy again,
        # every acknowledged job completes, and nothing is left waiting, active or delayed.
        try:
            wait_until(lambda: set(acked) <= completed(), RECOVERY,
                       "every acknowledged job to complete")
        except AssertionError:
            missing = sorted(set(acked) - completed(), key=int)
            states = {j: check.get_job_state(j) for j in missing[:10]}
            raise AssertionError(f"{len(missing)} of {len(acked)} acknowledged jobs not "
                                 f"completed {RECOVERY}s after the faults ended: {states}; "
                                 f"faults: {timeline}") from None
        wait_until(lambda: r.llen(keys.wait) + r.llen(keys.active) + r.zcard(keys.delayed)
                   + r.zcard(keys.prioritized) == 0, RECOVERY, "no job left waiting or active")
        assert r.zcard(keys.failed) == 0, [
            (j.id, j.failed_reason) for j in check.get_failed(0, 10)]
        values = r.pipeline()
        for job_id in acked:
            values.hget(keys.job(job_id), "returnvalue")
        assert [int(v) for v in values.execute()] == list(acked.values())
        assert runs.overlaps == [], f"{runs.overlaps[:10]}; faults: {timeline}"

    assert len(acked) >= 100, f"too few jobs acknowledged: {len(acked)} of {n}"
    assert raised.foreign() == [], raised.foreign()[:10]
