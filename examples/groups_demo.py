"""Per-group FIFO queue demo: orders of several customers, each customer's orders
strictly in order, customers in parallel; one order fails once and is retried in
its place. A Redis via REDIS_URL, else a throwaway redis-server.

    python examples/groups_demo.py
"""
from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any, Dict, List

from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.testing import local_redis

CUSTOMERS = 5
ORDERS = 6


def main() -> None:
    with local_redis() as url:
        print(f"Redis at {url}")
        queue = GroupQueue("orijs-demo-orders", connection=url, max_attempts=3)
        for step in range(ORDERS):
            for customer in range(CUSTOMERS):
                queue.add(group_id=f"customer:{customer}", data={"step": step})
        print(f"added {CUSTOMERS * ORDERS} jobs in {len(queue.get_unique_groups())} groups: "
              f"{queue.get_job_counts()}")

        seen: Dict[str, List[int]] = defaultdict(list)
        lock = threading.Lock()
        flaky = {"customer:2"}            # its step 3 fails on the first attempt

        def handle(job: GroupJob) -> Any:
            time.sleep(random.uniform(0.005, 0.02))        # pretend to charge a card
            if job.group_id in flaky and job.data["step"] == 3 and job.attempts_made == 0:
                raise RuntimeError("payment gateway timeout")
            with lock:
                seen[job.group_id].append(job.data["step"])
            return {"charged": job.data["step"]}

        started = time.monotonic()
        with GroupWorker(queue, handle, concurrency=4, backoff=0.2) as worker:
            worker.on("failed", lambda job, exc: print(
                f"  {job.id[:8]} ({job.group_id}, step {job.data['step']}) failed: {exc}; "
                f"{'retrying in its place' if job.status != 'failed' else 'gave up'}"))
            queue.wait_for_empty(timeout=30)
        print(f"done in {time.monotonic() - started:.2f} s")
        for group, steps in sorted(seen.items()):
            print(f"  {group}: steps {steps}")
        assert all(steps == list(range(ORDERS)) for steps in seen.values())
        print("every customer's orders ran in order, one at a time")
        queue.close()


if __name__ == "__main__":
    main()
