#!/usr/bin/env python
"""Where does an orijs_sync worker spend its time? Samples every thread with py-spy.

    pip install py-spy
    python bench/profile_worker.py [--n 20000] [--concurrency 16] [--case process_only|seq_add|bulk_add|rr]

Starts its own redis-server, pre-fills the queue (for ``process_only``), runs
``python -m bench.peers.orijs --case CASE`` under ``py-spy record`` and prints
the functions holding most samples (self and inclusive) of the thread holding
the GIL (``--all-threads``: every non-idle thread), then Redis's own time per
command (``INFO commandstats``). The raw collapsed stacks are kept in bench/quick/ for a
flame graph (e.g. speedscope, or ``--format speedscope``).
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import redis  # noqa: E402

from orijs_sync.testing import RedisServer  # noqa: E402

from bench.peers import orijs as orijs_peer  # noqa: E402


def frame_name(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"
    name, _, loc = frame.partition(" (")
    path = loc.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "orijs_sync/", "lib/python3"):
        if marker in path:
            path = path[path.index(marker):]
            break
    return f"{name} ({path})"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--case", default="process_only")
    p.add_argument("--rate", type=int, default=100, help="samples per second")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--all-threads", action="store_true",
                   help="sample every non-idle thread (default: only the one holding the GIL, "
                        "i.e. where Python's CPU goes)")
    args = p.parse_args()
    pyspy = shutil.which("py-spy")
    if not pyspy:
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    out_dir = os.path.join(HERE, "quick")
    os.makedirs(out_dir, exist_ok=True)
    raw = os.path.join(out_dir, f"profile-{args.case}.txt")
    env = dict(os.environ, PYTHONPATH=ROOT)
    with RedisServer() as srv:
        if args.case == "process_only":
            orijs_peer.fill(srv.url, args.n)
        cmd = [pyspy, "record", "--format", "raw", "-o", raw, "-r", str(args.rate), "--threads",
               *([] if args.all_threads else ["--gil"]),
               "--", sys.executable, "-m", "bench.peers.orijs", "--case", args.case,
               "--url", srv.url, "--n", str(args.n), "--concurrency", str(args.concurrency)]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        print(proc.stdout.strip())
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        client = redis.Redis.from_url(srv.url, decode_responses=True)
        stats = client.info("commandstats")
        cpu = client.info("cpu")
        client.close()
    print(f"\nredis-server CPU: user {cpu['used_cpu_user']:.2f} s, sys {cpu['used_cpu_sys']:.2f} s "
          "(fill included); commands by total time:")
    rows = sorted(stats.items(), key=lambda kv: -kv[1]["usec"])
    for name, st in rows[:12]:
        print(f"  {name[len('cmdstat_'):]:<14} calls {st['calls']:>8}  usec/call {st['usec_per_call']:>8.2f}"
              f"  total {st['usec'] / 1e6:6.2f} s")
    self_t: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    total = 0
    with open(raw) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = stack.split(";")
            total += n
            threads[frames[0].split(" (")[0] if frames[0].startswith("thread") else "?"] += n
            names = [frame_name(f) for f in frames if not f.startswith(("thread", "process"))]
            if names:
                self_t[names[-1]] += n
            for name in set(names):
                incl[name] += n
    print(f"\n{total} samples (non-idle) in {raw}")
    print("\nby thread:")
    for t, n in threads.most_common(10):
        print(f"  {100 * n / total:5.1f}%  {t}")
    print(f"\ntop {args.top} by self time:")
    for name, n in self_t.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")
    print(f"\ntop {args.top} by inclusive time:")
    for name, n in incl.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
