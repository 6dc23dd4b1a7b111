"""Fills the demo's queues and keeps a named Python worker running, to watch them in
bull-board (``node server.js`` in this folder; see README.md).

    REDIS_URL=redis://127.0.0.1:6379/0 python examples/dashboard/fill.py

Ctrl-C (or SIGTERM) stops the worker; the jobs stay for the board to show.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run from a checkout

from orijs_sync import Job, Queue, Worker  # noqa: E402

QUEUES = ("orijs-demo-emails", "orijs-demo-reports")


def handle(job: Job) -> Dict[str, Any]:
    if job.data.get("to", "").endswith("@invalid"):
        raise ValueError(f"no such domain for {job.data['to']}")
    return {"done": job.name}


def fill(url: str, prefix: str = "bull") -> List[Queue]:
    """Adds, on each demo queue: 5 jobs to process, one that fails, one delayed."""
    queues = []
    for name in QUEUES:
        queue = Queue(name, url, prefix=prefix)
        queue.add_bulk([{"name": "welcome", "data": {"to": f"user{i}@example.com"}}
                        for i in range(5)])
        queue.add("welcome", {"to": "ghost@invalid"})
        queue.add("digest", {"to": "later@example.com"}, delay=3600)
        queues.append(queue)
    return queues


def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    queues = fill(url)
    print(f"filled {', '.join(QUEUES)} on {url}; working them (Ctrl-C stops)")
    workers = [Worker(q.name, handle, url, worker_name="fill-demo", metrics={"max_data_points": 60})
               for q in queues[1:]]
    for worker in workers:
        worker.start()
    try:
        Worker(queues[0].name, handle, url, worker_name="fill-demo",
               metrics={"max_data_points": 60}).run()
    finally:
        for worker in workers:
            worker.close()
        for queue in queues:
            queue.close()


if __name__ == "__main__":
    main()
