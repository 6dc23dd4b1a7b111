#!/usr/bin/env python
"""Side-by-side benchmark: orijs_sync against BullMQ for Node, bullmq for Python,
Huey and RQ (and Celery, for handlers in child processes), on one Redis this script
starts itself.

    pip install -e '.[bench]'          # the peers: bullmq (Python), huey, rq, celery, matplotlib
    python bench/run.py                # full run: writes bench/RESULTS.md, throughput.png, results.json
    python bench/run.py --quick        # counts / 10, writes under bench/quick/ (not committed)
    python bench/run.py --cases cpu_p2,noop_p2   # handlers in child processes (proc_report.py)

Each (case, peer) runs in its own subprocess (``bench/peers/<peer>.py``, or
``node bench/node/bench.js``) with a timeout, after FLUSHALL, so a peer that
crashes or hangs costs one cell of the table, not the run. Cases run one after
the other, peers interleaved within a case. See bench/README.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NODE_DIR = os.path.join(HERE, "node")
sys.path.insert(0, ROOT)

from orijs_sync.testing import RedisServer  # noqa: E402  (needs ROOT on sys.path)

from bench import proc_report  # noqa: E402

import redis  # noqa: E402

# peer key -> (label, python module or None for node, distribution name for the version)
PEERS: Dict[str, Tuple[str, Optional[str], Optional[str]]] = {
    "orijs": ("orijs_sync", "bench.peers.orijs", "orijs_sync"),
    "node": ("BullMQ (Node)", None, None),
    "bullmq_py": ("bullmq (Python)", "bench.peers.bullmq_py", "bullmq"),
    "huey": ("Huey", "bench.peers.huey_peer", "huey"),
    "rq": ("RQ", "bench.peers.rq_peer", "rq"),
    # handlers in child processes (proc_report.CASES) only:
    "orijs_proc": ("orijs_sync processes", "bench.peers.orijs_proc", None),
    "celery": ("Celery", "bench.peers.celery_peer", "celery"),
}
IMPORT_NAMES = {"orijs": "orijs_sync", "bullmq_py": "bullmq", "huey": "huey", "rq": "rq",
                "orijs_proc": "orijs_sync", "celery": "celery"}

# case key -> (peer case, label, count, extra args, what "better" means)
ONLY = {"emit": {"orijs"},   # cases only some peers have (the OriJS event layer)
        "groups_c16": {"orijs", "node"},   # per-group FIFO: orijs_sync.groups vs GroupMQ (Node)
        **{case: {"orijs", "orijs_proc", "rq", "celery", "huey", "node"}
           for case in proc_report.CASES}}   # handlers in child processes
# peers that have only some cases
PEER_CASES = {"orijs_proc": set(proc_report.CASES), "celery": set(proc_report.CASES)}
# cases run by other programs than the peer's usual one: case -> (python module, node script)
GROUP_PEERS = {"groups": ("bench.peers.orijs_groups", "groups.js")}
FULL_COUNTS = {"seq_add": 5000, "bulk_add": 20000, "process": 20000, "multi": 20000,
               "rr": 2000, "emit": 2000, "memory": 2000, "groups": 10000,
               "cpu": 200, "noop_proc": 2000}
PROC_ARGS = ["--procs", "2", "--concurrency", "2"]


def runs(peer: str, case_key: str) -> bool:
    return peer in ONLY.get(case_key, {peer}) and case_key in PEER_CASES.get(peer, {case_key})


def cases(scale: int) -> List[Tuple[str, str, str, int, List[str]]]:
    n = {k: max(v // scale, 1) for k, v in FULL_COUNTS.items()}
    return [
        ("seq_add", "seq_add", "sequential add /s", n["seq_add"], []),
        ("bulk_add", "bulk_add", "bulk add /s (chunks of 500)", n["bulk_add"], []),
        ("process_c1", "process", "processing /s, c=1", n["process"], ["--concurrency", "1"]),
        ("process_c16", "process", "processing /s, c=16", n["process"], ["--concurrency", "16"]),
        ("multi_4x16", "multi", "processing /s, 4 procs x c=16", n["multi"],
         ["--procs", "4", "--concurrency", "16"]),
        ("rr", "rr", "request-response", n["rr"], []),
        ("emit", "emit", "OriJS emit().result()", n["rr"], []),
        ("memory", "memory", "bytes per completed job kept", n["memory"], []),
        ("groups_c16", "groups", "group queue /s, 100 groups, c=16", n["groups"],
         ["--concurrency", "16", "--groups", "100"]),
        ("cpu_p2", "proc", "CPU jobs (~20 ms) /s, 2 processes", n["cpu"],
         PROC_ARGS + ["--handler", "cpu"]),
        ("noop_p2", "proc", "no-op jobs /s, 2 processes", n["noop_proc"],
         PROC_ARGS + ["--handler", "noop"]),
    ]


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# -- environment --------------------------------------------------------------

def ensure_node() -> Optional[str]:
    """None when BullMQ for Node is ready, else why it is skipped."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if not node:
        return "node is not on PATH"
    if not all(os.path.isdir(os.path.join(NODE_DIR, "node_modules", package))
               for package in ("bullmq", "groupmq")):
        if not npm:
            return "npm is not on PATH"
        # `npm install --no-save` installs what package-lock.json pins and leaves it as it
        # is; `npm ci` refuses the lock, which lacks optional builds for other platforms.
        cmd = [npm, "install", "--no-save", "--no-audit", "--no-fund"]
        log(f"installing BullMQ for Node: {' '.join(cmd)} (in bench/node)")
        try:
            subprocess.run(cmd, cwd=NODE_DIR, check=True, timeout=600,
                           stdout=subprocess.DEVNULL)
        except (subprocess.SubprocessError, OSError) as exc:
            return f"npm install failed: {exc}"
    return None


def python_peer_missing(peer: str) -> Optional[str]:
    name = IMPORT_NAMES[peer]
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed (pip install -e '.[bench]')"
    return None


def versions() -> Dict[str, str]:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for peer, (_, _, dist) in PEERS.items():
        if dist:
            try:
                out[peer] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[peer] = "not installed" if peer != "orijs" else "source tree"
    try:
        with open(os.path.join(NODE_DIR, "node_modules", "bullmq", "package.json")) as fh:
            out["node"] = json.load(fh)["version"]
        with open(os.path.join(NODE_DIR, "node_modules", "groupmq", "package.json")) as fh:
            out["groupmq"] = json.load(fh)["version"]
        out["nodejs"] = subprocess.run(["node", "--version"], capture_output=True, text=True,
                                       timeout=30).stdout.strip()
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        out["node"] = "not installed"
    return out


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# -- running one cell -----------------------------------------------------------

def run_cell(peer: str, case: str, url: str, n: int, extra: List[str],
             timeout: float) -> Dict[str, Any]:
    module, script = PEERS[peer][1], "bench.js"
    if case in GROUP_PEERS:
        module = module and GROUP_PEERS[case][0]
        script = GROUP_PEERS[case][1]
    args = ["--case", case, "--url", url, "--n", str(n), "--timeout", str(timeout)] + extra
    if module is None:
        cmd = [shutil.which("node") or "node", os.path.join(NODE_DIR, script)] + args
    else:
        cmd = [sys.executable, "-m", module] + args
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # own session: on a timeout the whole group (worker children too) is killed
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate(timeout=30)
        return {"error": f"timed out after {timeout + 60:.0f} s"}
    finally:
        _kill_group(proc)
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (err or out).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)[-400:]}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def summary(res: Dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR " + res["error"]
    if "unsupported" in res:
        return "n/a: " + res["unsupported"]
    if "bytes_per_job" in res:
        return f"{res['bytes_per_job']:.0f} B/job"
    s = f"{res.get('ops_per_s') or 0:,.0f}/s"
    if "p50_ms" in res:
        s += f" p50 {res['p50_ms']:.2f} ms p99 {res['p99_ms']:.2f} ms"
    if "child_rss_mb" in res:
        s += f" child RSS {res['child_rss_mb']:.1f} MB PSS {res['child_pss_mb']:.1f} MB"
    return s


# -- the table ---------------------------------------------------------------------

# column: (case key, field, label, higher is better)
COLUMNS = [
    ("seq_add", "ops_per_s", "sequential add /s", True),
    ("bulk_add", "ops_per_s", "bulk add /s", True),
    ("process_c1", "ops_per_s", "processing /s c=1", True),
    ("process_c16", "ops_per_s", "processing /s c=16", True),
    ("multi_4x16", "ops_per_s", "processing /s 4 procs", True),
    ("rr", "ops_per_s", "req-resp /s", True),
    ("rr", "p50_ms", "req-resp p50 ms", False),
    ("rr", "p99_ms", "req-resp p99 ms", False),
    ("memory", "bytes_per_job", "bytes/completed job", False),
    ("groups_c16", "ops_per_s", "group queue /s", True),
]


def value(results: Dict, peer: str, case: str, field: str) -> Optional[float]:
    res = results.get(peer, {}).get(case, {})
    v = res.get(field)
    return float(v) if isinstance(v, (int, float)) else None


def fmt(v: float, field: str) -> str:
    if field.endswith("_ms"):
        return f"{v:.2f}"
    return f"{v:,.0f}"


def table(results: Dict, peers: List[str]) -> Tuple[str, List[str]]:
    notes: List[str] = []
    peers = [p for p in peers if any(c[0] in results.get(p, {}) for c in COLUMNS)]
    head = "| peer | " + " | ".join(c[2] for c in COLUMNS) + " |"
    sep = "|---|" + "---:|" * len(COLUMNS)
    rows = [head, sep] if peers else ["(none of this table's cases was run)"]
    for peer in peers:
        cells = []
        for case, field, _, higher in COLUMNS:
            res = results.get(peer, {}).get(case, {})
            v = value(results, peer, case, field)
            if v is None:
                if "error" in res:
                    cells.append("error")
                    note = f"{PEERS[peer][0]}, {case}: {res['error']}"
                else:
                    cells.append("–")
                    note = (f"{PEERS[peer][0]}, {case}: {res['unsupported']}"
                            if "unsupported" in res else None)
                if note and note not in notes:
                    notes.append(note)
                continue
            cell = fmt(v, field)
            base = value(results, "orijs", case, field)
            if peer != "orijs" and base and v:
                ratio = base / v if higher else v / base
                cell += f" (×{ratio:.2f})"
            cells.append(cell)
        rows.append(f"| {PEERS[peer][0]} | " + " | ".join(cells) + " |")
    em = results.get("orijs", {}).get("emit", {})
    if "p50_ms" in em:
        notes.append(f"orijs_sync `BullMQEventProvider.emit(...).result()` (the OriJS event layer, "
                     f"sequential, handler in the same process): {em['ops_per_s']:,.0f}/s, "
                     f"p50 {em['p50_ms']:.2f} ms, p99 {em['p99_ms']:.2f} ms")
    elif em:
        notes.append(f"orijs_sync emit().result(): {em.get('error') or em.get('unsupported')}")
    if results.get("node", {}).get("groups_c16"):
        notes.append("group queue /s: orijs_sync.groups (GroupQueue, GroupWorker) beside GroupMQ "
                     "for Node (npm groupmq, pinned), not BullMQ, in the BullMQ (Node) row")
    for peer in peers:
        note = results.get(peer, {}).get("rr", {}).get("note")
        if note:
            notes.append(f"{PEERS[peer][0]} request-response: {note}")
    return "\n".join(rows), notes


def targets(results: Dict) -> List[str]:
    """The first bar of docs/benchmarks.md, judged on this run (reported, never asserted)."""
    def ratio(case: str, peer: str, field: str = "ops_per_s") -> Optional[float]:
        a, b = value(results, "orijs", case, field), value(results, peer, case, field)
        return a / b if a and b else None

    lines = []

    def check(label: str, got: Optional[float], bar: float, unit: str = "×",
              lower: bool = False) -> None:
        if got is None:
            lines.append(f"- {label}: not measured")
            return
        got = round(got, 2)     # judged as shown: 373.9 bytes against 374.0 is 1.00 ×
        ok = got <= bar if lower else got >= bar
        shown = f"{got:.2f} {unit}".strip()
        lines.append(f"- {label}: {shown} (bar {'≤' if lower else '≥'} {bar:g}{' ' + unit if unit != '×' else ' ×'}) "
                     f"{'**met**' if ok else '**not met**'}")

    check("processing c=16 vs bullmq (Python)", ratio("process_c16", "bullmq_py"), 3)
    check("processing c=16 vs Huey (16 threads)", ratio("process_c16", "huey"), 2)
    check("bulk add vs bullmq (Python)", ratio("bulk_add", "bullmq_py"), 1)
    check("sequential add vs bullmq (Python)", ratio("seq_add", "bullmq_py"), 1)
    check("`emit(...).result()` p50", value(results, "orijs", "emit", "p50_ms"), 2, "ms", lower=True)
    check("add + wait_until_finished p50", value(results, "orijs", "rr", "p50_ms"), 2, "ms",
          lower=True)
    mem = value(results, "orijs", "memory", "bytes_per_job")
    node_mem = value(results, "node", "memory", "bytes_per_job")
    check("bytes per completed job vs BullMQ (Node)", mem / node_mem if mem and node_mem else None,
          1, "×", lower=True)
    lines.append("")
    lines.append("Goal (parity with BullMQ for Node):")
    for case, label in (("process_c16", "processing c=16"), ("bulk_add", "bulk add"),
                        ("seq_add", "sequential add")):
        check(f"{label} vs BullMQ (Node)", ratio(case, "node"), 1)
    check("group queue (100 groups, c=16) vs GroupMQ (Node)", ratio("groups_c16", "node"), 1)
    check("`emit(...).result()` p50", value(results, "orijs", "emit", "p50_ms"), 1, "ms", lower=True)
    check("`emit(...).result()` p99", value(results, "orijs", "emit", "p99_ms"), 5, "ms", lower=True)
    return lines


def plot(results: Dict, peers: List[str], path: str, title: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    groups = [("process_c1", "1 process, concurrency 1"),
              ("process_c16", "1 process, concurrency 16"),
              ("multi_4x16", "4 processes × concurrency 16")]
    peers = [p for p in peers if any(value(results, p, g[0], "ops_per_s") for g in groups)]
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    width = 0.8 / max(len(peers), 1)
    colors = {"orijs": "#d62728", "node": "#2ca02c", "bullmq_py": "#1f77b4", "huey": "#9467bd",
              "rq": "#7f7f7f"}
    for i, peer in enumerate(peers):
        xs, ys = [], []
        for g, (case, _) in enumerate(groups):
            v = value(results, peer, case, "ops_per_s")
            if v is not None:
                xs.append(g + (i - (len(peers) - 1) / 2) * width)
                ys.append(v)
        label = PEERS[peer][0]
        if peer == "rq":
            label += " (c=1 per process)"
        bars = ax.bar(xs, ys, width * 0.95, label=label, color=colors.get(peer))
        for b, y in zip(bars, ys):
            ax.text(b.get_x() + b.get_width() / 2, y, f"{y:,.0f}", ha="center", va="bottom",
                    fontsize=7, rotation=90 if len(peers) > 4 else 0)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[1] for g in groups])
    ax.set_ylabel("no-op jobs completed per second")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


# -- main --------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="counts / 10, output under bench/quick/")
    p.add_argument("--scale", type=int, default=None,
                   help="divide every count by this (default 1, or 10 with --quick)")
    p.add_argument("--peers", default=",".join(PEERS), help="comma list of " + ",".join(PEERS))
    p.add_argument("--cases", default=None, help="comma list of case keys (default: all)")
    p.add_argument("--out", default=None, help="output folder (default bench/, or bench/quick/)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per cell (default 600, quick 120)")
    args = p.parse_args(argv)
    cmd_args = sys.argv[1:] if argv is None else argv

    scale = max(args.scale or (10 if args.quick else 1), 1)
    timeout = args.timeout or (120.0 if scale > 1 else 600.0)
    out_dir = args.out or (os.path.join(HERE, "quick") if scale > 1 else HERE)
    os.makedirs(out_dir, exist_ok=True)
    peers = [x for x in args.peers.split(",") if x]
    unknown = [x for x in peers if x not in PEERS]
    if unknown:
        p.error(f"unknown peers {unknown}; known: {', '.join(PEERS)}")
    all_cases = cases(scale)
    if args.cases:
        wanted = set(args.cases.split(","))
        all_cases = [c for c in all_cases if c[0] in wanted]

    skipped: Dict[str, str] = {}
    for peer in peers:
        why = ensure_node() if peer == "node" else python_peer_missing(peer)
        if why:
            skipped[peer] = why
            log(f"skipping {PEERS[peer][0]}: {why}")
    runnable = [x for x in peers if x not in skipped]

    results: Dict[str, Dict[str, Any]] = {peer: {} for peer in peers}
    for peer, why in skipped.items():
        for key, *_ in all_cases:
            if runs(peer, key):
                results[peer][key] = {"unsupported": f"skipped: {why}"}

    load_start = os.getloadavg()[0]
    if load_start > 0.7:
        log(f"warning: the machine is busy (load average {load_start:.2f}); the figures will be "
            "noisy, ratios less so")
    started = time.time()
    with RedisServer() as srv:
        r = redis.Redis.from_url(srv.url)
        info = r.info("server")
        redis_version = info.get("redis_version", "?")
        log(f"redis-server {redis_version} at {srv.url}; {os.cpu_count()} cores; "
            f"{'full' if scale == 1 else f'scaled (counts / {scale})'} run")
        total = sum(1 for c in all_cases for peer in runnable if runs(peer, c[0]))
        k = 0
        for key, case, label, n, extra in all_cases:
            for peer in runnable:
                if not runs(peer, key):
                    continue
                k += 1
                r.flushall()
                t0 = time.time()
                res = run_cell(peer, case, srv.url, n, extra, timeout)
                results[peer][key] = res
                log(f"[{k}/{total}] {key:<12} {PEERS[peer][0]:<16} n={n:<6} {summary(res)} "
                    f"({time.time() - t0:.1f} s)")
        r.flushall()
        r.close()
    elapsed = time.time() - started
    load_end = os.getloadavg()[0]

    vers = versions()
    tbl, notes = table(results, peers)
    proc_tbl, proc_notes = proc_report.table(results, peers)
    checks = targets(results)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "full" if scale == 1 else f"{'quick' if args.quick else 'scaled'} (counts / {scale})"
    cores = os.cpu_count()
    counts = ", ".join(f"{k} {max(v // scale, 1):,}" for k, v in FULL_COUNTS.items())
    title = (f"no-op job processing, {cores} cores, Redis {redis_version} "
             f"({mode} run, {when})")
    plot_err = plot(results, peers, os.path.join(out_dir, "throughput.png"), title)

    md = [
        "# orijs_sync benchmark results",
        "",
        f"- date: {when}; {mode} run, {elapsed:.0f} s; `python bench/run.py {' '.join(cmd_args)}`",
        f"- machine: {cores} cores ({cpu_model()}), {platform.system()} {platform.release()}",
        f"- load average (1 min) {load_start:.2f} at the start, {load_end:.2f} at the end",
        f"- Redis {redis_version} on loopback, started by the run (no persistence), FLUSHALL between cells",
        f"- Python {vers['python']}: orijs_sync {vers.get('orijs')}, bullmq {vers.get('bullmq_py')}, "
        f"huey {vers.get('huey')}, rq {vers.get('rq')}, celery {vers.get('celery')}; "
        f"BullMQ for Node {vers.get('node')} "
        f"(node {vers.get('nodejs', '?')}), GroupMQ for Node {vers.get('groupmq')}",
        f"- counts: {counts}",
        "",
        "Each cell: the figure, then in brackets how many times better orijs_sync is on it",
        "(higher throughput, or lower latency and memory): ×2.00 means orijs_sync is twice as good,",
        "×0.50 means the peer is twice as good.",
        "",
        tbl,
        "",
    ]
    if notes:
        md += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    if proc_tbl:
        md += ["## Handlers in child processes (2 processes)", "",
               "In brackets: how many times better orijs_sync with `processes=2` is (in the",
               "threads row, process mode's gain over threads).", ""] + proc_tbl + [""]
        md += [f"- {n}" for n in proc_notes] + ([""] if proc_notes else [])
    md += ["## Targets (docs/benchmarks.md), judged on this run", ""] + checks + [""]
    md += ["## Method", "",
           "- sequential add: one `add` at a time, awaited (remove-on-complete).",
           "- bulk add: the jobs in chunks of 500 through each library's bulk call (remove-on-complete).",
           "- processing (every peer, every processing case): the jobs are put on a paused queue",
           "  (Huey, RQ: a list held aside under another key), untimed; the worker(s) are started and",
           "  waited for until each is blocked in Redis waiting for work (`CLIENT LIST`, flag `b`);",
           "  the clock starts at the resume (held list: RENAME back) and stops at the last completion",
           "  (`completed` listener; Huey: `SIGNAL_COMPLETE`; RQ: its success handler).",
           "- 4 processes: the same with 4 worker processes, all ready before the resume; time from the",
           "  resume to the last completion any of them reports.",
           "- request-response: add one job and wait for its result, sequentially; the worker",
           "  (concurrency 16) runs in the same process except for RQ.",
           "- emit: the OriJS event layer, `provider.emit(name, payload).result()` sequentially, the",
           "  subscribed handler (a no-op) in the same process.",
           "- group queue: N no-op jobs over 100 groups on a paused queue (untimed); one worker of",
           "  concurrency 16 (orijs_sync.groups.GroupWorker / GroupMQ's Worker) started, 1 s, resume;",
           "  timed from its first completion to its last (neither worker blocks in Redis while the",
           "  group queue is paused, so the resume is not a fair start); per-group order holds.",
           "- memory: jobs processed and kept (not removed); `MEMORY USAGE ... SAMPLES 0` summed over",
           "  each job's own keys (200 sampled), plus the completed set's memory shared out per job.",
           *proc_report.METHOD,
           "",
           "![processing throughput by concurrency](throughput.png)",
           ""]
    if plot_err:
        md.append(f"(plot not drawn: {plot_err})")
    with open(os.path.join(out_dir, "RESULTS.md"), "w") as fh:
        fh.write("\n".join(md))
    with open(os.path.join(out_dir, "results.json"), "w") as fh:
        json.dump({"date": when, "mode": mode, "cores": cores, "redis": redis_version,
                   "versions": vers, "results": results}, fh, indent=1, sort_keys=True)

    print(tbl)
    if notes:
        print()
        for n in notes:
            print(f"- {n}")
    if proc_tbl:
        print("\n" + "\n".join(proc_tbl + [f"- {n}" for n in proc_notes]))
    print()
    print("\n".join(checks))
    print(f"\nwrote {os.path.relpath(os.path.join(out_dir, 'RESULTS.md'), ROOT)}, "
          f"throughput.png, results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
