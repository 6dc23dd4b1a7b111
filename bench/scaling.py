#!/usr/bin/env python
"""How cost grows with the work: orijs_sync beside BullMQ for Node on one
Redis this script starts itself. Run by hand, never by the tests.

    python bench/scaling.py                       # backlog, payload, concurrency
    python bench/scaling.py --quick               # counts / 10 (backlog 1k/10k/100k)
    python bench/scaling.py --cases payload --out /tmp/x

Every queue is filled by orijs_sync (untimed, outside the cell: the layout is
BullMQ's, so Node's worker takes the same jobs). Cases (each cell in its own subprocess, through bench/run.py's ``run_cell``, with
the workers started and ready on a paused queue before the clock):

- ``backlog``: B jobs waiting (B = 10k, 100k, 1M; filled once by orijs_sync, the
  layout is shared), Redis ``used_memory`` per waiting job; then each peer's worker
  (c=16) takes M = min(20k, B/4) of them (``process_only``), the rest still waiting.
- ``payload``: no-op jobs with 0 B, 10 KB and 100 KB of data, c=16.
- ``concurrency``: no-op jobs at c=16, 128, 512: the worker process's peak RSS and
  thread count and its CPU per job.

For every cell it records the worker process's CPU (``cpu_us_per_job``; × the rate
gives the cores it used), Redis's CPU over the cell (``INFO cpu``) and what Redis
did (``INFO commandstats``, and per script from a SLOWLOG of every command: the sha
of each EVALSHA is mapped to ``orijs_sync/lua/<name>.lua`` or BullMQ's script).
Writes ``scaling.json`` and ``scaling.png`` into ``--out`` (default bench/) and
prints the tables.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import redis  # noqa: E402

from bench.run import NODE_DIR, ensure_node, run_cell  # noqa: E402
from orijs_sync.testing import RedisServer  # noqa: E402

PEERS = ("orijs", "node")
LABEL = {"orijs": "orijs_sync", "node": "BullMQ (Node)"}
SAMPLE = ["--sample", "1"]   # the peers report their RSS, threads and CPU


def script_names() -> Dict[str, str]:
    """sha1 -> script name, for orijs_sync/lua/ and BullMQ for Node's scripts."""
    from orijs_sync.store import scripts
    names: Dict[str, str] = {}
    lua = os.path.join(ROOT, "orijs_sync", "lua")
    for path, _, files in os.walk(lua):
        if os.path.basename(path) == "includes":
            continue
        for f in files:
            if f.endswith(".lua"):
                name = os.path.relpath(os.path.join(path, f), lua)[:-4]
                sha = hashlib.sha1(scripts.source(name).encode()).hexdigest()
                names[sha] = f"orijs:{name}"
    js = ("const fs=require('fs'),c=require('crypto');"
          "const d='node_modules/bullmq/dist/cjs/scripts';"
          "for(const f of fs.readdirSync(d)){if(!f.endsWith('.js')||f==='index.js')continue;"
          "for(const v of Object.values(require('./'+d+'/'+f)))if(v&&v.content)"
          "console.log(c.createHash('sha1').update(v.content).digest('hex'),v.name)}")
    try:
        out = subprocess.run(["node", "-e", js], cwd=NODE_DIR, capture_output=True, text=True,
                             timeout=60).stdout
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            names[sha] = f"node:{name}"
    except (OSError, subprocess.SubprocessError):
        pass
    return names


class RedisWindow:
    """Redis's CPU, commands and scripts over one cell."""

    def __init__(self, r: redis.Redis, names: Dict[str, str]) -> None:
        self.r = r
        self.names = names

    def __enter__(self) -> "RedisWindow":
        self.r.config_set("slowlog-log-slower-than", 0)
        self.r.config_set("slowlog-max-len", 400000)
        self.r.slowlog_reset()
        self.r.config_resetstat()
        cpu = self.r.info("cpu")
        self.cpu0 = cpu["used_cpu_user"] + cpu["used_cpu_sys"]
        return self

    def __exit__(self, *exc: Any) -> None:
        cpu = self.r.info("cpu")
        self.cpu_s = cpu["used_cpu_user"] + cpu["used_cpu_sys"] - self.cpu0
        self.commands = {k[len("cmdstat_"):]: {"calls": v["calls"], "usec_per_call": v["usec_per_call"]}
                         for k, v in self.r.info("commandstats").items()}
        self.scripts = self._scripts()
        self.r.config_set("slowlog-log-slower-than", 10000)
        self.r.slowlog_reset()

    def _scripts(self) -> Dict[str, Dict[str, float]]:
        calls: Dict[str, List[int]] = collections.defaultdict(list)
        for entry in self.r.execute_command("SLOWLOG", "GET", "-1"):
            args = entry[3]
            if args and args[0].upper() in (b"EVALSHA", b"EVALSHA_RO") and len(args) > 1:
                sha = args[1].decode()
                calls[self.names.get(sha, sha[:10])].append(int(entry[2]))
        return {name: {"calls": len(us), "usec_per_call": round(sum(us) / len(us), 2),
                       "usec_total": sum(us)}
                for name, us in sorted(calls.items(), key=lambda kv: -sum(kv[1]))}


def cell(r: redis.Redis, names: Dict[str, str], peer: str, case: str, url: str, n: int,
         extra: List[str], timeout: float) -> Dict[str, Any]:
    with RedisWindow(r, names) as w:
        res = run_cell(peer, case, url, n, extra, timeout)
    if "error" in res:
        return res
    secs = res.get("seconds") or 1.0
    for st in w.scripts.values():
        st["usec_per_job"] = round(st["usec_total"] / max(n, 1), 1)
    res.update(redis_cpu_s=round(w.cpu_s, 3), redis_cores=round(w.cpu_s / secs, 2),
               redis_cpu_us_per_job=round(w.cpu_s / max(n, 1) * 1e6, 1),
               worker_cores=round(res.get("cpu_s", 0.0) / secs, 2),
               commands=w.commands, scripts=w.scripts)
    return res


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def fill_backlog(url: str, b: int) -> float:
    """B no-op jobs on the paused queue (remove-on-complete); Redis bytes per job."""
    from bench.peers import orijs as orijs_peer
    r = redis.Redis.from_url(url)
    before = r.info("memory")["used_memory"]
    orijs_peer.fill(url, b)
    after = r.info("memory")["used_memory"]
    r.close()
    return (after - before) / b


def pause(url: str) -> None:
    from orijs_sync import Queue
    from bench.peers.common import QUEUE
    q = Queue(QUEUE, connection=url)
    q.pause()
    q.close()


def run_backlog(r: redis.Redis, names: Dict[str, str], url: str, scale: int,
                timeout: float) -> List[Dict[str, Any]]:
    rows = []
    for b in (10000 // scale, 100000 // scale, 1000000 // scale):
        take = min(20000 // scale, b // 4)   # a worker overshoots its count by its prefetch
        r.flushall()
        t0 = time.time()
        per_job = fill_backlog(url, b)
        log(f"backlog {b:,}: filled in {time.time() - t0:.0f} s, {per_job:.0f} B/job ({load()})")
        row = {"backlog": b, "bytes_per_waiting_job": round(per_job, 1), "take": take}
        for peer in PEERS:
            res = cell(r, names, peer, "process_only", url, take, ["--concurrency", "16", *SAMPLE],
                       timeout)
            pause(url)
            row[peer] = res
            log(f"  {peer}: {summary(res)}")
        row["load"] = load()
        rows.append(row)
    return rows


def fill(url: str, n: int, payload: int = 0) -> None:
    from bench.peers import orijs as orijs_peer
    orijs_peer.fill(url, n, payload=payload)


def run_payload(r: redis.Redis, names: Dict[str, str], url: str, scale: int,
                timeout: float) -> List[Dict[str, Any]]:
    rows = []
    for size, n in ((0, 20000), (10240, 10000), (102400, 2000)):
        n = max(n // scale, 100)
        row = {"payload": size, "n": n}
        for peer in PEERS:
            r.flushall()
            fill(url, n, size)
            row[peer] = cell(r, names, peer, "process_only", url, n,
                             ["--concurrency", "16", *SAMPLE], timeout)
            log(f"payload {size} B, {peer}: {summary(row[peer])} ({load()})")
        row["load"] = load()
        rows.append(row)
    return rows


def run_concurrency(r: redis.Redis, names: Dict[str, str], url: str, scale: int,
                    timeout: float) -> List[Dict[str, Any]]:
    rows = []
    n = 20000 // scale
    for c in (16, 128, 512):
        row = {"concurrency": c, "n": n}
        for peer in PEERS:
            r.flushall()
            fill(url, n)
            row[peer] = cell(r, names, peer, "process_only", url, n,
                             ["--concurrency", str(c), *SAMPLE], timeout)
            log(f"c={c}, {peer}: {summary(row[peer])} ({load()})")
        row["load"] = load()
        rows.append(row)
    return rows


def summary(res: Dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR " + res["error"]
    top = list(res.get("scripts", {}).items())[:3]
    scripts = ", ".join(f"{k} {v['usec_per_call']:.0f} µs×{v['calls']}" for k, v in top)
    return (f"{res['ops_per_s']:,.0f}/s, worker {res.get('cpu_us_per_job')} µs/job "
            f"({res.get('worker_cores')} cores), redis {res.get('redis_cpu_us_per_job')} µs/job "
            f"({res.get('redis_cores')} cores), rss {res.get('rss_mb')} MB, "
            f"{res.get('threads')} threads; {scripts}")


def cell_md(res: Dict[str, Any]) -> Tuple[str, ...]:
    if "error" in res:
        return ("error",) * 4
    return (f"{res['ops_per_s']:,.0f}", f"{res['cpu_us_per_job']:.0f} µs ({res['worker_cores']:.2f})",
            f"{res['redis_cpu_us_per_job']:.0f} µs ({res['redis_cores']:.2f})",
            f"{res['rss_mb']:.0f} MB / {res['threads']}")


def tables(data: Dict[str, Any]) -> str:
    head = ("| {k} | peer | jobs/s | worker CPU per job (cores) | Redis CPU per job (cores) | "
            "worker peak RSS / threads |{x}\n|---|---|---:|---:|---:|---:|{y}")
    out = []
    for case, key, extra_h in (("backlog", "backlog", " Redis bytes per waiting job |"),
                               ("payload", "payload", ""), ("concurrency", "concurrency", "")):
        rows = data.get(case)
        if not rows:
            continue
        out.append(f"### {case}\n")
        out.append(head.format(k=key, x=extra_h, y="---:|" if extra_h else ""))
        for row in rows:
            for peer in PEERS:
                cells = cell_md(row[peer])
                first = f"{row[key]:,}" if peer == "orijs" else ""
                ratio = ""
                if peer == "node" and "ops_per_s" in row["orijs"] and "ops_per_s" in row["node"]:
                    ratio = f" (orijs ×{row['orijs']['ops_per_s'] / row['node']['ops_per_s']:.2f})"
                extra = (f" {row['bytes_per_waiting_job']:.0f} |" if peer == "orijs" else " |") \
                    if extra_h else ""
                out.append(f"| {first} | {LABEL[peer]} | {cells[0]}{ratio} | {cells[1]} | "
                           f"{cells[2]} | {cells[3]} |{extra}")
        out.append("")
        out.append("Redis per script: µs per call × calls = µs per job (orijs_sync batches "
                   "finishes), orijs_sync / Node:")
        out.append("")
        for row in rows:
            parts = []
            for peer in PEERS:
                sc = list(row[peer].get("scripts", {}).items())[:3]
                parts.append(", ".join(f"{k.split(':', 1)[-1]} {v['usec_per_call']:.1f}×{v['calls']}"
                                       f" = {v['usec_per_job']:.1f}" for k, v in sc))
            out.append(f"- {key} {row[key]:,} ({row['load']}): {parts[0]} / {parts[1]}")
        out.append("")
    return "\n".join(out)


def plot(data: Dict[str, Any], path: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    panels = [(c, k, lab) for c, k, lab in (("backlog", "backlog", "jobs waiting (log)"),
                                            ("payload", "payload", "payload bytes"),
                                            ("concurrency", "concurrency", "worker concurrency"))
              if data.get(c)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), dpi=110, squeeze=False)
    for ax, (case, key, label) in zip(axes[0], panels):
        rows = data[case]
        xs = [row[key] for row in rows]
        for peer, color in (("orijs", "#d62728"), ("node", "#2ca02c")):
            ys = [row[peer].get("ops_per_s") for row in rows]
            ax.plot(range(len(xs)), ys, "o-", color=color, label=LABEL[peer])
            for i, y in enumerate(ys):
                if y:
                    ax.annotate(f"{y:,.0f}", (i, y), fontsize=7, textcoords="offset points",
                                xytext=(0, 5), ha="center")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([f"{x:,}" for x in xs])
        ax.set_xlabel(label)
        ax.set_ylabel("no-op jobs completed per second (c=16)" if case != "concurrency"
                      else "no-op jobs completed per second")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"throughput by {case}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="counts / 10")
    p.add_argument("--cases", default="backlog,payload,concurrency")
    p.add_argument("--out", default=HERE)
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    why = ensure_node()
    if why:
        log(f"BullMQ for Node is needed: {why}")
        return 2
    scale = 10 if args.quick else 1
    names = script_names()
    data: Dict[str, Any] = {"load_start": load(), "cores": os.cpu_count()}
    runners = {"backlog": run_backlog, "payload": run_payload, "concurrency": run_concurrency}
    with RedisServer() as srv:
        r = redis.Redis.from_url(srv.url)
        data["redis"] = r.info("server")["redis_version"]
        for case in args.cases.split(","):
            data[case] = runners[case](r, names, srv.url, scale, args.timeout)
        r.close()
    data["load_end"] = load()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.json"), "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    err = plot(data, os.path.join(args.out, "scaling.png"))
    print(f"{data['load_start']} at the start, {data['load_end']} at the end; Redis {data['redis']}")
    print(tables(data))
    if err:
        print(f"(plot not drawn: {err})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
