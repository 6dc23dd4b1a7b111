"""Crashes: a worker process killed with -9 mid-job loses no job, and no job runs
twice at once; a lost lock never overwrites another worker's claim."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from orijs_sync import Worker
from orijs_sync.engine.processing import Outcome
from orijs_sync.testing import wait_until

CRASHY = """
import sys, time
from orijs_sync import Worker
from orijs_sync.engine.processing import Outcome
def handler(job):
    open(sys.argv[2], "a").write(f"start {{job.id}}\\n")
    time.sleep(60)
Worker({qname!r}, handler, connection={url!r}, lock_duration=1.0, stalled_interval=0.5).run()
"""


def start_crashy(tmp_path, qname, redis_url, log):
    script = tmp_path / "crashy.py"
    script.write_text(CRASHY.format(qname=qname, url=redis_url))
    return subprocess.Popen([sys.executable, str(script), "x", str(log)])


def test_kill_9_mid_job_then_another_worker_finishes_it(queue, redis_url, qname, tmp_path, r):
    log = tmp_path / "log.txt"
    jobs = queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(3)])
    proc = start_crashy(tmp_path, qname, redis_url, log)
    try:
        wait_until(lambda: log.exists() and log.read_text().count("start") >= 1, 20)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    crashed = log.read_text().split()[1]
    assert queue.get_job_state(crashed) == "active"
    finished = []
    with Worker(qname, lambda j: finished.append(j.id) or "rescued", connection=redis_url,
                stalled_interval=0.5, lock_duration=1.0):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 3, 30)
    assert sorted(finished) == sorted(j.id for j in jobs)       # each ran exactly once here
    assert queue.get_job(crashed).returnvalue == "rescued"
    assert queue.get_job(crashed).stalled_counter == 1
    stalled = [f["jobId"] for _, f in r.xrange(queue.keys.events) if f["event"] == "stalled"]
    assert stalled == [crashed]


def test_stalled_past_the_limit_fails_the_job(queue, redis_url, qname, r):
    job = queue.add("x", {}, attempts=5)
    # Simulate crashes: take the job active with a lock that expires, twice.
    k = queue.keys
    for _ in range(2):
        taker = Worker(qname, lambda j: None, connection=redis_url, lock_duration=0.2)
        jobs, _, _ = taker._move_to_active(1)
        assert [j.id for j in jobs] == [job.id]
        time.sleep(0.3)  # lock expires: the process "died"
        checker = Worker(qname, lambda j: None, connection=redis_url, stalled_interval=0.01,
                         max_stalled_count=1)
        checker._check_stalled()     # marks candidates
        r.delete(k.stalled_check)
        checker._check_stalled()     # moves them back
        r.delete(k.stalled_check)
    assert r.hget(k.job(job.id), "defa") == "job stalled more than allowable limit"
    with Worker(qname, lambda j: "never", connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "failed")
    final = queue.get_job(job.id)
    assert final.failed_reason == "job stalled more than allowable limit"
    assert final.stalled_counter == 2


def test_lost_lock_does_not_overwrite_the_new_owner(queue, redis_url, qname, r):
    job = queue.add("x", {})
    slow = Worker(qname, lambda j: None, connection=redis_url, lock_duration=5)
    taken, _, _ = slow._move_to_active(1)
    stolen = taken[0]
    r.set(queue.keys.lock(job.id), "another-worker:token", px=5000)   # another owner now
    errors_seen = []
    slow.on("error", errors_seen.append)
    outcome = Outcome(stolen, "completed", '"late result"', result="late result")
    assert slow._runner.finish([outcome], fetch=0) == []
    assert queue.get_job_state(job.id) == "active"
    assert queue.get_job(job.id).returnvalue is None
    assert r.get(queue.keys.lock(job.id)) == "another-worker:token"
    assert "held by another worker" in str(errors_seen[0])
