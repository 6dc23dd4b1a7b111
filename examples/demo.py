"""End-to-end demo: a Redis (yours via REDIS_URL, else a throwaway redis-server),
a producer adding jobs, a threaded worker processing them, and the results.

    python examples/demo.py
"""
from __future__ import annotations

import random
import time

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import local_redis

QUEUE = "orijs-demo-emails"


def send_email(job):
    time.sleep(random.uniform(0.01, 0.05))          # pretend to talk to an SMTP server
    if job.data["to"].endswith("@invalid"):
        raise ValueError(f"no such domain for {job.data['to']}")
    job.update_progress(100)
    return {"sent": job.data["to"], "by": job.queue.name}


def main() -> None:
    with local_redis() as url:
        print(f"Redis at {url}")
        with Queue(QUEUE, connection=url) as queue, \
                QueueEvents(QUEUE, connection=url) as events:
            jobs = queue.add_bulk([{"name": "welcome", "data": {"to": f"user{i}@example.com"}}
                                   for i in range(20)])
            bad = queue.add("welcome", {"to": "ghost@invalid"}, attempts=2, backoff=0.1)
            print(f"added {len(jobs) + 1} jobs: {queue.get_job_counts()}")
            started = time.monotonic()
            with Worker(QUEUE, send_email, connection=url, concurrency=8):
                results = [job.wait_until_finished(events, timeout=10) for job in jobs]
                try:
                    bad.wait_until_finished(events, timeout=10)
                except errors.JobFailed as exc:
                    print(f"job {bad.id} failed after {queue.get_job(bad.id).attempts_made} "
                          f"attempts: {exc.failed_reason}")
            print(f"processed in {time.monotonic() - started:.2f}s; first results:")
            for result in results[:3]:
                print("  ", result)
            print(f"final counts: {queue.get_job_counts()}")
            queue.obliterate(force=True)       # leave the Redis as we found it


if __name__ == "__main__":
    main()
