"""orijs_sync.groups for bench/run.py's group queue case: ``python -m
bench.peers.orijs_groups --case groups --url URL --n N --concurrency C --groups G``
fills N no-op jobs over G groups on a paused queue (untimed), starts one GroupWorker
of concurrency C, waits 1 s, resumes, and times from its first completion to its
last (a paused group queue is looked at again only every so often, by both
libraries, and neither worker blocks in Redis while paused, so the resume itself
is not a fair start: the first completion is)."""
from __future__ import annotations

import sys
import time

from orijs_sync.groups import GroupQueue, GroupWorker

from bench.peers import common


def groups(url: str, n: int, concurrency: int, group_count: int, timeout: float) -> dict:
    queue = GroupQueue("bench-groups", connection=url)
    queue.pause()
    for i in range(n):
        queue.add(group_id=f"g{i % group_count}", data={"i": i})
    completions = common.Completions(n)
    worker = GroupWorker(queue, lambda job: None, concurrency=concurrency)
    worker.on("completed", completions)
    worker.start()
    try:
        time.sleep(1.0)
        queue.resume()
        if not completions.wait(timeout):
            return {"error": f"timed out at {completions.count}/{n}"}
    finally:
        worker.close()
        queue.close()
    return common.rate(n - 1, completions.last - completions.first, groups=group_count,
                       concurrency=concurrency)


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
