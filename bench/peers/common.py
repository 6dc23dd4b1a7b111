"""Shared plumbing for the peer adapters (one subprocess per case).

Every adapter is run as ``python -m bench.peers.<peer> --case CASE --url URL
--n N [--concurrency C] [--procs P]`` from the repository root, and prints one
line ``RESULT {json}`` on stdout. Cases:

- ``seq_add``: N sequential adds, one awaited at a time -> ``ops_per_s``
- ``bulk_add``: N jobs in chunks of 500, remove-on-complete -> ``ops_per_s``
- ``process``: N no-op jobs put on a paused (or held) queue, untimed; one worker
  with ``--concurrency`` started and waited for until it is ready (blocked in
  Redis waiting for work, see ``wait_ready``); the clock starts at the resume
  and stops at the last completion -> ``ops_per_s``
- ``multi``: the same with ``--procs`` worker processes (see ``run_multi``)
- ``rr``: N sequential request-response round trips -> ``ops_per_s``, ``p50_ms``, ``p99_ms``
- ``memory``: N jobs processed and kept; bytes of ``MEMORY USAGE`` per job
- ``proc``: handlers in ``--procs`` child processes (``--handler cpu``: about 20 ms of
  CPU a job, ``noop``: none), ``--concurrency`` jobs at once, queue filled and held as in
  ``process``; -> ``ops_per_s`` and the children's memory (bench/peers/childmem.py)
- ``child``: internal, one worker process of ``multi``

A case a peer cannot run prints ``{"unsupported": "why"}``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import redis

CHUNK = 500
QUEUE = "bench"
WARMUP = 20

READY_KEY = "bench:ready"
STOP_KEY = "bench:stop"
PROGRESS_KEY = "bench:progress"
HELD_KEY = "bench:held"      # Huey / RQ: the filled list waits here until the release
CONTROL_NAME = "bench-ctl"   # CLIENT SETNAME of the harness's own connections


def noop(*args, **kwargs):  # RQ needs an importable function
    return None


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--case", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--child", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--payload", type=int, default=0,
                   help="bytes of padding in each job's data (bench/scaling.py)")
    p.add_argument("--sample", type=int, default=0,
                   help="1: report the worker process's RSS, threads and CPU (bench/scaling.py)")
    p.add_argument("--handler", default="cpu", choices=("cpu", "noop"),
                   help="the proc case's handler (bench/peers/cpu_tasks.py)")
    return p.parse_args(argv)


def emit(result: Dict) -> None:
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


def rate(n: int, seconds: float, **extra) -> Dict:
    out = {"n": n, "seconds": round(seconds, 4), "ops_per_s": round(n / seconds, 1) if seconds > 0 else None}
    out.update(extra)
    return out


def percentile(values: List[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def latency_result(latencies_s: List[float], total_s: float, **extra) -> Dict:
    ms = [x * 1000.0 for x in latencies_s]
    return rate(len(ms), total_s, p50_ms=round(percentile(ms, 0.5), 3),
                p99_ms=round(percentile(ms, 0.99), 3), max_ms=round(max(ms), 3), **extra)


def client(url: str) -> redis.Redis:
    """A harness connection, named so ``wait_ready`` does not count it."""
    return redis.Redis.from_url(url, client_name=CONTROL_NAME)


def blocked_clients(r: redis.Redis) -> int:
    """Connections blocked in a Redis command (BZPOPMIN, BRPOP, ...) that are not
    the harness's own: a worker blocked there is connected and waiting for work."""
    return sum(1 for c in r.client_list()
               if "b" in c.get("flags", "") and c.get("name") != CONTROL_NAME)


def wait_ready(url: str, expected: int, timeout: float = 60.0, settle: float = 0.2) -> int:
    """Wait until ``expected`` worker connections are blocked waiting for work (the
    queue is paused or held, so that is where a started worker ends up), then
    ``settle`` seconds more. Returns how many were blocked."""
    r = client(url)
    try:
        deadline = time.monotonic() + timeout
        while (n := blocked_clients(r)) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers not ready: {n}/{expected} blocked after {timeout} s")
            time.sleep(0.01)
        time.sleep(settle)
        return n
    finally:
        r.close()


def hold(url: str, key: str) -> None:
    """Huey / RQ have no pause: move the filled list aside (untimed)."""
    r = client(url)
    r.rename(key, HELD_KEY)
    r.close()


def release(url: str, key: str) -> None:
    """Put the held list back: RENAME wakes the workers blocked on ``key``."""
    r = client(url)
    r.rename(HELD_KEY, key)
    r.close()


def memory_of(r: redis.Redis, keys: Iterable) -> int:
    """Sum of MEMORY USAGE (all samples) over existing keys."""
    pipe = r.pipeline(transaction=False)
    keys = list(keys)
    for k in keys:
        pipe.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")
    return sum(int(v or 0) for v in pipe.execute())


def memory_result(r: redis.Redis, job_keys: Dict[str, List], index_keys: List, n: int) -> Dict:
    """``job_keys``: job id -> the keys that job owns. ``index_keys``: the sets
    listing completed jobs (their memory is shared out per job)."""
    per_job = [memory_of(r, keys) for keys in job_keys.values()]
    index = memory_of(r, index_keys)
    job_avg = sum(per_job) / len(per_job) if per_job else 0.0
    return {"n": n, "sampled": len(per_job), "job_bytes": round(job_avg, 1),
            "index_bytes": round(index / max(n, 1), 1),
            "bytes_per_job": round(job_avg + index / max(n, 1), 1)}


def chunks(seq: List, size: int = CHUNK):
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


# --------------------------------------------------------------------------
# multi-process processing: a parent fills a paused (or held) queue, starts P
# child processes, waits until each has its worker started (READY_KEY) and every
# worker is blocked in Redis waiting for work (``wait_ready``), then resumes the
# queue and starts the clock. Each child reports (count, wall-clock time of its
# last completion) into a hash; elapsed = max(last) - t0. Polling only decides
# when to stop; it does not affect the measured time.
# --------------------------------------------------------------------------

def run_multi(args: argparse.Namespace, module: str, fill: Callable[[int], None],
              resume: Callable[[], None], child_concurrency: Optional[int] = None,
              blocked_per_proc: int = 1, child_case: str = "child",
              child_args: Sequence[str] = ()) -> Dict:
    """``child_case`` / ``child_args``: what each child is run with (the proc case's
    children run another case, with its ``--handler``)."""
    r = client(args.url)
    fill(args.n)
    procs: List[subprocess.Popen] = []
    conc = child_concurrency if child_concurrency is not None else args.concurrency
    env = dict(os.environ)
    try:
        for i in range(args.procs):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", module, "--case", child_case, "--url", args.url,
                 "--n", str(args.n), "--concurrency", str(conc), "--child", str(i),
                 "--timeout", str(args.timeout), *child_args],
                stdout=subprocess.DEVNULL, env=env))
        for _ in range(args.procs):
            if r.blpop([READY_KEY], timeout=60) is None:
                raise RuntimeError("worker processes did not get ready in 60 s")
        wait_ready(args.url, args.procs * blocked_per_proc)
        t0 = time.time()
        resume()
        deadline = time.monotonic() + args.timeout
        while True:
            vals = [json.loads(v) for v in r.hvals(PROGRESS_KEY)]
            if sum(v["count"] for v in vals) >= args.n:
                break
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker process exited early")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out with {sum(v['count'] for v in vals)}/{args.n} done")
            time.sleep(0.05)
        r.rpush(STOP_KEY, *["stop"] * args.procs)
        for p in procs:
            p.wait(timeout=60)
        vals = [json.loads(v) for v in r.hvals(PROGRESS_KEY)]
        last = max(v["last"] for v in vals)
        counts = [v["count"] for v in vals]
        return rate(sum(counts), last - t0, procs=args.procs, concurrency=conc, per_proc=counts)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        r.close()


class ChildReporter:
    """In a child: count completions and publish progress every 0.1 s."""

    def __init__(self, url: str, child: int) -> None:
        self.r = client(url)
        self.child = str(child)
        self.count = 0
        self.last = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def completed(self, *args) -> None:
        with self._lock:
            self.count += 1
            self.last = time.time()

    def ready(self) -> None:
        """Call once the worker is started: the parent then waits for it to block."""
        self.r.rpush(READY_KEY, self.child)
        self._thread.start()

    def wait_stop(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.r.blpop([STOP_KEY], timeout=1) is not None:
                return

    def publish(self) -> None:
        with self._lock:
            payload = json.dumps({"count": self.count, "last": self.last})
        self.r.hset(PROGRESS_KEY, self.child, payload)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.publish()

    def finish(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.publish()
        self.r.close()


class SharedCounter:
    """Completions counted in forked children (Huey's process workers, Celery's prefork
    pool: their completion hooks run in the child that ran the job): a count and the wall
    time of the last, in shared memory made before the fork. Call it from the hook."""

    def __init__(self) -> None:
        self.values = multiprocessing.get_context("fork").Array("d", 2)

    def __call__(self, *_args, **_kwargs) -> None:
        with self.values.get_lock():
            self.values[0] += 1
            self.values[1] = time.time()

    def read(self) -> Tuple[int, float]:
        with self.values.get_lock():
            return int(self.values[0]), self.values[1]

    def wait(self, n: int, timeout: float) -> Tuple[int, float]:
        """Until ``n`` are counted: (count, wall time of the last)."""
        deadline = time.monotonic() + timeout
        while (got := self.read())[0] < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out at {got[0]}/{n}")
            time.sleep(0.01)
        return got


def job_data(i: int, payload: int = 0) -> Dict:
    """A job's data: its index, and ``payload`` bytes of padding when asked."""
    return {"i": i, "pad": "x" * payload} if payload else {"i": i}


def proc_status() -> Dict[str, int]:
    """This process's resident memory (kB) and thread count, from /proc."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "Threads:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])
    return out


class ProcSampler:
    """Peak RSS and thread count of this process, sampled every 250 ms, and its CPU
    time (all threads), over a timed window: ``start()`` ... ``stop(n)`` -> fields.
    Only when asked (``--sample 1``): it is one more thread in the measured process."""

    def __init__(self) -> None:
        self.rss_kb = 0
        self.threads = 0
        self._cpu0 = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        st = proc_status()
        self.rss_kb = max(self.rss_kb, st.get("VmRSS", 0))
        self.threads = max(self.threads, st.get("Threads", 0))

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self._sample()

    def start(self) -> "ProcSampler":
        self._cpu0 = time.process_time()
        self._sample()
        self._thread.start()
        return self

    def stop(self, n: int) -> Dict:
        cpu = time.process_time() - self._cpu0
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()
        return {"rss_mb": round(self.rss_kb / 1024, 1), "threads": self.threads,
                "cpu_s": round(cpu, 3), "cpu_us_per_job": round(cpu / max(n, 1) * 1e6, 1)}


class Completions:
    """A worker's ``completed`` listener counting completions up to ``n``; ``last`` is
    the ``perf_counter()`` of the latest."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self._lock = threading.Lock()
        self._done = threading.Event()

    def __call__(self, *_: object) -> None:
        with self._lock:
            self.count += 1
            self.last = time.perf_counter()
            if self.count == 1:
                self.first = self.last
            if self.count >= self.n:
                self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


def unsupported(why: str) -> Dict:
    return {"unsupported": why}


BULL_JOB_SUFFIXES = ("", ":logs", ":lock", ":dependencies", ":processed", ":failed",
                     ":unsuccessful")


def bull_job_keys(queue: str, job_id: str, prefix: str = "bull") -> List[str]:
    """Every key BullMQ v5 may keep for one job (absent ones count 0)."""
    return [f"{prefix}:{queue}:{job_id}{s}" for s in BULL_JOB_SUFFIXES]
