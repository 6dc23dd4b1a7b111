"""orijs_sync.groups for bench/run.py's group queue case: ``python -m
bench.peers.orijs_groups --case groups --url URL --n N --concurrency C --groups G``
fills N no-op jobs over G groups (untimed), then times one GroupWorker of
concurrency C from its construction to its last completion."""
from __future__ import annotations

import sys
import time

from orijs_sync.groups import GroupQueue, GroupWorker

from bench.peers import common


def groups(url: str, n: int, concurrency: int, group_count: int, timeout: float) -> dict:
    queue = GroupQueue("bench-groups", connection=url)
    for i in range(n):
        queue.add(group_id=f"g{i % group_count}", data={"i": i})
    completions = common.Completions(n)
    t0 = time.perf_counter()
    worker = GroupWorker(queue, lambda job: None, concurrency=concurrency)
    worker.on("completed", completions)
    worker.start()
    try:
        if not completions.wait(timeout):
            return {"error": f"timed out at {completions.count}/{n}"}
    finally:
        worker.close()
        queue.close()
    return common.rate(n, completions.last - t0, groups=group_count, concurrency=concurrency)


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
