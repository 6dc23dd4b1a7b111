"""Getters, logs, progress, priorities, the events stream's length, legacy repeatable
jobs and deduplication keys, shared by orijs_sync and a real Node BullMQ, both ways.

Node side: tests/interop/node/driver.js (queueCalls and jobCalls call BullMQ's Queue and
Job methods by name; its Queue is made with skipMetasUpdate unless a test wants
BullMQ's meta write). Timeouts are failure guards only.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

from orijs_sync import FlowProducer, Queue, QueueEvents, Worker
from orijs_sync.testing import wait_until

GUARD = 30.0
STATE_CHECKS = ("is_delayed", "is_active", "is_waiting", "is_waiting_children",
                "is_completed", "is_failed")
NODE_CHECKS = ["isDelayed", "isActive", "isWaiting", "isWaitingChildren", "isCompleted",
               "isFailed"]


def node_calls(node, qname: str, *calls: Any, queue_opts: Any = None) -> List[Any]:
    """BullMQ ``queue[method](...args)`` for each ``(method, *args)``, in one Node process."""
    opts = {"skipMetasUpdate": True} if queue_opts is None else queue_opts
    return node("queueCalls", queue=qname, queueOpts=opts,
                calls=[{"method": method, "args": list(args)} for method, *args in calls])


def node_job_calls(node, qname: str, ids: List[str], *calls: Any) -> Dict[str, Any]:
    return node("jobCalls", queue=qname, ids=ids,
                calls=[{"method": method, "args": list(args)} for method, *args in calls])


def meta_as_node(queue: Queue) -> Dict[str, Any]:
    """Python's get_meta() in the shape of BullMQ's getMeta()."""
    meta = queue.get_meta()
    shaped = {"paused": meta.paused, "concurrency": meta.concurrency, "max": meta.max,
              "duration": None if meta.duration is None else int(meta.duration * 1000),
              "maxLenEvents": meta.max_len_events, "version": meta.version, **meta.other}
    return {key: value for key, value in shaped.items() if value is not None}


def python_getters(queue: Queue) -> List[Any]:
    """What ``NODE_GETTERS`` asks Node, asked of Python, in the same order and shape."""
    return [
        queue.get_job_counts(), queue.get_job_count_by_types("completed", "failed"),
        queue.get_job_count_by_types(), queue.get_waiting_count(), queue.get_active_count(),
        queue.get_delayed_count(), queue.get_completed_count(), queue.get_failed_count(),
        queue.get_prioritized_count(), queue.get_waiting_children_count(), queue.count(),
        {str(p): n for p, n in queue.get_counts_per_priority([0, 1, 3, 9, 4]).items()},
        queue.get_ranges(["waiting"], 0, -1, True),
        queue.get_ranges(["waiting", "delayed", "prioritized"], 0, -1, False),
        queue.get_ranges(["delayed"]), queue.get_ranges(["waiting"], 0, -2, True),
        queue.get_ranges(["completed", "failed", "active", "waiting-children", "paused"],
                         0, -1, True),
        [job.id for job in queue.get_waiting_children()], queue.is_maxed(),
        meta_as_node(queue), queue.get_version(),
    ]


NODE_GETTERS = [
    ("getJobCounts",), ("getJobCountByTypes", "completed", "failed"), ("getJobCountByTypes",),
    ("getWaitingCount",), ("getActiveCount",), ("getDelayedCount",), ("getCompletedCount",),
    ("getFailedCount",), ("getPrioritizedCount",), ("getWaitingChildrenCount",), ("count",),
    ("getCountsPerPriority", [0, 1, 3, 9, 4]),
    ("getRanges", ["waiting"], 0, -1, True),
    ("getRanges", ["waiting", "delayed", "prioritized"], 0, -1, False),
    ("getRanges", ["delayed"]), ("getRanges", ["waiting"], 0, -2, True),
    ("getRanges", ["completed", "failed", "active", "waiting-children", "paused"], 0, -1, True),
    ("getWaitingChildren",), ("isMaxed",), ("getMeta",), ("getVersion",),
]


def test_counts_ranges_meta_and_states_agree_on_jobs_both_sides_added(node, redis_url,
                                                                       namespace, r):
    qname = f"getters-{namespace}"
    release = threading.Event()

    def handler(job):
        if job.name == "bad":
            raise ValueError("bad")
        if job.name == "hold":
            release.wait(GUARD)

    with Queue(qname, connection=redis_url) as queue:
        queue.add("ok"), queue.add("bad")
        worker = Worker(qname, handler, connection=redis_url, concurrency=1).start()
        try:
            wait_until(lambda: queue.get_job_count_by_types("completed", "failed") == 2, GUARD)
            queue.add("hold")
            wait_until(lambda: queue.get_active_count() == 1, GUARD)
            node_calls(node, qname, ("add", "n-wait", {}, {}),
                       ("add", "n-delayed", {}, {"delay": 60000}),
                       ("add", "n-p3", {}, {"priority": 3}), ("add", "n-p1", {}, {"priority": 1}))
            queue.add("p-wait"), queue.add("p-delayed", delay=90)
            queue.add("p-p3", priority=3), queue.add("p-p9", priority=9)
            node("addFlow", queue=qname, name="n-parent",
                 children=[{"name": "c", "queue": f"kids-{namespace}"}])
            with FlowProducer(connection=redis_url) as flows:
                flows.add({"name": "p-parent", "queue_name": qname,
                           "children": [{"name": "c", "queue_name": f"kids-{namespace}"}]})
            assert node_calls(node, qname, *NODE_GETTERS) == python_getters(queue)
            ids = queue.get_ranges(["waiting", "delayed", "prioritized", "active", "completed",
                                    "failed", "waiting-children"], 0, -1)
            assert len(ids) == 13
            node_states = node_job_calls(node, qname, ids, *[(m,) for m in NODE_CHECKS])
            for job_id in ids:
                job = queue.get_job(job_id)
                assert node_states[job_id] == [getattr(job, c)() for c in STATE_CHECKS], job_id
            queue.pause()
            r.hset(queue.keys.meta, mapping={"concurrency": 1, "max": 5, "duration": 2000})
            assert node_calls(node, qname, *NODE_GETTERS) == python_getters(queue)
            assert queue.is_maxed() and queue.get_meta().duration == 2.0
        finally:
            release.set()
            worker.close()
        # a Node Queue writes its meta as it connects: a call a round trip later sees it
        _, node_meta = node_calls(node, qname, ("getVersion",), ("getMeta",), queue_opts={})
        assert queue.get_version() == "bullmq:5.81.5"
        assert node_meta == meta_as_node(queue)
        assert node_meta["maxLenEvents"] == 10000 and node_meta["paused"] is True


def test_logs_progress_and_priorities_both_ways(node, redis_url, namespace):
    qname = f"logs-{namespace}"
    with Queue(qname, connection=redis_url) as queue:
        node_id, *node_prio = node_calls(node, qname, ("add", "from-node", {}, {}),
                                         *[("add", f"n{i}", {}, {"priority": 2}) for i in range(3)])
        py_job = queue.add("from-python", {"x": 1}, size_limit=100)
        queue.add_job_log(node_id, "py 1")
        queue.add_job_log(node_id, "py 2", keep_logs=5)
        queue.update_job_progress(node_id, {"p": 1})
        queue.get_job(node_prio[2]).change_priority(2, lifo=True)
        got = node_calls(node, qname, ("getJobLogs", node_id), ("addJobLog", py_job.id, "n1"),
                         ("addJobLog", py_job.id, "n2"), ("addJobLog", py_job.id, "n3", 2),
                         ("updateJobProgress", py_job.id, 7),
                         ("getRanges", ["prioritized"], 0, -1, True))
        assert got[0] == {"logs": ["py 1", "py 2"], "count": 2}
        assert got[3] == 2
        assert got[5] == queue.get_ranges(["prioritized"], 0, -1, True) == \
            [node_prio[2], node_prio[0], node_prio[1]]
        assert queue.get_job_logs(py_job.id) == {"logs": ["n2", "n3"], "count": 2}
        assert queue.get_job(py_job.id).progress == 7
        assert node("getJob", queue=qname, id=node_id)["progress"] == {"p": 1}
        assert node("getJob", queue=qname, id=py_job.id)["opts"]["sizeLimit"] == 100
        queue.get_job(node_id).clear_logs(keep_logs=1)
        late = [queue.add(f"p{i}", priority=3).id for i in range(2)]
        node_job_calls(node, qname, [py_job.id], ("clearLogs",))
        node_job_calls(node, qname, [late[1]], ("changePriority", {"priority": 3, "lifo": True}))
        assert queue.get_job_logs(py_job.id)["count"] == 0
        assert node_calls(node, qname, ("getJobLogs", node_id))[0]["logs"] == ["py 2"]
        assert queue.get_ranges(["prioritized"], 0, -1, True) == \
            [node_prio[2], node_prio[0], node_prio[1], late[1], late[0]]


def test_python_trims_events_while_node_listens_and_node_trims_while_python_listens(
        node, redis_url, namespace, ready_file, r):
    qname = f"trim-{namespace}"
    with Queue(qname, connection=redis_url) as queue, \
            QueueEvents(qname, connection=redis_url) as events:
        job = queue.add("watched", {"n": 1})
        watching = node.start("watchJob", queue=qname, id=job.id, readyFile=str(ready_file))
        watching.wait_for_file(ready_file)
        queue.add_bulk([{"name": "fill"} for _ in range(150)])
        assert queue.trim_events(0) > 0 and r.xlen(queue.keys.events) < 150
        queue.update_job_progress(job.id, 50)
        with Worker(qname, lambda j: {"py": j.data}, connection=redis_url, concurrency=4):
            seen = watching.result()
            assert seen["progress"] == [50] and seen["returnvalue"] == {"py": {"n": 1}}
            wait_until(lambda: queue.get_completed_count() == 151, GUARD)
        queue.add_bulk([{"name": "fill"} for _ in range(150)])
        last = queue.add("last", {"n": 2})
        removed = node_calls(node, qname, ("trimEvents", 0))[0]
        assert removed > 0
        node_run = node("work", queue=qname, count=151, concurrency=4)
        assert not node_run["timedOut"]
        assert last.wait_until_finished(events, timeout=GUARD) == {"echo": {"n": 2}}


def test_events_max_len_set_by_either_side_is_honoured_by_both(node, redis_url, namespace, r):
    py_q, node_q = f"py-maxlen-{namespace}", f"node-maxlen-{namespace}"
    with Queue(py_q, connection=redis_url, events_max_len=30):
        meta, = node_calls(node, py_q, ("getMeta",))
        assert meta["maxLenEvents"] == 30
        node_calls(node, py_q, ("addBulk", [{"name": "n", "data": {}}] * 300))
        assert 30 <= r.xlen(f"bull:{py_q}:events") <= 30 + 200
    node_calls(node, node_q, ("getVersion",), ("getVersion",),
               queue_opts={"streams": {"events": {"maxLen": 40}}})
    with Queue(node_q, connection=redis_url) as queue:
        assert queue.get_meta().max_len_events == 40
        queue.add_bulk([{"name": "p"} for _ in range(300)])
        assert 40 <= r.xlen(queue.keys.events) <= 40 + 200


def test_node_legacy_repeatable_jobs_listed_and_removed_by_python(node, redis_url, namespace):
    qname = f"legacy-{namespace}"
    end = 4_102_444_800_000
    node_calls(node, qname, ("add", "every", {}, {"repeat": {"every": 60000}}),
               ("add", "cron", {}, {"repeat": {"pattern": "0 9 * * *", "tz": "Europe/Paris"},
                                    "jobId": "custom"}),
               ("add", "ending", {}, {"repeat": {"every": 30000, "endDate": end}}),
               ("add", "by-key", {}, {"repeat": {"every": 45000}}))
    with Queue(qname, connection=redis_url) as queue:
        node_list = node_calls(node, qname, ("getRepeatableJobs", 0, -1, True))[0]
        py_list = queue.get_repeatable_jobs(asc=True)
        assert len(py_list) == 4
        assert [{"key": j.key, "name": j.name, "next": j.next, "endDate": j.end_date,
                 "tz": j.tz, "pattern": j.pattern,
                 "every": None if j.every is None else str(int(j.every * 1000))}
                for j in py_list] == node_list
        by_key = next(j.key for j in py_list if j.name == "by-key")
        delayed_before = queue.get_delayed_count()
        assert delayed_before == 4
        assert queue.remove_repeatable("every", {"every": 60}) is True
        assert queue.remove_repeatable("cron", {"pattern": "0 9 * * *", "tz": "Europe/Paris"},
                                       job_id="custom") is True
        assert queue.remove_repeatable("ending", {"every": 30, "end_date": end}) is True
        assert queue.remove_repeatable_by_key(by_key) is True
        assert queue.remove_repeatable("every", {"every": 60}) is False
        assert node_calls(node, qname, ("getRepeatableJobs", 0, -1, True),
                          ("getDelayedCount",)) == [[], 0]
        assert queue.get_delayed_count() == 0


@pytest.mark.parametrize("py_side_adds", [True, False])
def test_deduplication_keys_both_ways(node, redis_url, namespace, py_side_adds):
    qname = f"dedup-{namespace}"
    with Queue(qname, connection=redis_url) as queue:
        if py_side_adds:
            job_id = queue.add("x", deduplication={"id": "d1"}).id
        else:
            job_id = node_calls(node, qname, ("add", "x", {}, {"deduplication": {"id": "d1"}}))[0]
        assert queue.get_deduplication_job_id("d1") == job_id
        assert node_calls(node, qname, ("getDeduplicationJobId", "d1")) == [job_id]
        if py_side_adds:
            assert node_calls(node, qname, ("removeDeduplicationKey", "d1")) == [1]
        else:
            assert queue.remove_deduplication_key("d1") is True
        assert queue.get_deduplication_job_id("d1") is None
        assert node_calls(node, qname, ("getDeduplicationJobId", "d1"),
                          ("add", "x", {}, {"deduplication": {"id": "d1"}})) != [None, job_id]
        assert queue.get_deduplication_job_id("d1") not in (None, job_id)


def test_a_node_legacy_repeatable_job_runs_on_through_python_and_node_workers(
        node, redis_url, namespace):
    """BullMQ 5 workers carry a legacy series on as a job scheduler (its md5 key is no
    legacy key shape); Python's workers do the same, so neither side ends it."""
    qname = f"legacy-runs-{namespace}"
    node_calls(node, qname, ("add", "tick", {"n": 1}, {"repeat": {"every": 1000}}))
    with Queue(qname, connection=redis_url) as queue:
        key = queue.get_repeatable_jobs()[0].key
        ran: List[str] = []
        with Worker(qname, lambda job: ran.append(job.id), connection=redis_url):
            wait_until(lambda: len(ran) >= 2, GUARD, "two runs on Python")
        assert all(run_id.startswith(f"repeat:{key}:") for run_id in ran)
        node_run = node("work", queue=qname, count=2, workTimeout=GUARD)
        assert not node_run["timedOut"]
        assert [r["id"].startswith(f"repeat:{key}:") for r in node_run["results"]] == [True, True]
        listed = queue.get_repeatable_jobs()
        assert [j.key for j in listed] == [key] and listed[0].every == 1.0
        assert queue.remove_repeatable("tick", {"every": 1}) is True


def python_waiting_reads(queue: Queue) -> List[Any]:
    """What ``NODE_WAITING_READS`` asks Node, asked of Python, in the same shape."""
    def ids(jobs: List[Any]) -> List[str]:
        return [job.id for job in jobs]
    return [
        queue.get_job_counts("waiting"), queue.get_job_counts("wait"),
        queue.get_job_counts("wait", "repeat"), queue.get_job_counts("waiting", "waiting"),
        queue.get_job_counts("delayed", "waiting"), queue.get_job_count_by_types("waiting"),
        queue.get_job_count_by_types("wait"), queue.get_waiting_count(),
        ids(queue.get_jobs("waiting")), ids(queue.get_jobs(["waiting", "waiting"])),
        ids(queue.get_jobs("wait")), ids(queue.get_jobs(["paused"])),
        ids(queue.get_jobs(["waiting"], 0, 0, asc=True)), ids(queue.get_waiting()),
    ]


NODE_WAITING_READS = [
    ("getJobCounts", "waiting"), ("getJobCounts", "wait"), ("getJobCounts", "wait", "repeat"),
    ("getJobCounts", "waiting", "waiting"), ("getJobCounts", "delayed", "waiting"),
    ("getJobCountByTypes", "waiting"), ("getJobCountByTypes", "wait"), ("getWaitingCount",),
    ("getJobs", "waiting"), ("getJobs", ["waiting", "waiting"]), ("getJobs", "wait"),
    ("getJobs", ["paused"]), ("getJobs", ["waiting"], 0, 0, True), ("getWaiting",),
]


def test_a_paused_queues_waiting_jobs_read_as_node_reads_them(node, redis_url, namespace):
    """"waiting" names the paused list too (a paused queue keeps its waiting jobs
    there), "wait" the wait list alone, in counts and in job lists, paused or not."""
    qname = f"waiting-{namespace}"
    with Queue(qname, connection=redis_url) as queue:
        queue.add("p1"), queue.add("p2", delay=60)
        node_calls(node, qname, ("add", "n1", {}, {}))
        queue.add("p3")
        running = python_waiting_reads(queue)
        assert running[0] == {"waiting": 3, "paused": 0}
        assert node_calls(node, qname, *NODE_WAITING_READS) == running
        node("pause", queue=qname)
        paused = python_waiting_reads(queue)
        assert paused[0] == {"waiting": 0, "paused": 3} and len(paused[-1]) == 3
        assert node_calls(node, qname, *NODE_WAITING_READS) == paused
        queue.resume()
        assert python_waiting_reads(queue) == running
