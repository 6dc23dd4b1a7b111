"""Group workers in several processes on one queue: every start and end goes to one
Redis list, which proves no group ever ran two jobs at once and every group kept its
order; then a kill -9 of one worker process mid-job."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from typing import List

from orijs_sync.groups import GroupQueue
from orijs_sync.groups.testing import check_runs
from orijs_sync.testing import stop_processes, wait_until

WORKER = """
import os, sys, time, redis
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.groups.testing import record
url, name, log = sys.argv[1], sys.argv[2], sys.argv[3]
pause, timeout = float(sys.argv[4]), float(sys.argv[5])
r = redis.Redis.from_url(url, decode_responses=True)
who = str(os.getpid())
def handler(job):
    record(r, log, "start", job.id, job.group_id, job.data["n"], who)
    time.sleep(pause)
    record(r, log, "end", job.id, job.group_id, job.data["n"], who)
    return job.data["n"]
queue = GroupQueue(name, connection=url, job_timeout=timeout)
GroupWorker(queue, handler, concurrency=4, stalled_interval=0.5, backoff=0.1).run()
"""


def spawn(tmp_path, redis_url: str, name: str, log: str, pause: float, timeout: float,
          count: int) -> List[subprocess.Popen]:
    script = tmp_path / "group_worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return [subprocess.Popen([sys.executable, str(script), redis_url, name, log, str(pause),
                              str(timeout)], env=env) for _ in range(count)]


def add_jobs(gq: GroupQueue, groups: int, per_group: int) -> None:
    pipe_jobs = [(f"grp{g}", i) for i in range(per_group) for g in range(groups)]
    for group_id, n in pipe_jobs:
        gq.add(group_id=group_id, data={"n": n})


def test_four_processes_1000_jobs_50_groups(gq, redis_url, gname, r, tmp_path):
    log = f"{gname}:log"
    add_jobs(gq, groups=50, per_group=20)
    procs = spawn(tmp_path, redis_url, gname, log, 0.001, 30, 4)
    try:
        assert gq.wait_for_empty(240), gq.get_job_counts()
    finally:
        stop_processes(procs, 30)
    entries = r.lrange(log, 0, -1)
    assert len(entries) == 2000
    runs = check_runs(entries)
    assert runs == {f"grp{g}": list(range(20)) for g in range(50)}
    workers = Counter(entry.split("|")[4] for entry in entries)
    assert len(workers) >= 2, workers       # the work was shared (each pid did some)


def victim_is_mid_job(r, log: str, pid: int) -> bool:
    mine = [e for e in r.lrange(log, -60, -1) if e.split("|")[4] == str(pid)]
    return bool(mine) and mine[-1].startswith("start")


def test_kill_9_mid_job_recovers_group_and_order(gq, redis_url, gname, r, tmp_path):
    log = f"{gname}:log"
    add_jobs(gq, groups=10, per_group=30)
    procs = spawn(tmp_path, redis_url, gname, log, 0.03, 5.0, 3)   # job_timeout 5 s
    victim = procs[0]
    try:
        wait_until(lambda: r.llen(log) >= 150, 120, "a quarter of the work")
        wait_until(lambda: victim_is_mid_job(r, log, victim.pid), 60, "the victim mid-job")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        assert gq.wait_for_empty(120), gq.get_job_counts()
    finally:
        stop_processes(procs, 30)
    entries = r.lrange(log, 0, -1)
    runs = check_runs(entries, dead={str(victim.pid)})
    assert {g: sorted(set(seq)) for g, seq in runs.items()} == \
        {f"grp{g}": list(range(30)) for g in range(10)}
    starts = Counter(e.split("|")[1] for e in entries if e.startswith("start"))
    ends = Counter(e.split("|")[1] for e in entries if e.startswith("end"))
    cut = [job_id for job_id in starts if starts[job_id] > ends[job_id]]
    assert cut, "the kill cut no job short"
    for job_id in cut:       # every job cut short by the kill ran again, to its end
        assert starts[job_id] == 2 and ends[job_id] == 1
