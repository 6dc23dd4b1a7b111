"""Soak (bounded, well under 3 minutes): thousands of jobs through several worker
processes, some jobs outliving their first lock, while workers are killed -9 at random
and Redis (with its AOF) restarts, each outage shorter than half the lock.
Lost 0, overlapping runs of one job 0, stuck 0, completed = acknowledged."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import redis

from orijs_sync import Queue, errors
from orijs_sync.testing import RedisServer, wait_until

LOCK = 8.0    # outages (at most 1.5 s asleep, plus halt and restart) stay well under LOCK / 2
JOBS = 4000
PROCESSES = 4

WORKER = f"""
import os, sys, time
from orijs_sync import Worker
url, queue, logdir = sys.argv[1:4]
fd = os.open(os.path.join(logdir, f"{{os.getpid()}}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def note(*parts):   # one write() per line: whole lines, even under kill -9
    os.write(fd, (" ".join(str(p) for p in parts) + "\\n").encode())
def handler(job):
    note("start", job.id, time.time())
    time.sleep(job.data["sleep"])
    note("end", job.id, time.time())
    return job.data["n"]
worker = Worker(queue, handler, connection=url, concurrency=8, lock_duration={LOCK},
                stalled_interval=1.0, max_stalled_count=1000, max_reconnect_delay=0.5,
                drain_delay=1.0)
worker.on("completed", lambda job, result: note("ack", job.id, time.time()))
worker.run()
"""

Run = Tuple[str, float, float]          # pid, start, end


class Workers:
    """The worker processes; a killed one is replaced at once (even while Redis is down:
    the new one waits for it)."""

    def __init__(self, script: Path, url: str, queue: str, logdir: Path) -> None:
        self.args = [sys.executable, str(script), url, queue, str(logdir)]
        self.spawned = 0
        self.procs = [self._spawn() for _ in range(PROCESSES)]
        self.killed_at: Dict[str, float] = {}

    def _spawn(self) -> subprocess.Popen:
        self.spawned += 1                 # each one's log (reconnect warnings...) to a file
        with open(Path(self.args[-1]) / f"worker-{self.spawned}.err", "w") as err:
            return subprocess.Popen(self.args, stderr=err)

    def kill_one(self, rng: random.Random) -> None:
        victim = self.procs.pop(rng.randrange(len(self.procs)))
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        self.killed_at[str(victim.pid)] = time.time()
        self.procs.append(self._spawn())

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def counts(queue: Queue) -> Optional[Dict[str, int]]:
    try:
        return queue.get_job_counts()
    except errors.ConnectionError:        # Redis is restarting
        return None


def answers(queue: Queue) -> bool:
    try:
        return bool(queue.client.ping()) and counts(queue) is not None
    except errors.ConnectionError:
        return False


def chaos(server: RedisServer, workers: Workers, queue: Queue, rng: random.Random,
          stats: Dict[str, float]) -> None:
    """Kill -9 a worker or restart Redis every ~1.2 s while work remains (up to 45 s)."""
    actions = ["kill", "kill", "redis"]
    started = time.monotonic()
    step = 0
    while time.monotonic() - started < 45:
        time.sleep(rng.uniform(0.8, 1.6))
        now = counts(queue)
        if now is not None and now["completed"] + now["failed"] >= JOBS:
            return
        if actions[step % 3] == "kill":
            workers.kill_one(rng)
            stats["kills"] += 1
        else:
            down = time.monotonic()
            if step % 2:                                  # kill -9 or SIGTERM: AOF either way
                server.kill()
            else:
                server.halt()
            time.sleep(rng.uniform(0.3, 1.5))             # with the restart: < half the lock
            server.restart()
            wait_until(lambda: answers(queue), 10, "Redis to load its AOF")
            stats["redis_restarts"] += 1
            stats["longest_outage"] = max(stats["longest_outage"], time.monotonic() - down)
        step += 1


def read_logs(logdir: Path, killed_at: Dict[str, float]) -> Tuple[Dict[str, List[Run]],
                                                                   Dict[str, List[str]]]:
    """Each job's runs (a run cut by a kill ends at the kill) and acknowledgements."""
    runs: Dict[str, List[Run]] = defaultdict(list)
    acks: Dict[str, List[str]] = defaultdict(list)
    for path in logdir.glob("*.log"):
        pid = path.stem
        open_runs: Dict[str, List[float]] = defaultdict(list)   # one process may run a
        for line in path.read_text().splitlines():                # job twice at once
            kind, job_id, stamp = line.split()
            if kind == "start":
                open_runs[job_id].append(float(stamp))
            elif kind == "end":
                runs[job_id].append((pid, open_runs[job_id].pop(0), float(stamp)))
            else:
                acks[job_id].append(pid)
        for job_id, starts in open_runs.items():
            for start in starts:
                assert pid in killed_at, f"job {job_id} never ended in live process {pid}"
                runs[job_id].append((pid, start, killed_at[pid]))
    return runs, acks


def test_soak_kills_and_redis_restarts_lose_nothing_and_never_overlap(tmp_path):
    rng = random.Random()
    stats: Dict[str, float] = {"kills": 0, "redis_restarts": 0, "longest_outage": 0.0}
    logdir = tmp_path / "logs"
    logdir.mkdir()
    script = tmp_path / "soak_worker.py"
    script.write_text(WORKER)
    began = time.monotonic()
    with RedisServer(appendonly=True) as server:
        queue = Queue("soak", connection=server.url)
        r = redis.Redis.from_url(server.url, decode_responses=True)
        r.hset(queue.keys.meta, "opts.maxLenEvents", 10 ** 7)   # keep every event
        queue.add_bulk([{"name": "x", "data": {
            "n": i, "sleep": 1.4 * LOCK if i % 200 == 0 else rng.uniform(0.05, 0.15)}}
            for i in range(JOBS)])
        workers = Workers(script, server.url, "soak", logdir)
        try:
            chaos(server, workers, queue, rng, stats)
            wait_until(lambda: (counts(queue) or {}).get("completed") == JOBS, 60,
                       "every job to complete")
        finally:
            workers.stop()
        final = queue.get_job_counts()
        completed = {job.id: job for job in queue.get_completed(0, -1)}
        written = defaultdict(int)
        for _, fields in r.xrange(queue.keys.events):
            if fields.get("event") == "completed":
                written[fields["jobId"]] += 1
        queue.close()
        r.close()
    runs, acks = read_logs(logdir, workers.killed_at)

    for attempts in runs.values():
        attempts.sort(key=lambda run: run[1])
    unacked = set(completed) - set(acks)
    faults = {
        "lost": JOBS - len(completed),
        "stuck": sum(v for k, v in final.items() if k != "completed"),
        "wrong result": sum(1 for job in completed.values() if job.returnvalue != job.data["n"]),
        "overlapping runs": sum(1 for attempts in runs.values()
                                for a, b in zip(attempts, attempts[1:]) if b[1] < a[2]),
        # Only a kill makes a job run again: every run but the last in a killed process.
        "reruns not after a kill": sum(1 for attempts in runs.values() for run in attempts[:-1]
                                       if run[0] not in workers.killed_at),
        "results written twice": sum(1 for job_id in completed if written[job_id] != 1),
        "acknowledged twice": sum(1 for pids in acks.values() if len(pids) > 1),
        "acknowledged, not completed": len(set(acks) - set(completed)),
        # Written but not acknowledged: only when its process was killed between the two.
        "unacknowledged, not killed": sum(1 for j in unacked
                                          if runs[j][-1][0] not in workers.killed_at),
    }
    reruns = sum(1 for attempts in runs.values() if len(attempts) > 1)
    print(f"\nsoak: {JOBS} jobs, {PROCESSES} processes, lock {LOCK:g}s, "
          f"{int(stats['kills'])} kill -9s, {int(stats['redis_restarts'])} Redis restarts "
          f"(longest outage {stats['longest_outage']:.2f}s), "
          f"{sum(len(a) for a in runs.values())} runs, {reruns} jobs rerun after a kill; "
          f"completed {len(completed)} = acknowledged {len(acks)} + {len(unacked)} written "
          f"just before a kill; {time.monotonic() - began:.0f}s; {faults}")
    assert faults == dict.fromkeys(faults, 0)
