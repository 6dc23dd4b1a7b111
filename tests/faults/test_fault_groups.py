"""Group queues (GroupQueue + two GroupWorkers of concurrency 4 over 8 groups) through a
seeded schedule of network faults: every acknowledged add completes, no job and no group
runs two at once, each group's jobs first start in the order they were added, nothing is
stuck once the network heals (close(timeout) while Redis is held: test_fault_close.py)."""
from __future__ import annotations

import contextlib
import time
from typing import List

from fault_helpers import (
    RECOVERY,
    Raised,
    Runs,
    ScheduleRun,
    add_while_faulting,
    make_schedule,
    start_workers,
)

from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.testing import wait_until

SEED = 33_004
MAX_JOBS = 400
GROUPS = 8
KEEP = 100_000          # completed jobs are kept, so the test can see them


def test_group_queues_through_network_faults(proxy, proxied_url, redis_url, namespace):
    gname = f"fg-{namespace}"
    runs, raised = Runs(), Raised()

    def handler(job):
        runs.start(job.id, job.group_id)
        try:
            time.sleep(0.005 * (job.data["n"] % 5))
            return job.data["n"]
        finally:
            runs.end(job.id, job.group_id)

    check = GroupQueue(gname, connection=redis_url, keep_completed=KEEP)   # reads directly
    client = check.client
    options = dict(job_timeout=6, keep_completed=KEEP, max_attempts=3)
    schedule = ScheduleRun(proxy, make_schedule(SEED))
    with contextlib.ExitStack() as stack:
        stack.callback(check.close)
        queue = GroupQueue(gname, connection=proxied_url, **options)
        stack.callback(queue.close)
        workers = [GroupWorker(queue, handler, concurrency=4, stalled_interval=2,
                               max_stalled_count=50, block_timeout=2) for _ in range(2)]
        start_workers(stack, workers)
        stack.callback(schedule.stop)
        schedule.start()
        acked, n = add_while_faulting(
            schedule, lambda n: queue.add(group_id=f"g{n % GROUPS}", data={"n": n}).id,
            raised, MAX_JOBS)
        group_of = {job_id: f"g{n % GROUPS}" for job_id, n in acked.items()}
        timeline = schedule.describe()

        def completed() -> set:
            return set(client.zrange(check.key("completed"), 0, -1))

        try:
            wait_until(lambda: set(acked) <= completed(), RECOVERY,
                       "every acknowledged group job to complete")
        except AssertionError:
            missing = [j for j in acked if j not in completed()]
            jobs = [check.get_job(j) for j in missing[:8]]
            seen = [(j, job and job.group_id, job and job.get_state(),
                     f"handler ran {runs.started.get(j, 0)}x, running now: "
                     f"{runs.running.get(j, 0)}") for j, job in zip(missing, jobs)]
            raise AssertionError(
                f"{len(missing)} of {len(acked)} acknowledged group jobs not completed "
                f"{RECOVERY}s after the faults ended (groups stuck: "
                f"{sorted({group_of[j] for j in missing})}); first: {seen}; counts now: "
                f"{check.get_job_counts()}; faults: {timeline}") from None
        wait_until(lambda: not {k: v for k, v in check.get_job_counts().items()
                                if k in ("active", "waiting", "delayed", "staged") and v},
                   RECOVERY, "no group job left waiting, delayed or active")
        assert check.get_failed_count() == 0, [(j.id, j.failed_reason)
                                               for j in check.get_failed_jobs(10)]
        assert runs.overlaps == [], f"{runs.overlaps[:10]}; faults: {timeline}"
        # FIFO per group: the acknowledged jobs of a group first started in add order.
        for group in {g for g in group_of.values()}:
            mine: List[str] = [j for j in acked if group_of[j] == group]
            started = sorted(mine, key=lambda j: runs.first_start[j])
            assert started == mine, f"group {group} ran out of order: {started[:20]}"

    assert len(acked) >= 100, f"too few jobs acknowledged: {len(acked)} of {n}"
    assert raised.foreign() == [], raised.foreign()[:10]
