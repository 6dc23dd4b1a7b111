#!/usr/bin/env python
"""What one events thread costs per stream entry: the CPU of reading a queue's events
(``XREAD`` over 64 streams) and delivering them, as a ``QueueEvents`` whose only reader
is a follower of outcomes (the event provider's ``emit`` futures) does it.

    python bench/bench_events_read.py                     # a redis-server it starts
    python bench/bench_events_read.py --emits 4000 --url redis://...

A provider subscribed to 64 event types emits ``--emits`` times (five entries each:
added, waiting, active, completed, drained or the like). Then one events thread's read
and delivery is timed over every entry from the start of each stream, ``--repeats``
times (best kept): CPU of the reading thread per entry, in microseconds. Every entry is
looked at; only those a reader wants (here the outcomes) are made into events. Prints
one line; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from orijs_sync import QueueEvents  # noqa: E402
from orijs_sync.events import BullMQEventProvider  # noqa: E402
from orijs_sync.testing import delete_keys, local_redis  # noqa: E402
from orijs_sync.waits.event_tailer import Tailer  # noqa: E402

TYPES = 64     # one events thread's share of streams


def fill(url: str, prefix: str, emits: int) -> None:
    names = [f"t{i}" for i in range(TYPES)]
    with BullMQEventProvider(url, queue_prefix=prefix,
                             default_job_options={"remove_on_complete": True}) as provider:
        for name in names:
            provider.subscribe(name, lambda message: message.payload)
        for n in range(emits):
            provider.emit(names[n % TYPES], {"n": n}).result(timeout=30)


def read_all(events: QueueEvents, tailer: Tailer) -> int:
    """Read and deliver every entry of every stream, from its start; the entries read."""
    positions = {stream: "0" for stream in events._streams}
    total = 0
    while True:
        reply = tailer.blocking.xread(positions, 1, 100)
        if not reply:
            return total
        for stream, entries in reply:
            events._deliver(stream, entries)
            positions[stream] = entries[-1][0]
            total += len(entries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emits", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    prefix = f"read-{uuid.uuid4().hex[:8]}"
    with local_redis(args.url) as url:
        try:
            fill(url, prefix, args.emits)
            events = QueueEvents([f"{prefix}.t{i}" for i in range(TYPES)], url,
                                 last_event_id="0", autorun=False)
            outcomes = [0]
            events._follow(lambda ev: outcomes.__setitem__(0, outcomes[0] + 1),
                           ("completed", "failed", "removed"))
            tailer = Tailer(events, 0)
            best, entries = float("inf"), 0
            for _ in range(args.repeats):
                started = time.thread_time()
                entries = read_all(events, tailer)
                best = min(best, time.thread_time() - started)
            tailer.blocking.close()
            events.close()
        finally:
            delete_keys(url, f"bull:{prefix}.*")
    print(f"{entries} entries over {TYPES} streams ({outcomes[0] // args.repeats} outcomes): "
          f"{best / entries * 1e6:.2f} µs of CPU per entry (best of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
