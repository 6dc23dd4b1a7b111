"""orijs_sync.groups for bench/run.py's group queue case: ``python -m
bench.peers.orijs_groups --case groups --url URL --n N --concurrency C --groups G``
fills N no-op jobs over G groups (untimed), then times one GroupWorker of
concurrency C from its construction to its last completion."""
from __future__ import annotations

import sys
import threading
import time

from orijs_sync.groups import GroupQueue, GroupWorker

from bench.peers import common


def groups(url: str, n: int, concurrency: int, group_count: int, timeout: float) -> dict:
    queue = GroupQueue("bench-groups", connection=url)
    for i in range(n):
        queue.add(group_id=f"g{i % group_count}", data={"i": i})
    lock = threading.Lock()
    done = threading.Event()
    state = {"count": 0, "last": 0.0}

    def on_completed(job, result) -> None:
        with lock:
            state["count"] += 1
            state["last"] = time.perf_counter()
            if state["count"] >= n:
                done.set()

    t0 = time.perf_counter()
    worker = GroupWorker(queue, lambda job: None, concurrency=concurrency)
    worker.on("completed", on_completed)
    worker.start()
    try:
        if not done.wait(timeout):
            return {"error": f"timed out at {state['count']}/{n}"}
    finally:
        worker.close()
        queue.close()
    return common.rate(n, state["last"] - t0, groups=group_count, concurrency=concurrency)


def main() -> None:
    argv = sys.argv[1:]
    group_count = 100
    if "--groups" in argv:
        at = argv.index("--groups")
        group_count = int(argv[at + 1])
        del argv[at:at + 2]
    args = common.parse_args(argv)
    common.emit(groups(args.url, args.n, args.concurrency, group_count, args.timeout))


if __name__ == "__main__":
    main()
