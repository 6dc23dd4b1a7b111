"""The handlers of the process-mode cases (``cpu_p2``, ``noop_p2`` in bench/run.py), one
module every Python peer imports by name: orijs_sync as ``"bench.peers.cpu_tasks:cpu_job"``,
RQ as ``"bench.peers.cpu_tasks.cpu_job"``, Huey and Celery register them as tasks.

Kept free of the harness (no Redis, no orijs_sync): a child process imports it.

    python -m bench.peers.cpu_tasks        # how long one cpu_job takes here
"""
from __future__ import annotations

import time

# A fixed amount of pure-Python integer work: about 20 ms of CPython 3.11 on the 2-core
# bench machine (best of several runs, about 114 ns an iteration). Fixed, not measured at
# run time, so every peer runs the same work; the time one job takes in each cell is
# reported beside it (``job_ms``).
ITERATIONS = 175_000


def burn(iterations: int) -> int:
    """A linear congruential sequence, ``iterations`` steps: deterministic, no allocation
    that grows, nothing a compiler could skip (the last value is returned)."""
    x = 1
    for _ in range(iterations):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def cpu_job(*_args, **_kwargs) -> int:
    """About 20 ms of CPU; its arguments (a Job, a task's arguments) are ignored."""
    return burn(ITERATIONS)


def noop(*_args, **_kwargs) -> None:
    return None


def job_ms(rounds: int = 3) -> float:
    """The best of ``rounds`` runs of one cpu_job in this process, in ms."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        burn(ITERATIONS)
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000.0, 2)


if __name__ == "__main__":
    print(f"cpu_job: {ITERATIONS:,} iterations, best of 7: {job_ms(7):.2f} ms")
