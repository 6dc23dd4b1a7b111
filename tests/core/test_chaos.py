"""Many processes, one kill -9 mid-run: every job completes, no job runs twice at once,
and only jobs that were running in the killed process ever run twice."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

from orijs_sync.testing import stop_processes, wait_until

WORKER = """
import os, sys, time, redis
from orijs_sync import Worker
url, queue, log = sys.argv[1], sys.argv[2], sys.argv[3]
r = redis.Redis.from_url(url)
def handler(job):
    r.rpush(log, f"start {job.id} {os.getpid()} {time.time()}")
    time.sleep(0.02)
    r.rpush(log, f"end {job.id} {os.getpid()} {time.time()}")
    return job.data["n"]
Worker(queue, handler, connection=url, concurrency=4, lock_duration=1.0,
       stalled_interval=0.5).run()
"""


def victim_is_mid_job(r, log: str, pid: int) -> bool:
    """The victim's last logged event is a start: a handler of it is running now."""
    mine = [e for e in r.lrange(log, -40, -1) if e.split()[2] == str(pid)]
    return bool(mine) and mine[-1].startswith("start")


def test_kill_9_one_of_three_worker_processes(queue, redis_url, qname, r, tmp_path):
    n = 400
    log = f"{qname}:log"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    queue.add_bulk([{"name": "x", "data": {"n": i}} for i in range(n)])

    def spawn():
        return subprocess.Popen([sys.executable, str(script), redis_url, qname, log])

    procs = [spawn() for _ in range(3)]
    try:
        wait_until(lambda: queue.get_job_counts("completed")["completed"] >= n // 4, 60)
        victim = procs[0]
        wait_until(lambda: victim_is_mid_job(r, log, victim.pid), 30, "the victim to be mid-job")
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        victim.wait(10)
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == n, 90,
                   "every job to complete after the kill")
    finally:
        stop_processes(procs)

    runs = defaultdict(list)                       # job id -> [(pid, start, end or None)]
    open_runs = {}
    for entry in r.lrange(log, 0, -1):
        kind, job_id, pid, stamp = entry.split()
        if kind == "start":
            open_runs[(job_id, pid)] = float(stamp)
        else:
            runs[job_id].append((pid, open_runs.pop((job_id, pid)), float(stamp)))
    for (job_id, pid), start in open_runs.items():  # cut short by the kill
        assert int(pid) == victim.pid, f"job {job_id} never ended in live process {pid}"
        runs[job_id].append((pid, start, killed_at))

    assert len(runs) == n
    assert any(len(attempts) > 1 for attempts in runs.values()), "the kill cut no job short"
    for job_id, attempts in runs.items():
        attempts.sort(key=lambda a: a[1])
        for (pid_a, _, end_a), (pid_b, start_b, _) in zip(attempts, attempts[1:]):
            assert start_b >= end_a, f"job {job_id} ran in {pid_a} and {pid_b} at once"
        if len(attempts) > 1:
            # Only a job caught in the killed process runs again: cut short, or finished
            # there but not yet written (at-least-once), never after the kill.
            assert attempts[0][0] == str(victim.pid)
            assert attempts[0][2] <= killed_at
    for job in queue.get_completed(0, -1):
        assert job.returnvalue == job.data["n"]
