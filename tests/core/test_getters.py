"""Queue getters after BullMQ's (counts, ranges, meta, is_maxed), job state checks,
logs and progress by job id, on a real Redis."""
from __future__ import annotations

import threading

import pytest

from orijs_sync import FlowProducer, Worker, errors
from orijs_sync.testing import wait_until


@pytest.fixture
def busy_queue(queue, redis_url, qname, namespace):
    """A queue with jobs in every state: 1 completed, 1 failed, 1 active (held by a
    Worker), 2 waiting, 1 delayed, 2 prioritized, 1 parent waiting for its child."""
    release = threading.Event()

    def handler(job):
        if job.name == "bad":
            raise ValueError("bad job")
        if job.name == "hold":
            release.wait(30)

    ids = {"done": queue.add("ok").id, "failed": queue.add("bad").id}
    worker = Worker(qname, handler, connection=redis_url, concurrency=1).start()
    try:
        wait_until(lambda: queue.get_job_counts("completed", "failed") ==
                   {"completed": 1, "failed": 1}, what="one completed and one failed")
        ids["active"] = queue.add("hold").id
        wait_until(lambda: queue.get_job_counts("active")["active"] == 1, what="hold active")
        ids["waiting"] = [queue.add("w1").id, queue.add("w2").id]
        ids["delayed"] = queue.add("later", delay=60).id
        ids["prioritized"] = [queue.add("p3", priority=3).id, queue.add("p5", priority=5).id]
        with FlowProducer(connection=redis_url) as flows:
            tree = flows.add({"name": "parent", "queue_name": qname, "children": [
                {"name": "child", "queue_name": f"children-{namespace}"}]})
        ids["parent"] = tree.job.id
        yield queue, ids
    finally:
        release.set()
        worker.close()


def test_counts_of_each_state_and_by_types(busy_queue, r):
    queue, ids = busy_queue
    assert (queue.get_waiting_count(), queue.get_active_count(), queue.get_delayed_count(),
            queue.get_prioritized_count(), queue.get_completed_count(),
            queue.get_failed_count(), queue.get_waiting_children_count()) == (2, 1, 1, 2, 1, 1, 1)
    assert queue.get_job_count_by_types("completed", "failed") == 2
    assert queue.get_job_count_by_types("completed", "completed") == 1
    assert queue.get_job_count_by_types() == 9
    assert [job.id for job in queue.get_waiting_children()] == [ids["parent"]]
    queue.pause()       # waiting jobs move to the paused list: still counted as waiting
    assert queue.get_waiting_count() == 2
    assert queue.get_job_count_by_types("waiting") == 2
    assert queue.get_job_counts("waiting", "paused") == {"waiting": 0, "paused": 2}
    with pytest.raises(errors.InvalidArgument, match="types"):
        queue.get_job_count_by_types("finished")
    with pytest.raises(errors.InvalidArgumentType, match="types"):
        queue.get_job_count_by_types(3)


def test_each_job_knows_its_state(busy_queue):
    queue, ids = busy_queue
    job = queue.get_job
    checks = ("is_delayed", "is_active", "is_waiting", "is_waiting_children", "is_completed",
              "is_failed")
    expected = {ids["delayed"]: "is_delayed", ids["active"]: "is_active",
                ids["waiting"][0]: "is_waiting", ids["parent"]: "is_waiting_children",
                ids["done"]: "is_completed", ids["failed"]: "is_failed",
                ids["prioritized"][0]: None}    # prioritized is none of them, as in BullMQ
    for job_id, which in expected.items():
        assert {name for name in checks if getattr(job(job_id), name)()} == \
            ({which} if which else set()), job_id


def test_is_maxed_follows_the_global_concurrency(busy_queue, r):
    queue, _ = busy_queue
    assert not queue.is_maxed()
    r.hset(queue.keys.meta, "concurrency", 1)
    assert queue.is_maxed()
    r.hset(queue.keys.meta, "concurrency", 2)
    assert not queue.is_maxed()
    r.hset(queue.keys.meta, "concurrency", "abc")     # another program's junk: not set
    assert not queue.is_maxed()


def test_counts_per_priority(queue):
    for priority in (0, 0, 1, 1, 1, 5):
        queue.add("x", priority=priority)
    assert queue.get_counts_per_priority([0, 1, 5, 7, 1]) == {0: 2, 1: 3, 5: 1, 7: 0}
    assert list(queue.get_counts_per_priority((5, 0))) == [5, 0]
    queue.pause()
    assert queue.get_counts_per_priority([0]) == {0: 2}      # the paused list
    assert queue.get_counts_per_priority([]) == {}
    for bad, exc in (("1", errors.InvalidArgumentType), ([-1], errors.InvalidArgument),
                     ([True], errors.InvalidArgumentType), ([1.5], errors.InvalidArgumentType),
                     ([2 ** 21], errors.InvalidArgument), (7, errors.InvalidArgumentType)):
        with pytest.raises(exc, match="priorities"):
            queue.get_counts_per_priority(bad)


def test_ranges_of_lists_and_sets_as_bullmq_reads_them(queue, r):
    waiting = [queue.add(f"w{i}").id for i in range(4)]
    delayed = [queue.add(f"d{i}", delay=60 + i).id for i in range(3)]
    assert queue.get_ranges("waiting") == waiting[::-1][:2]          # BullMQ's ranks 0..1
    assert queue.get_ranges(["waiting"], 0, -1, asc=True) == waiting
    assert queue.get_ranges(["wait"], 0, -1) == waiting[::-1]
    assert queue.get_ranges(["waiting"], 1, 2, asc=True) == waiting[1:3]
    assert queue.get_ranges(["waiting"], 0, -2, asc=True) == waiting[:3]
    assert queue.get_ranges(["waiting"], 0, -2) == waiting[::-1][:3]
    assert queue.get_ranges(["waiting"], 10, 20, asc=True) == []
    assert queue.get_ranges(["delayed"], 0, -1, asc=True) == delayed
    assert queue.get_ranges(["delayed"], 0, -1) == delayed[::-1]
    assert queue.get_ranges(["waiting", "delayed"], 0, 0, asc=True) == [waiting[0], delayed[0]]
    assert queue.get_ranges(["waiting", "wait"], 0, -1, asc=True) == waiting   # once each
    assert queue.get_ranges(["paused", "repeat"], 0, -1) == []
    # the same indexes read the same jobs as get_jobs
    assert [j.id for j in queue.get_jobs(["waiting"], 0, -2, asc=True)] == waiting[:3]
    with pytest.raises(errors.InvalidArgument, match="types"):
        queue.get_ranges(["done"])
    with pytest.raises(errors.InvalidArgumentType, match="end"):
        queue.get_ranges(["waiting"], 0, "1")
    with pytest.raises(errors.InvalidArgumentType, match="asc"):
        queue.get_ranges(["waiting"], asc=1)


def test_meta_and_version(queue, r):
    assert queue.get_meta().paused is False
    assert queue.get_version() is None
    queue.pause()
    r.hset(queue.keys.meta, mapping={"concurrency": "3", "max": "10", "duration": "1500",
                                     "opts.maxLenEvents": "500", "version": "bullmq:5.81.5",
                                     "custom": "x"})
    meta = queue.get_meta()
    assert (meta.paused, meta.concurrency, meta.max, meta.duration, meta.max_len_events,
            meta.version, meta.other) == (True, 3, 10, 1.5, 500, "bullmq:5.81.5", {"custom": "x"})
    assert queue.get_version() == "bullmq:5.81.5"


def test_logs_and_progress_by_job_id(queue, events, r):
    job = queue.add("x")
    assert queue.add_job_log(job.id, "one") == 1
    assert queue.add_job_log(job.id, "two") == 2
    assert queue.add_job_log(job.id, "three", keep_logs=2) == 2
    assert queue.get_job_logs(job.id)["logs"] == ["two", "three"]
    job.log("four")
    job.clear_logs(keep_logs=1)
    assert queue.get_job_logs(job.id) == {"logs": ["four"], "count": 1}
    job.clear_logs()
    assert queue.get_job_logs(job.id) == {"logs": [], "count": 0}
    assert not r.exists(queue.keys.logs(job.id))
    job.update_progress(10)
    assert job.progress == 10 and queue.get_job(job.id).progress == 10
    queue.update_job_progress(job.id, {"done": 40})
    assert queue.get_job(job.id).progress == {"done": 40}
    last = r.xrevrange(queue.keys.events, count=1)[0][1]
    assert last == {"event": "progress", "jobId": job.id, "data": '{"done":40}'}
    with pytest.raises(errors.JobNotFound):
        queue.add_job_log("missing", "line")
    with pytest.raises(errors.JobNotFound):
        queue.update_job_progress("missing", 1)
    for call, arg in ((lambda: queue.add_job_log(job.id, 3), "line"),
                      (lambda: queue.add_job_log(job.id, "x", keep_logs=-1), "keep_logs"),
                      (lambda: queue.add_job_log("", "x"), "job_id"),
                      (lambda: queue.update_job_progress(job.id, object()), "progress"),
                      (lambda: job.clear_logs(keep_logs="2"), "keep_logs")):
        with pytest.raises(errors.ValidationError, match=arg):
            call()
    assert queue.get_job_logs(job.id)["count"] == 0
