"""The size_limit job option (BullMQ's sizeLimit) and change_priority with lifo
(BullMQ's changePriority({priority, lifo}))."""
from __future__ import annotations

import pytest

from orijs_sync import FlowProducer, Queue, Worker, errors
from orijs_sync.testing import wait_until


def test_data_over_the_size_limit_is_refused_before_anything_is_written(queue, redis_url,
                                                                        qname, r):
    text = {"t": "é" * 10}                 # {"t":"éééééééééé"}: 8 + 20 bytes of UTF-8
    with pytest.raises(errors.InvalidArgument, match="data .* 28 bytes .* size_limit of 27"):
        queue.add("x", text, size_limit=27)
    with pytest.raises(errors.InvalidArgument, match="size_limit"):
        queue.add_bulk([{"name": "ok", "data": {}, "opts": {"size_limit": 100}},
                        {"name": "big", "data": {"t": "x" * 200}, "opts": {"size_limit": 100}}])
    with FlowProducer(connection=redis_url) as flows, \
            pytest.raises(errors.InvalidArgument, match="size_limit"):
        flows.add({"name": "parent", "queue_name": qname, "children": [
            {"name": "child", "queue_name": qname, "data": "x" * 50,
             "opts": {"size_limit": 10}}]})
    with pytest.raises(errors.InvalidArgument, match="size_limit"):
        queue.upsert_job_scheduler("big", every=60, template={"data": "x" * 50,
                                                              "opts": {"size_limit": 10}})
    assert r.keys(f"bull:{qname}:*") == []
    job = queue.add("x", text, size_limit=28)
    assert queue.get_job(job.id).opts["sizeLimit"] == 28     # stored as BullMQ stores it


def test_default_job_options_carry_the_size_limit(redis_url, qname):
    with Queue(qname, connection=redis_url, default_job_options={"size_limit": 10}) as queue:
        with pytest.raises(errors.InvalidArgument, match="size_limit of 10"):
            queue.add("x", {"long": "enough"})
        assert queue.add("x", [1]).opts["sizeLimit"] == 10


@pytest.mark.parametrize("bad,exc", [(0, errors.InvalidArgument), (-5, errors.InvalidArgument),
                                     ("10", errors.InvalidArgumentType),
                                     (1.5, errors.InvalidArgumentType)])
def test_bad_size_limits_are_refused(queue, bad, exc):
    with pytest.raises(exc, match="size_limit"):
        queue.add("x", {}, size_limit=bad)


def _waiting_names(queue):
    return [job.name for job in queue.get_waiting()]


def _prioritized_names(queue):
    return [job.name for job in queue.get_prioritized()]


def test_change_priority_with_and_without_lifo(queue, r):
    a, b, c = (queue.add(name, priority=2) for name in "abc")
    c.change_priority(2, lifo=True)                   # ahead of its priority's jobs
    assert _prioritized_names(queue) == ["c", "a", "b"]
    a.change_priority(2)                              # behind them
    assert _prioritized_names(queue) == ["c", "b", "a"]
    b.change_priority(1)
    assert _prioritized_names(queue) == ["b", "c", "a"]
    assert b.priority == 1 and queue.get_job(b.id).priority == 1
    x, y, z = (queue.add(name) for name in "xyz")
    z.change_priority(0, lifo=True)                   # the next one taken
    assert _waiting_names(queue) == ["z", "x", "y"]
    x.change_priority(0)
    assert _waiting_names(queue) == ["z", "y", "x"]
    c.change_priority(0)                              # prioritized -> wait
    assert _waiting_names(queue) == ["z", "y", "x", "c"]
    later = queue.add("later", delay=60)
    later.change_priority(3)                          # a delayed job stays delayed
    assert queue.get_job_state(later.id) == "delayed" and queue.get_job(later.id).priority == 3
    with pytest.raises(errors.InvalidArgumentType, match="lifo"):
        a.change_priority(1, lifo="yes")
    with pytest.raises(errors.InvalidArgument, match="priority"):
        a.change_priority(-1)
    assert queue.get_job(a.id).priority == 2


def test_a_lifo_change_is_the_next_one_a_worker_takes(queue, redis_url, qname):
    jobs = [queue.add(f"p{i}", priority=5) for i in range(3)]
    jobs[2].change_priority(5, lifo=True)
    ran = []
    with Worker(qname, lambda job: ran.append(job.name), connection=redis_url, concurrency=1):
        wait_until(lambda: len(ran) == 3, what="all three ran")
    assert ran == ["p2", "p0", "p1"]
