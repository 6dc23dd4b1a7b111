"""The process-mode part of bench/run.py's report: handlers in child processes, cases
``cpu_p2`` (about 20 ms of CPU a job) and ``noop_p2`` (no-op jobs: the per-job cost of
crossing to a child), two processes each, beside the peers' own process models.

Its table compares every row with orijs_sync's process mode (``orijs_proc``); in the
threads row the ratio is process mode's gain over threads.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

CASES = ("cpu_p2", "noop_p2")
BASE = "orijs_proc"
LABELS = {
    "orijs": "orijs_sync, threads (concurrency 2)",
    "orijs_proc": "orijs_sync, processes=2",
    "rq": "RQ Worker (a fork per job), 2 workers",
    "celery": "Celery prefork, concurrency 2",
    "huey": "Huey process workers (-k process -w 2)",
    "node": "BullMQ (Node) sandboxed processor, concurrency 2",
}
ORDER = ["orijs", "orijs_proc", "rq", "celery", "huey", "node"]

# column: (case, field, label, higher is better, or None: no ratio)
COLUMNS = [
    ("cpu_p2", "ops_per_s", "CPU jobs /s", True),
    ("cpu_p2", "job_ms", "one CPU job alone, ms", None),
    ("cpu_p2", "child_rss_mb", "child RSS MB", None),
    ("cpu_p2", "child_pss_mb", "child PSS MB", None),
    ("noop_p2", "ops_per_s", "no-op jobs /s", True),
    ("noop_p2", "child_rss_mb", "child RSS MB (no-op)", None),
]


def _value(results: Dict, peer: str, case: str, field: str) -> Optional[float]:
    v = results.get(peer, {}).get(case, {}).get(field)
    return float(v) if isinstance(v, (int, float)) else None


def _cell(results: Dict, peer: str, case: str, field: str, higher: Optional[bool]) -> str:
    v = _value(results, peer, case, field)
    if v is None:
        return "error" if "error" in results.get(peer, {}).get(case, {}) else "–"
    cell = f"{v:,.1f}" if field != "ops_per_s" else f"{v:,.0f}"
    base = _value(results, BASE, case, field)
    if higher is not None and peer != BASE and base and v:
        cell += f" (×{base / v if higher else v / base:.2f})"
    return cell


def _notes(results: Dict, peers: List[str]) -> List[str]:
    notes = []
    for peer in peers:
        for case in CASES:
            res = results.get(peer, {}).get(case, {})
            why = res.get("error") or res.get("unsupported")
            if why:
                notes.append(f"{LABELS.get(peer, peer)}, {case}: {why}")
    threads = _value(results, "orijs", "cpu_p2", "ops_per_s")
    procs = _value(results, BASE, "cpu_p2", "ops_per_s")
    if threads and procs:
        notes.append(f"process mode on CPU jobs: {procs / threads:.2f} × threads "
                     f"({procs:,.0f} against {threads:,.0f} jobs/s)")
    return notes


def table(results: Dict[str, Dict[str, Any]], peers: List[str]) -> Tuple[List[str], List[str]]:
    """The markdown table's lines and its notes; ([], []) when no peer ran these cases."""
    shown = [p for p in ORDER if p in peers and any(c in results.get(p, {}) for c in CASES)]
    if not shown:
        return [], []
    rows = ["| peer | " + " | ".join(c[2] for c in COLUMNS) + " |",
            "|---|" + "---:|" * len(COLUMNS)]
    for peer in shown:
        cells = [_cell(results, peer, case, field, higher) for case, field, _, higher in COLUMNS]
        rows.append(f"| {LABELS[peer]} | " + " | ".join(cells) + " |")
    return rows, _notes(results, shown)


METHOD = [
    "- handlers in child processes (`cpu_p2`, `noop_p2`): two processes, concurrency 2; the",
    "  handler `bench.peers.cpu_tasks.cpu_job` (a fixed integer loop, about 20 ms of CPython",
    "  here; BullMQ for Node runs the same loop in JavaScript, calibrated on its own to about",
    "  20 ms: the same time, not the same instructions) or `noop`. Queue filled while paused",
    "  or held (untimed), workers ready, timed from the resume to the last completion.",
    "  orijs_sync and BullMQ first run 4 warm-up jobs (their children up); Celery's pool and",
    "  Huey's workers start with them; RQ forks a work horse per job, which is its cost.",
    "  Child RSS / PSS: each handler child's peak `VmRSS` / `Pss` (/proc), sampled every",
    "  0.25 s by the peer, averaged over the children seen (RQ: its work horses).",
    "  Celery: Redis broker, results disabled; Huey, Celery: counted in the child (shared",
    "  memory); RQ: in the worker once its horse has exited.",
]
