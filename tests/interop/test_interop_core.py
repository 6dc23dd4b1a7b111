"""orijs_sync and a real Node BullMQ v5 on one Redis, in both directions.

The Node side is tests/interop/node/driver.js (``node`` fixture, see conftest.py).
Its worker returns ``{"echo": data}`` and throws ``Error(data.message)`` for job
names starting with "fail". The Python handlers below do the same kind of thing,
so each side can tell the other's results apart.

Timeouts here are failure guards only; no assertion depends on timing.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List

import pytest

from orijs_sync import Job, Queue, QueueEvents, Worker
from orijs_sync.errors import JobFailed
from orijs_sync.testing import wait_until

GUARD = 30.0  # seconds: how long a wait may take before the test fails

COUNT_KEYS = ("active", "completed", "delayed", "failed", "paused", "prioritized", "waiting",
              "waiting-children")

DATA = {
    "to": "a@example.com",
    "n": 3,
    "price": 12.5,
    "flags": [True, False, None],
    "nested": {"text": "h\u00e9llo \u2713 \u4e16\u754c", "empty": {}, "list": []},
}


class Collector:
    """A QueueEvents listener: remembers ``value`` per job id; waits for ids."""

    def __init__(self) -> None:
        self.values: Dict[str, Any] = {}
        self._cv = threading.Condition()

    def __call__(self, job_id: str, value: Any) -> None:
        with self._cv:
            self.values[str(job_id)] = value
            self._cv.notify_all()

    def wait_for(self, ids: Iterable[str], timeout: float = GUARD) -> Dict[str, Any]:
        wanted = [str(i) for i in ids]
        with self._cv:
            arrived = self._cv.wait_for(lambda: all(i in self.values for i in wanted), timeout)
            assert arrived, (f"events for {wanted} did not all arrive within {timeout} s; "
                             f"got {sorted(self.values)}")
            return {i: self.values[i] for i in wanted}


def python_handler(job: Job) -> Any:
    """The Python worker's handler: fails "fail*" jobs, echoes the rest with its own marks."""
    if job.name.startswith("fail"):
        raise ValueError(job.data.get("message", "python failed"))
    return {"py": job.data, "name": job.name, "id": job.id}


def by_id(results: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The final outcome of each job in a Node ``work`` reply."""
    return {r["id"]: r for r in results if r["final"]}


# ---------------------------------------------------------------------------
# Python Queue.add -> Node Worker -> Python get_job / QueueEvents
# ---------------------------------------------------------------------------

def test_python_add_node_worker_python_reads_results(node, redis_url, namespace):
    name = f"interop-{namespace}"
    with Queue(name, connection=redis_url) as queue, \
            QueueEvents(name, connection=redis_url) as events:
        completed, failed = Collector(), Collector()
        events.on("completed", completed)
        events.on("failed", failed)

        ok = queue.add("send", DATA)
        bad = queue.add("fail-send", {"message": "node refused it"})

        reply = node("work", queue=name, count=2)
        assert not reply["timedOut"], reply
        outcomes = by_id(reply["results"])
        assert outcomes[ok.id]["status"] == "completed"
        assert outcomes[ok.id]["returnvalue"] == {"echo": DATA}
        assert outcomes[bad.id]["status"] == "failed"
        assert outcomes[bad.id]["failedReason"] == "node refused it"

        # QueueEvents saw what the Node worker wrote to the events stream.
        assert completed.wait_for([ok.id]) == {ok.id: {"echo": DATA}}
        assert failed.wait_for([bad.id]) == {bad.id: "node refused it"}

        # get_job reads what the Node worker stored in the job hash.
        done = queue.get_job(ok.id)
        assert done is not None
        assert done.name == "send"
        assert done.data == DATA
        assert done.returnvalue == {"echo": DATA}
        assert done.failed_reason is None
        assert done.attempts_made == 1
        assert done.processed_on is not None and done.finished_on is not None
        assert done.timestamp <= done.processed_on <= done.finished_on
        assert done.get_state() == "completed"

        lost = queue.get_job(bad.id)
        assert lost is not None
        assert lost.failed_reason == "node refused it"
        assert lost.attempts_made == 1
        assert lost.finished_on is not None
        assert lost.stacktrace and "node refused it" in lost.stacktrace[0]
        assert lost.get_state() == "failed"

        # wait_until_finished on jobs that already finished.
        assert ok.wait_until_finished(events, timeout=GUARD) == {"echo": DATA}
        with pytest.raises(JobFailed) as caught:
            bad.wait_until_finished(events, timeout=GUARD)
        assert caught.value.failed_reason == "node refused it"

        counts = queue.get_job_counts()
        assert counts["completed"] == 1 and counts["failed"] == 1


def test_python_wait_until_finished_while_node_works(node, redis_url, namespace):
    """The Python wait starts before the Node worker does, so the event settles it."""
    name = f"interop-{namespace}"
    with Queue(name, connection=redis_url) as queue, \
            QueueEvents(name, connection=redis_url) as events:
        job = queue.add("send", {"k": "v"})
        outcome: Dict[str, Any] = {}

        def wait() -> None:
            try:
                outcome["value"] = job.wait_until_finished(events, timeout=GUARD)
            except BaseException as exc:  # noqa: BLE001 - reported by the assert below
                outcome["error"] = exc

        waiter = threading.Thread(target=wait)
        waiter.start()
        try:
            reply = node("work", queue=name, count=1)
        finally:
            waiter.join(GUARD + 5)
        assert not waiter.is_alive()
        assert not reply["timedOut"], reply
        assert outcome == {"value": {"echo": {"k": "v"}}}


def test_python_job_options_are_honoured_by_node(node, redis_url, namespace):
    """attempts/backoff, priority, delay, job_id and remove_on_complete as Python writes them."""
    base = f"interop-{namespace}"

    # attempts + backoff: Node retries a failing job as many times as Python asked.
    with Queue(f"{base}-retry", connection=redis_url) as queue:
        job = queue.add("fail-retry", {"message": "again"}, attempts=3,
                        backoff={"type": "fixed", "delay": 0.05})
        reply = node("work", queue=f"{base}-retry", count=1)
        assert not reply["timedOut"], reply
        attempts = [r for r in reply["results"] if r["id"] == job.id]
        assert [r["final"] for r in attempts] == [False, False, True]
        stored = queue.get_job(job.id)
        assert stored.attempts_made == 3
        assert stored.failed_reason == "again"
        assert stored.get_state() == "failed"
        seen = node("getJob", queue=f"{base}-retry", id=job.id)
        assert seen["opts"]["attempts"] == 3
        assert seen["opts"]["backoff"] == {"type": "fixed", "delay": 50}
        assert seen["attemptsMade"] == 3

    # priority: a Node worker with concurrency 1 takes them lowest number first.
    with Queue(f"{base}-prio", connection=redis_url) as queue:
        for priority in (3, 1, 2):
            queue.add("prio", {"p": priority}, job_id=f"prio-{priority}", priority=priority)
        assert queue.get_job_counts("prioritized") == {"prioritized": 3}
        reply = node("work", queue=f"{base}-prio", count=3, concurrency=1)
        assert not reply["timedOut"], reply
        assert [r["id"] for r in reply["results"]] == ["prio-1", "prio-2", "prio-3"]
        assert node("getJob", queue=f"{base}-prio", id="prio-2")["priority"] == 2

    # delay (seconds in Python, milliseconds in Redis).
    with Queue(f"{base}-delay", connection=redis_url) as queue:
        job = queue.add("later", {"d": 1}, delay=0.3)
        assert queue.get_job_counts("delayed") == {"delayed": 1}
        reply = node("work", queue=f"{base}-delay", count=1)
        assert not reply["timedOut"], reply
        seen = node("getJob", queue=f"{base}-delay", id=job.id)
        assert seen["opts"]["delay"] == 300  # (the hash's "delay" is zeroed on promotion)
        assert seen["processedOn"] >= seen["timestamp"] + 300
        assert seen["returnvalue"] == {"echo": {"d": 1}}

    # remove_on_complete: the Node worker deletes the job when it completes.
    with Queue(f"{base}-rm", connection=redis_url) as queue:
        job = queue.add("gone", {}, job_id="gone-1", remove_on_complete=True)
        kept = queue.add("kept", {})
        reply = node("work", queue=f"{base}-rm", count=2)
        assert not reply["timedOut"], reply
        assert job.id == "gone-1"
        assert queue.get_job("gone-1") is None
        assert queue.get_job(kept.id).returnvalue == {"echo": {}}
        assert queue.get_job_counts("completed") == {"completed": 1}


# ---------------------------------------------------------------------------
# Node Queue.add -> Python Worker -> Node waitUntilFinished / getJob
# ---------------------------------------------------------------------------

def test_node_add_python_worker_node_wait_resolves(node, redis_url, namespace, ready_file):
    name = f"interop-{namespace}"
    added = node("add", queue=name, name="greet", data=DATA)
    job_id = added["id"]

    waiting = node.start("waitUntilFinished", queue=name, id=job_id, waitTimeout=GUARD,
                         readyFile=str(ready_file))
    waiting.wait_for_file(ready_file)  # Node's QueueEvents listens before Python works

    with Worker(name, python_handler, connection=redis_url, concurrency=4):
        reply = waiting.result()
    expected = {"py": DATA, "name": "greet", "id": job_id}
    assert reply == {"returnvalue": expected}

    seen = node("getJob", queue=name, id=job_id)
    assert seen["state"] == "completed"
    assert seen["returnvalue"] == expected
    assert seen["data"] == DATA
    assert seen["attemptsMade"] == 1
    assert seen["failedReason"] is None
    assert seen["processedOn"] is not None and seen["finishedOn"] is not None
    assert seen["timestamp"] <= seen["processedOn"] <= seen["finishedOn"]


def test_python_exception_is_failed_reason_in_node(node, redis_url, namespace, ready_file):
    name = f"interop-{namespace}"
    job_id = node("add", queue=name, name="fail-py", data={"message": "python says no"})["id"]
    waiting = node.start("waitUntilFinished", queue=name, id=job_id, waitTimeout=GUARD,
                         readyFile=str(ready_file))
    waiting.wait_for_file(ready_file)

    with Worker(name, python_handler, connection=redis_url):
        reply = waiting.result()
    assert reply == {"error": "python says no"}

    seen = node("getJob", queue=name, id=job_id)
    assert seen["state"] == "failed"
    assert seen["failedReason"] == "python says no"
    assert seen["attemptsMade"] == 1
    assert seen["finishedOn"] is not None
    assert isinstance(seen["stacktrace"], list) and len(seen["stacktrace"]) == 1
    assert "ValueError" in seen["stacktrace"][0]
    assert "python says no" in seen["stacktrace"][0]
    assert seen["returnvalue"] is None


def test_node_retry_options_are_honoured_by_python(node, redis_url, namespace, ready_file):
    """attempts + backoff written by Node: the Python worker retries, Node sees the total."""
    name = f"interop-{namespace}"
    job_id = node("add", queue=name, name="fail-twice", data={"message": "still no"},
                  opts={"attempts": 2, "backoff": {"type": "fixed", "delay": 50}})["id"]
    waiting = node.start("waitUntilFinished", queue=name, id=job_id, waitTimeout=GUARD,
                         readyFile=str(ready_file))
    waiting.wait_for_file(ready_file)
    with Worker(name, python_handler, connection=redis_url):
        reply = waiting.result()
    assert reply == {"error": "still no"}
    seen = node("getJob", queue=name, id=job_id)
    assert seen["state"] == "failed"
    assert seen["attemptsMade"] == 2
    assert seen["failedReason"] == "still no"


def test_node_priority_delay_and_job_id_are_honoured_by_python(node, redis_url, namespace):
    name = f"interop-{namespace}"
    for priority in (3, 1, 2):
        node("add", queue=name, name="prio", data={"p": priority},
             opts={"priority": priority, "jobId": f"prio-{priority}"})

    order: List[str] = []
    lock = threading.Lock()

    def handler(job: Job) -> Any:
        with lock:
            order.append(job.id)
        return python_handler(job)

    with Queue(name, connection=redis_url) as queue, \
            QueueEvents(name, connection=redis_url) as events:
        assert queue.get_job_counts("prioritized") == {"prioritized": 3}
        assert queue.get_job("prio-2").priority == 2
        with Worker(name, handler, connection=redis_url, concurrency=1):
            for job_id in ("prio-1", "prio-2", "prio-3"):
                queue.get_job(job_id).wait_until_finished(events, timeout=GUARD)
            assert order == ["prio-1", "prio-2", "prio-3"]

            # A delayed job added by Node while the Python worker idles.
            delayed_id = node("add", queue=name, name="later", data={}, opts={"delay": 300})["id"]
            assert queue.get_job(delayed_id).wait_until_finished(events, timeout=GUARD) == \
                {"py": {}, "name": "later", "id": delayed_id}
    assert order == ["prio-1", "prio-2", "prio-3", delayed_id]

    seen = node("getJob", queue=name, id=delayed_id)
    assert seen["state"] == "completed"
    assert seen["opts"]["delay"] == 300
    assert seen["processedOn"] >= seen["timestamp"] + 300
    assert seen["returnvalue"] == {"py": {}, "name": "later", "id": delayed_id}


def test_custom_prefix_both_ways(node, redis_url, namespace):
    prefix = f"{namespace}pfx"
    name = f"interop-{namespace}"
    with Queue(name, connection=redis_url, prefix=prefix) as queue, \
            QueueEvents(name, connection=redis_url, prefix=prefix) as events:
        py_job = queue.add("from-python", {"side": "py"})
        reply = node("work", queue=name, prefix=prefix, count=1)
        assert not reply["timedOut"], reply
        assert queue.get_job(py_job.id).returnvalue == {"echo": {"side": "py"}}

        node_id = node("add", queue=name, prefix=prefix, name="from-node", data={"side": "node"})["id"]
        with Worker(name, python_handler, connection=redis_url, prefix=prefix):
            queue.get_job(node_id).wait_until_finished(events, timeout=GUARD)
        seen = node("getJob", queue=name, prefix=prefix, id=node_id)
        assert seen["returnvalue"] == {"py": {"side": "node"}, "name": "from-node", "id": node_id}
    # Nothing landed under the default prefix.
    assert node("counts", queue=name) == {k: 0 for k in COUNT_KEYS}


# ---------------------------------------------------------------------------
# Node getJobCounts() and Python get_job_counts() agree
# ---------------------------------------------------------------------------

def assert_counts_agree(node, queue: Queue, expected: Dict[str, int]) -> None:
    from_node = node("counts", queue=queue.name)
    from_python = queue.get_job_counts()
    assert from_python == from_node, f"python {from_python} != node {from_node}"
    assert from_python == {k: expected.get(k, 0) for k in COUNT_KEYS}


def test_job_counts_agree_on_a_queue_both_sides_used(node, redis_url, namespace):
    name = f"interop-{namespace}"
    with Queue(name, connection=redis_url) as queue, \
            QueueEvents(name, connection=redis_url) as events:
        assert_counts_agree(node, queue, {})

        # 1. Jobs from both sides, processed by a Python worker.
        ids = [node("add", queue=name, name="ok", data={"from": "node"})["id"],
               node("add", queue=name, name="fail-a", data={"message": "a"})["id"],
               queue.add("ok", {"from": "py"}).id,
               queue.add("fail-b", {"message": "b"}).id]
        with Worker(name, python_handler, connection=redis_url, concurrency=4):
            finished = Collector()
            for job_id in ids:
                job = queue.get_job(job_id)
                try:
                    job.wait_until_finished(events, timeout=GUARD)
                    finished(job_id, "completed")
                except JobFailed:
                    finished(job_id, "failed")
        assert [finished.values[i] for i in ids] == ["completed", "failed", "completed", "failed"]
        assert_counts_agree(node, queue, {"completed": 2, "failed": 2})

        # 2. Python adds, a Node worker processes.
        for job_name in ("ok", "ok", "fail-c"):
            queue.add(job_name, {"message": "c"})
        reply = node("work", queue=name, count=3)
        assert not reply["timedOut"], reply
        assert_counts_agree(node, queue, {"completed": 4, "failed": 3})

        # 3. A Python job held active while both sides add jobs that stay put.
        started, release = threading.Event(), threading.Event()

        def holder(job: Job) -> Any:
            started.set()
            assert release.wait(GUARD), "the test never released the held job"
            return "released"

        held = queue.add("hold", {})
        with Worker(name, holder, connection=redis_url, concurrency=1):
            assert started.wait(GUARD), "the Python worker did not start the held job"
            queue.add("w1", {})
            queue.add("w2", {})
            node("add", queue=name, name="w3", data={})
            queue.add("d1", {}, delay=3600)
            node("add", queue=name, name="d2", data={}, opts={"delay": 3_600_000})
            queue.add("p1", {}, priority=5)
            node("add", queue=name, name="p2", data={}, opts={"priority": 2})
            flow = node("addFlow", queue=name, name="parent", data={},
                        children=[{"name": "child", "data": {}}])
            assert len(flow["children"]) == 1
            standing = {"active": 1, "completed": 4, "failed": 3, "waiting": 4, "delayed": 2,
                        "prioritized": 2, "waiting-children": 1}
            assert_counts_agree(node, queue, standing)

            # Paused by Node: both sides still agree, the Python worker takes nothing new.
            assert node("pause", queue=name) == {"paused": True}
            paused = dict(standing, waiting=0, paused=4)
            assert_counts_agree(node, queue, paused)
            release.set()
            assert held.wait_until_finished(events, timeout=GUARD) == "released"
        paused.update(active=0, completed=5)
        assert_counts_agree(node, queue, paused)

        # Resumed by Node.
        assert node("resume", queue=name) == {"paused": False}
        assert_counts_agree(node, queue, dict(paused, waiting=4, paused=0))

        # Counts of chosen types agree too.
        wanted = ["completed", "failed", "delayed", "prioritized"]
        assert queue.get_job_counts(*wanted) == node("counts", queue=name, types=wanted)


# ---------------------------------------------------------------------------
# Lone surrogates (half of a UTF-16 pair, which JavaScript strings may hold)
# ---------------------------------------------------------------------------

LONE = "\ud83d"
CUT = {"t": LONE, "k" + LONE: [LONE + "x", "\u00e9\U0001F600"]}


def test_lone_surrogates_are_stored_and_read_alike_on_both_sides(node, redis_url, namespace):
    """Data and return values holding a lone surrogate: each side writes the JSON the
    other writes and reads the other's back equal (the driver's JSON carries the JS
    strings exactly); a failedReason holding one gets U+FFFD on both sides."""
    name = f"interop-{namespace}"
    with Queue(name, connection=redis_url) as queue:
        py_job = queue.add("send", CUT)
        node_id = node("add", queue=name, name="send", data=CUT)["id"]
        assert node("getJob", queue=name, id=py_job.id)["data"] == CUT
        assert queue.get_job(node_id).data == CUT
        raw = queue.client
        assert raw.hget(queue.keys.job(py_job.id), "data") == \
            raw.hget(queue.keys.job(node_id), "data")
        node_fail = node("add", queue=name, name="fail", data={"message": "bad " + LONE})["id"]
        outcomes = by_id(node("work", queue=name, count=3)["results"])
        assert outcomes[py_job.id]["returnvalue"] == {"echo": CUT}
        assert queue.get_job(py_job.id).returnvalue == {"echo": CUT}
        py_fail = queue.add("fail", {"message": "bad " + LONE})
        py_back = queue.add("send", {"echo": CUT})
        with Worker(name, lambda job: job.data if job.name == "send" else python_handler(job),
                    connection=redis_url):
            wait_until(lambda: (queue.get_job_state(py_fail.id), queue.get_job_state(py_back.id))
                       == ("failed", "completed"), GUARD, "python's two jobs")
        assert node("getJob", queue=name, id=py_back.id)["returnvalue"] == {"echo": CUT}
        assert raw.hget(queue.keys.job(py_back.id), "returnvalue") == \
            raw.hget(queue.keys.job(py_job.id), "returnvalue")
        assert queue.get_job(py_fail.id).failed_reason == \
            queue.get_job(node_fail).failed_reason == "bad \ufffd"
