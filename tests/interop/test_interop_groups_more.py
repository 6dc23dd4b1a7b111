"""The rest of GroupMQ 1.1's API against a real Node GroupMQ on one Redis: jobs one side
adds are processed by hand on the other (``reserve``/``reserveBatch``, ``heartbeat``,
``complete``, ``deadLetter``) with per-group exclusivity across both; both sides'
``getJobsByStatus`` list the same jobs; batched adds (``autoBatch``) read on the other
side; and the cleanup lock one side takes holds the other back.

The Node side is node/groupmq_driver.js, through the ``gmq`` fixture of
test_interop_groups.py.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

from test_interop_groups import gmq, gname  # noqa: F401 - the fixtures used here

from orijs_sync.groups import GroupJob, GroupQueue


def test_node_adds_python_processes_by_hand(gmq, redis_url, gname):  # noqa: F811
    gmq("add", jobs=[{"groupId": "a", "data": {"n": 0, "t": "h\u00e9"}, "jobId": "a0"},
                     {"groupId": "a", "data": {"n": 1}, "jobId": "a1"},
                     {"groupId": "b", "data": {"n": 0}, "jobId": "b0", "maxAttempts": 3}])
    gq = GroupQueue(gname, connection=redis_url, keep_completed=10, keep_failed=10)
    held = {job.id: job for job in gq.reserve_batch(10)}
    assert sorted(held) == ["a0", "b0"] and held["a0"].data == {"n": 0, "t": "h\u00e9"}
    assert gmq("reserve", batch=10) == []                 # both groups are Python's now
    assert gq.heartbeat(held["a0"], extend=60) is True
    assert gmq("getJob", id="a0")["status"] == "active"
    assert gq.complete(held["a0"], {"by": "py"}) is True
    node_view = gmq("getJob", id="a0")
    assert node_view["status"] == "completed" and node_view["returnvalue"] == {"by": "py"}
    assert gq.dead_letter(held["b0"], ValueError("nope")) is True
    node_view = gmq("getJob", id="b0")
    assert node_view["status"] == "failed" and node_view["failedReason"] == "nope"
    assert node_view["attemptsMade"] == 1
    taken = gmq("reserve")                                # a's next job, freed by Python
    assert [job["id"] for job in taken] == ["a1"]
    assert gq.complete(GroupJob(id="a1", group_id="a", data=None, token="guess")) is False
    gmq("complete", job=taken[0], result={"by": "node"}, queueOpts={"keepCompleted": 10})
    assert gq.get_job("a1").returnvalue == {"by": "node"}
    counts = gmq("counts")
    assert (counts["completed"], counts["failed"], counts["waiting"]) == (2, 1, 0)
    gq.close()


def test_python_adds_node_processes_by_hand(gmq, redis_url, gname):  # noqa: F811
    gq = GroupQueue(gname, connection=redis_url)
    for job_id, gid in (("x0", "x"), ("x1", "x"), ("y0", "y")):
        gq.add(group_id=gid, data={"id": job_id, "list": [1, None]}, job_id=job_id)
    mine = gq.reserve()
    assert mine is not None and mine.id == "x0"
    taken = gmq("reserve", batch=10)                     # x is held by Python: y only
    assert [(job["id"], job["data"]) for job in taken] == [("y0", {"id": "y0", "list": [1, None]})]
    before = int(time.time() * 1000)
    assert gmq("heartbeat", id="y0", groupId="y", extendMs=60_000) == 1
    assert gq.client.zscore(gq.key("processing"), "y0") >= before + 59_000
    assert gq.get_job("y0").status == "active"
    gmq("complete", job=taken[0], result={"by": "node"},
        queueOpts={"keepCompleted": 10})
    done = gq.get_job("y0")
    assert done.status == "completed" and done.returnvalue == {"by": "node"}
    assert gq.complete(mine, "py") is True               # frees x for Node
    taken = gmq("reserve")
    assert [job["id"] for job in taken] == ["x1"]
    assert gmq("deadLetter", job=taken[0], message="node says no",
               queueOpts={"keepFailed": 10}) == 1
    failed = gq.get_job("x1")
    assert failed.status == "failed" and failed.failed_reason == "node says no"
    assert gq.is_empty() and gq.get_failed_count() == 1
    gq.close()


def test_a_failed_attempt_by_hand_is_the_same_either_side(gmq, redis_url, gname):  # noqa: F811
    gq = GroupQueue(gname, connection=redis_url, keep_failed=10)
    gq.add(group_id="p", data={}, job_id="p0", max_attempts=3)
    gmq("add", jobs=[{"groupId": "n", "data": {}, "jobId": "n0", "maxAttempts": 3}])
    mine = gq.reserve_batch(1)[0]
    theirs = gmq("reserve")[0]
    assert {mine.id, theirs["id"]} == {"p0", "n0"}
    before = int(time.time() * 1000)
    assert gq.fail(mine, ValueError("py says later"), backoff=60) is True
    assert gmq("retry", id=theirs["id"], backoffMs=60_000) == 1
    for job_id in ("p0", "n0"):                 # Python's fail and Node's retry agree
        node_view, py_view = gmq("getJob", id=job_id), gq.get_job(job_id)
        assert (node_view["status"], node_view["attemptsMade"]) == ("delayed", 1)
        assert (py_view.status, py_view.attempts_made) == ("delayed", 1)
        # GroupMQ's retry.lua takes the time in whole seconds (TIME's first field)
        assert gq.client.zscore(gq.key("delayed"), job_id) >= before - 1000 + 60_000
    assert gq.reserve() is None and gmq("reserve") == []    # delayed heads hold both back
    gq.promote("p0")
    gq.promote("n0")
    taken = {job["id"]: job for job in gmq("reserve", batch=10)}
    assert sorted(taken) == ["n0", "p0"] and taken["p0"]["attempts"] == 1
    for job in taken.values():
        gmq("complete", job=job, result={"by": "node"}, queueOpts={"keepCompleted": 10})
    assert gq.get_job("p0").status == "completed" and gq.is_empty()
    gq.close()


def test_both_sides_list_the_same_jobs_by_status(gmq, redis_url, gname):  # noqa: F811
    gq = GroupQueue(gname, connection=redis_url, keep_completed=10, keep_failed=10)
    for n in range(3):
        gq.add(group_id=f"c{n}", data={}, job_id=f"c{n}")
        job = gq.reserve()
        assert job is not None and gq.complete(job, n)
        time.sleep(0.002)
    gmq("add", jobs=[{"groupId": "f", "data": {}, "jobId": "f0"},
                     {"groupId": "a", "data": {}, "jobId": "a0"}])
    held = {job.id: job for job in gq.reserve_batch()}
    assert sorted(held) == ["a0", "f0"] and gq.dead_letter(held["f0"])
    gq.add(group_id="w", data={}, job_id="d0", delay=600)
    gmq("add", jobs=[{"groupId": "w", "data": {}, "jobId": "w0"},
                     {"groupId": "w", "data": {}, "jobId": "w1"}])
    every = ["active", "delayed", "completed", "failed", "waiting"]
    ours = [(job.id, job.status) for job in gq.get_jobs_by_status(every)]
    theirs = [(job["id"], job["status"]) for job in gmq("jobsByStatus", statuses=every)]
    assert ours == [("a0", "active"), ("d0", "delayed"), ("c2", "completed"),
                    ("c1", "completed"), ("c0", "completed"), ("f0", "failed"),
                    ("w0", "waiting"), ("w1", "waiting")]
    # the same list; GroupMQ labels the delayed job held in its group by the last state
    # listing it (waiting), where ours, as both sides' getJob, says delayed
    assert theirs == [(job_id, "waiting" if job_id == "d0" else status)
                      for job_id, status in ours]
    assert gmq("getJob", id="d0")["status"] == "delayed"
    page = [job.id for job in gq.get_jobs_by_status(every, 2, 5)]
    assert page == [job["id"] for job in gmq("jobsByStatus", statuses=every, start=2, end=5)]
    waiting = [(job.id, job.status) for job in gq.get_jobs_by_status(["waiting"])]
    assert waiting == [(job["id"], job["status"])
                       for job in gmq("jobsByStatus", statuses=["waiting"])]
    gq.close()


def test_batched_adds_are_read_on_the_other_side(gmq, redis_url, gname):  # noqa: F811
    jobs = [{"groupId": "n", "data": {"n": n}, "jobId": f"n{n}"} for n in range(8)]
    added = gmq("add", jobs=jobs, together=True,
                queueOpts={"autoBatch": {"size": 4, "maxWaitMs": 20}})
    assert [job["id"] for job in added] == [f"n{n}" for n in range(8)]
    gq = GroupQueue(gname, connection=redis_url, auto_batch={"size": 4, "max_wait": 0.05})
    assert [gq.get_job(f"n{n}").data for n in range(8)] == [{"n": n} for n in range(8)]
    assert gq.client.zrange(gq.key("g", "n"), 0, -1) == [f"n{n}" for n in range(8)]
    results: Dict[int, Any] = {}

    def add(n: int) -> None:
        results[n] = gq.add(group_id=f"p{n % 2}", data={"n": n}, job_id=f"p{n}").status
    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {n: "waiting" for n in range(8)}
    seen: List[Any] = [gmq("getJob", id=f"p{n}") for n in (0, 7)]
    assert [(job["groupId"], job["data"], job["status"]) for job in seen] == \
        [("p0", {"n": 0}, "waiting"), ("p1", {"n": 7}, "waiting")]
    assert gmq("counts")["waiting"] == 16
    gq.close()


def test_the_cleanup_lock_holds_either_side_back(gmq, redis_url, gname):  # noqa: F811
    gq = GroupQueue(gname, connection=redis_url, job_timeout=0.05)
    for gid in ("a", "b", "c"):
        gq.add(group_id=gid, data={}, job_id=gid)

    def expire_one() -> None:
        assert gq.reserve() is not None
        time.sleep(0.1)
    expire_one()
    assert gq.cleanup() == 1                      # Python's cleanup takes GroupMQ's lock
    expire_one()
    assert gmq("cleanup") == 0                    # Node's waits for it
    gq.client.delete(gq.key("cleanup", "lock"))
    assert gmq("cleanup") == 1                    # Node recovers the job Python held...
    expire_one()
    assert gq.cleanup() == 0                      # ...and its lock holds Python back
    assert gq.get_active_jobs() == ["a"] and gq.get_waiting_jobs() == ["b", "c"]
    gq.close()
