"""The events stream's length: Queue.trim_events and the events_max_len queue option
(BullMQ's trimEvents and streams.events.maxLen, kept in meta as opts.maxLenEvents)."""
from __future__ import annotations

import pytest

from orijs_sync import Queue, Worker, errors
from orijs_sync.testing import wait_until

NODE_SIZE = 100     # entries per stream node: an approximate trim removes whole nodes


def _fill(queue, jobs=300):
    queue.add_bulk([{"name": "x"} for _ in range(jobs)])     # "added" + "waiting" each


def test_trim_events_cuts_the_stream_to_about_max_len(queue, r):
    _fill(queue)
    before = r.xlen(queue.keys.events)
    assert before == 600
    removed = queue.trim_events(10)
    after = r.xlen(queue.keys.events)
    assert removed == before - after > 0
    assert 10 <= after <= 10 + NODE_SIZE
    assert r.xrevrange(queue.keys.events, count=1)[0][1]["event"] == "waiting"  # newest kept
    assert queue.trim_events(after) == 0
    for bad, exc in ((-1, errors.InvalidArgument), ("5", errors.InvalidArgumentType),
                     (True, errors.InvalidArgumentType), (None, errors.InvalidArgumentType)):
        with pytest.raises(exc, match="max_len"):
            queue.trim_events(bad)
    assert r.xlen(queue.keys.events) == after


def test_listeners_read_on_after_a_trim(queue, events, redis_url, qname):
    seen = []
    events.on("completed", lambda job_id, value: seen.append(job_id))
    _fill(queue, 150)
    queue.trim_events(0)
    with Worker(qname, lambda job: job.data.get("n"), connection=redis_url, concurrency=4):
        job = queue.add("last", {"n": 7})
        assert job.wait_until_finished(events, timeout=20) == 7
        wait_until(lambda: len(seen) == 151, what="every completion seen")


def test_events_max_len_is_stored_and_every_writer_trims_to_it(redis_url, qname, r):
    with Queue(qname, connection=redis_url, events_max_len=20) as queue:
        assert r.hget(queue.keys.meta, "opts.maxLenEvents") == "20"
        assert queue.get_meta().max_len_events == 20
        _fill(queue)            # the adds trim
        assert r.xlen(queue.keys.events) <= 20 + 2 * NODE_SIZE
        r.delete(queue.keys.events)
        with Worker(qname, lambda job: None, connection=redis_url, concurrency=4):
            wait_until(lambda: queue.get_completed_count() == 300, 30, "all completed")
        assert r.xlen(queue.keys.events) <= 20 + 2 * NODE_SIZE   # and so do the finishes
    with Queue(qname, connection=redis_url) as again:              # None: left as stored
        assert again.get_meta().max_len_events == 20
    with Queue(qname, connection=redis_url, events_max_len=0):
        assert r.hget(f"bull:{qname}:meta", "opts.maxLenEvents") == "0"


@pytest.mark.parametrize("bad,exc", [(-1, errors.InvalidArgument),
                                     (1.5, errors.InvalidArgumentType),
                                     ("100", errors.InvalidArgumentType)])
def test_a_bad_events_max_len_is_refused_before_anything_is_written(redis_url, qname, r,
                                                                    bad, exc):
    with pytest.raises(exc, match="events_max_len"):
        Queue(qname, connection=redis_url, events_max_len=bad)
    assert not r.exists(f"bull:{qname}:meta")
