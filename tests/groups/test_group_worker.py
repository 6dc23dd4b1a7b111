"""GroupWorker on real Redis: exclusivity and order inside groups, retries that keep the
order, final failures, heartbeats, stalled recovery, delayed/repeating jobs, ordering
methods, events and shutdown. Waits are generous guards; nothing asserts on timing."""
from __future__ import annotations

import threading
import time
from typing import Any, Iterator, List

import pytest
import redis as redis_py

from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.groups.testing import check_runs, record
from orijs_sync.testing import RedisServer, wait_until


class Recorder:
    """A handler recording every start and end in one Redis list (see groups.testing)."""

    def __init__(self, url: str, log: str, sleep: float = 0.0) -> None:
        self.r = redis_py.Redis.from_url(url, decode_responses=True)
        self.log = log
        self.sleep = sleep
        self.fail_first: set = set()
        self._failed: set = set()

    def __call__(self, job: GroupJob) -> Any:
        n = job.data["n"]
        record(self.r, self.log, "start", job.id, job.group_id, n, "py")
        time.sleep(self.sleep)
        record(self.r, self.log, "end", job.id, job.group_id, n, "py")
        if n in self.fail_first and (job.group_id, n) not in self._failed:
            self._failed.add((job.group_id, n))
            raise RuntimeError(f"first attempt of {n} fails")
        return {"n": n}

    def entries(self) -> List[str]:
        return self.r.lrange(self.log, 0, -1)


def add_jobs(gq: GroupQueue, groups: int, per_group: int) -> None:
    for i in range(per_group):
        for g in range(groups):
            gq.add(group_id=f"g{g}", data={"n": i})


def test_groups_never_overlap_and_keep_order(gq, redis_url, gname):
    rec = Recorder(redis_url, f"{gname}:log", sleep=0.002)
    add_jobs(gq, groups=8, per_group=25)
    w1 = GroupWorker(gq, rec, concurrency=6).start()
    w2 = GroupWorker(gq, rec, concurrency=3).start()
    try:
        assert gq.wait_for_empty(60)
    finally:
        w1.close()
        w2.close()
    runs = check_runs(rec.entries())
    assert runs == {f"g{g}": list(range(25)) for g in range(8)}


def test_retry_with_backoff_keeps_group_order(gq, redis_url, gname):
    rec = Recorder(redis_url, f"{gname}:log")
    rec.fail_first = {1, 3}
    add_jobs(gq, groups=2, per_group=5)
    failed: List[GroupJob] = []
    with GroupWorker(gq, rec, concurrency=4, backoff=0.3, scheduler_interval=0.05) as w:
        w.on("failed", lambda job, exc: failed.append(job))
        assert gq.wait_for_empty(30)
    runs = check_runs(rec.entries())
    assert runs == {g: [0, 1, 1, 2, 3, 3, 4] for g in ("g0", "g1")}
    assert len(failed) == 4 and all(j.status == "delayed" for j in failed)


def test_a_backoff_of_infinite_seconds_delays_the_retry_ten_years(gq, redis_url, gname):
    """A backoff function may return inf (or more seconds than a score holds): the retry
    is delayed by ten years, rather than the failure's write raising and the job
    stalling, to run again at once."""
    runs: List[str] = []

    def handler(job: GroupJob) -> str:
        runs.append(job.id)
        raise ValueError("always")
    gq.add(group_id="g", data={}, job_id="j")
    failed: List[GroupJob] = []
    worker = GroupWorker(gq, handler, backoff=lambda attempt: float("inf"),
                         stalled_interval=0.2)
    worker.on("failed", lambda job, exc: failed.append(job))    # before the job can run
    with worker:
        wait_until(lambda: failed, timeout=10, what="the first attempt failed")
        time.sleep(1)                # stalled checks run: nothing is recovered and rerun
    assert runs == ["j"] and failed[0].status == "delayed"
    assert gq.get_job("j").status == "delayed"


def test_corrupted_job_fields_hold_up_neither_the_group_nor_the_queue(redis_url, gname):
    """Fields another program wrote that are no numbers: attempts "1e400" (it made every
    fetch raise, so no job of the queue ran), a score "abc" (a retry could not put the
    job back: it stayed processing, its group held up), maxAttempts "nan" (no attempt
    was ever the last: retried for ever). Each job ends, and its group goes on."""
    gq = GroupQueue(gname, connection=redis_url, max_attempts=2, keep_failed=10,
                    keep_completed=10)
    r = redis_py.Redis.from_url(redis_url, decode_responses=True)
    corrupt = {"a": ("attempts", "1e400"), "b": ("score", "abc"), "c": ("maxAttempts", "nan")}
    for gid, (name, value) in corrupt.items():
        gq.add(group_id=gid, data={"fail": gid != "a"}, job_id=f"{gid}1")
        gq.add(group_id=gid, data={"fail": False}, job_id=f"{gid}2")
        r.hset(gq.key("job", f"{gid}1"), name, value)
    tries: List[str] = []

    def handler(job: GroupJob) -> str:
        tries.append(job.id)
        if job.data["fail"] and tries.count(job.id) == 1:
            raise ValueError("first attempt")
        return job.id
    with GroupWorker(gq, handler, backoff=0, stalled_interval=0.5):
        wait_until(lambda: all(gq.get_job(f"{g}{n}").status in ("completed", "failed")
                               for g in corrupt for n in (1, 2)), timeout=15,
                   what="every job ended")
    states = {j: gq.get_job(j).status for g in corrupt for j in (f"{g}1", f"{g}2")}
    assert states == {"a1": "completed", "a2": "completed", "b1": "completed",
                      "b2": "completed", "c1": "failed", "c2": "completed"}
    assert tries.count("c1") == 1        # maxAttempts unreadable: one attempt, as unset


def test_final_failure_is_kept_and_releases_the_group(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, max_attempts=2, keep_failed=10,
                    keep_completed=10)
    gq.add(group_id="g", data={"boom": True}, job_id="bad")
    gq.add(group_id="g", data={"boom": False}, job_id="good")

    def handler(job: GroupJob) -> str:
        if job.data["boom"]:
            raise ValueError("always")
        return "ok"
    with GroupWorker(gq, handler, backoff=0):
        assert gq.wait_for_empty(30)
    bad, good = gq.get_job("bad"), gq.get_job("good")
    assert bad.status == "failed" and bad.failed_reason == "always"
    assert bad.attempts_made == 2 and "ValueError" in bad.stacktrace
    assert good.status == "completed" and good.returnvalue == "ok"
    assert gq.get_job_counts()["failed"] == 1
    gq.retry("bad")
    assert gq.get_job("bad").status == "waiting" and gq.get_job("bad").attempts_made == 0
    gq.close()


def test_heartbeat_keeps_a_long_job_past_its_timeout(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, job_timeout=0.6)
    gq.add(group_id="g", data={"n": 0})
    runs: List[str] = []

    def slow(job: GroupJob) -> None:
        runs.append(job.id)
        time.sleep(2.0)
    with GroupWorker(gq, slow, stalled_interval=0.1):
        wait_until(lambda: gq.get_job_counts()["active"] == 0 and runs, 30)
        assert gq.wait_for_empty(30)
    assert len(runs) == 1
    gq.close()


def reserve_as_dead_worker(gq: GroupQueue, n: int = 1) -> list:
    """Reserve jobs with a token no live worker has: as if their worker died."""
    return gq.run_script("reserve", int(time.time() * 1000), 200, n, "", "dead", 100)


def test_stalled_job_is_recovered_and_order_holds(gq, redis_url, gname):
    rec = Recorder(redis_url, f"{gname}:log")
    add_jobs(gq, groups=1, per_group=4)
    taken = reserve_as_dead_worker(gq)
    assert len(taken) == 1 and taken[0][2] == "{\"n\":0}"   # the head is held
    stalled: list = []
    with GroupWorker(gq, rec, stalled_interval=0.2) as w:
        w.on("stalled", lambda job_id, group_id: stalled.append(job_id))
        assert gq.wait_for_empty(30)
    assert stalled == [taken[0][0]]
    assert check_runs(rec.entries()) == {"g0": [0, 1, 2, 3]}


def test_job_stalled_too_often_fails(gq, redis_url, gname):
    gq.add(group_id="g", data={"n": 0}, job_id="s")
    gq.add(group_id="g", data={"n": 1}, job_id="t")
    reserve_as_dead_worker(gq)
    rec = Recorder(redis_url, f"{gname}:log")
    with GroupWorker(gq, rec, stalled_interval=0.2, max_stalled_count=0):
        assert gq.wait_for_empty(30)
    assert gq.get_job("s").status == "failed"
    assert check_runs(rec.entries()) == {"g": [1]}


def test_late_finish_of_a_recovered_job_is_refused(gq):
    gq.add(group_id="g", data={"n": 0}, job_id="j")
    reply = gq.run_script("reserve", int(time.time() * 1000), 100, 1, "", "tok-a", 100)
    assert reply[0][0] == "j"
    time.sleep(0.15)
    assert gq.run_script("stalled", int(time.time() * 1000), 0, 5, 100) == ["j", "g", "recovered"]
    again = gq.run_script("reserve", int(time.time() * 1000), 10_000, 1, "", "tok-b", 100)
    assert again[0][0] == "j"
    late = gq.run_script("complete", "tok-c", 1, 100, 0, "1", "j", "g", "tok-a", "[]")
    assert late == [0]
    assert gq.get_job("j").status == "active"


def test_delayed_job_holds_its_group(gq, redis_url, gname):
    rec = Recorder(redis_url, f"{gname}:log")
    gq.add(group_id="g", data={"n": 0}, delay=0.5)
    gq.add(group_id="g", data={"n": 1})
    gq.add(group_id="h", data={"n": 0})
    with GroupWorker(gq, rec, scheduler_interval=0.05):
        assert gq.wait_for_empty(30)
    assert check_runs(rec.entries()) == {"g": [0, 1], "h": [0]}


def test_repeating_job_runs_once_per_period_with_many_workers(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, keep_completed=100)
    done: List[str] = []
    lock = threading.Lock()

    def handler(job: GroupJob) -> None:
        with lock:
            done.append(job.id)
    gq.add(group_id="tick", data={"k": 1}, repeat={"every": 0.3})
    workers = [GroupWorker(gq, handler, scheduler_interval=0.02).start() for _ in range(3)]
    try:
        wait_until(lambda: len(done) >= 4, 30, "four runs")
    finally:
        for w in workers:
            w.close()
    runs = sorted(gq.get_job(job_id).timestamp for job_id in set(done))
    assert len(runs) == len(done)
    # Each run is due `every` after the one before, whichever of the 3 schedulers
    # (each ticking every 20 ms) added it: two runs in one period would be closer.
    assert all(b - a >= 300 for a, b in zip(runs, runs[1:])), runs
    gq.close()


def test_ordering_scheduler_sorts_late_arrivals(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, ordering="scheduler", ordering_window=0.5)
    now = int(time.time() * 1000)
    gq.add(group_id="g", data={"n": 2}, order_ms=now)
    gq.add(group_id="g", data={"n": 1}, order_ms=now - 100)   # arrives late, sorts first
    assert gq.get_job_counts()["staged"] == 2
    rec = Recorder(redis_url, f"{gname}:log")
    with GroupWorker(gq, rec):
        assert gq.wait_for_empty(30)
    assert check_runs(rec.entries()) == {"g": [1, 2]}
    gq.close()


def test_ordering_in_memory_swaps_in_an_earlier_job(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, ordering="in-memory", ordering_window=0.6)
    rec = Recorder(redis_url, f"{gname}:log")
    now = int(time.time() * 1000)
    with GroupWorker(gq, rec) as w:
        gq.add(group_id="g", data={"n": 2}, order_ms=now)
        wait_until(lambda: gq.get_job_counts()["active"] == 1, 30)   # held for the window
        gq.add(group_id="g", data={"n": 1}, order_ms=now - 100)
        assert gq.wait_for_empty(30)
        assert w.get_current_jobs() == []
    assert check_runs(rec.entries()) == {"g": [1, 2]}
    gq.close()


def test_events_current_jobs_and_close(gq):
    release = threading.Event()
    seen: List[Any] = []
    gq.add(group_id="g", data={"n": 1}, job_id="e1")
    w = GroupWorker(gq, lambda job: release.wait(30) and job.data["n"] * 10, concurrency=2)
    w.on("completed", lambda job, result: seen.append(("completed", job.id, result)))
    w.on("closed", lambda: seen.append(("closed",)))
    w.start()
    wait_until(lambda: len(w.get_current_jobs()) == 1, 30)
    current = w.get_current_jobs()[0]
    assert current["job"].id == "e1" and current["processing_time"] >= 0
    release.set()
    assert w.close(timeout=30) is True
    assert w.close() is True
    assert seen == [("completed", "e1", 10), ("closed",)]
    with pytest.raises(Exception):
        w.on("nope", print)


@pytest.fixture
def own_gq(gname: str) -> Iterator[GroupQueue]:
    """A GroupQueue on a redis-server of the test's own: what its INFO and CLIENT LIST
    show is this test's alone (on a shared Redis, any other client blocking on
    BZPOPMIN adds to the server-wide counts)."""
    with RedisServer() as server:
        queue = GroupQueue(gname, connection=server.url, job_timeout=5)
        yield queue
        queue.close()


def bzpopmin_calls(gq: GroupQueue) -> int:
    return int(gq.client.info("commandstats").get("cmdstat_bzpopmin", {}).get("calls", 0))


def test_idle_worker_blocks_instead_of_polling(own_gq):
    def one_pop_blocked_a_second() -> bool:
        return any(c.get("cmd") == "bzpopmin" and "b" in c.get("flags", "")
                   and int(c.get("idle", 0)) >= 1 for c in own_gq.client.client_list())
    with GroupWorker(own_gq, lambda job: None, concurrency=4, block_timeout=5):
        # a worker that polled would never sit in one BZPOPMIN call for a second
        wait_until(one_pop_blocked_a_second, 30, "the worker blocked in one BZPOPMIN")
        own_gq.add(group_id="g", data={"n": 0})
        assert own_gq.wait_for_empty(10)


def test_group_in_ready_while_active_is_not_taken_twice(gq):
    """GroupMQ's own reserve leaves a group in ready while its head job runs; a
    Python reserve must still never take a second job of that group."""
    gq.add(group_id="g", data={"n": 0})
    gq.add(group_id="g", data={"n": 1})
    now = int(time.time() * 1000)
    first = gq.run_script("reserve", now, 10_000, 4, "", "tok-a", 100)
    assert len(first) == 1
    gq.client.zadd(gq.key("ready"), {"g": 1})          # as Node GroupMQ's reserve does
    assert gq.run_script("reserve", now, 10_000, 4, "", "tok-b", 100) == []
    assert gq.run_script("reserve", now, 10_000, 4, "g", "tok-b", 100) == []
    assert gq.client.zscore(gq.key("ready"), "g") is None   # no spinning on it


def test_slot_orphaned_by_groupmq_inline_recovery_is_freed(gq, redis_url, gname):
    """GroupMQ's reserve recovers an expired job by putting it back in its group and
    dropping it from processing, but leaves it in the group's active list: the next
    reserve clears that orphan instead of blocking the group forever."""
    gq.add(group_id="g", data={"n": 0}, job_id="j0")
    gq.add(group_id="g", data={"n": 1}, job_id="j1")
    gq.run_script("reserve", int(time.time() * 1000), 10_000, 1, "", "tok-a", 100)
    c = gq.client
    c.zrem(gq.key("processing"), "j0")                      # what GroupMQ's reserve.lua does
    c.delete(gq.key("processing", "j0"))
    c.zadd(gq.key("g", "g"), {"j0": float(c.hget(gq.key("job", "j0"), "score"))})
    assert c.lrange(gq.key("g", "g", "active"), 0, -1) == ["j0"]
    rec = Recorder(redis_url, f"{gname}:log")
    with GroupWorker(gq, rec, stalled_interval=0.1):
        assert gq.wait_for_empty(30)
    assert check_runs(rec.entries()) == {"g": [0, 1]}


def test_group_left_out_of_ready_is_put_back(gq, redis_url, gname):
    gq.add(group_id="g", data={"n": 0})
    gq.client.zrem(gq.key("ready"), "g")        # as GroupMQ's stalled check can leave it
    rec = Recorder(redis_url, f"{gname}:log")
    with GroupWorker(gq, rec, stalled_interval=0.1):
        assert gq.wait_for_empty(30)
    assert check_runs(rec.entries()) == {"g": [0]}


def test_one_reserve_call_takes_one_job_from_each_of_several_groups(gq):
    for g in range(5):
        gq.add(group_id=f"g{g}", data={"n": 0})
        gq.add(group_id=f"g{g}", data={"n": 1})
    now = int(time.time() * 1000)
    replies = gq.run_script("reserve", now, 10_000, 3, "", "t", 100)
    jobs = [GroupJob.from_reply(x) for x in replies]
    assert len(jobs) == 3 and len({j.group_id for j in jobs}) == 3
    assert all(j.data == {"n": 0} for j in jobs)
    more = gq.run_script("reserve", now, 10_000, 10, "", "t", 100)
    assert len(more) == 2                       # the two free groups; the busy ones are skipped


def test_completing_takes_the_groups_next_job_in_the_same_call(gq):
    gq.add(group_id="g", data={"n": 0}, job_id="first")
    gq.add(group_id="g", data={"n": 1}, job_id="second")
    now = int(time.time() * 1000)
    (reply,) = gq.run_script("reserve", now, 10_000, 1, "", "t", 100)
    assert reply[0] == "first"
    fields = '["returnvalue","1"]'
    (nxt,) = gq.run_script("complete", "t2", now, 10_000, 0, "1", "first", "g", "t", fields)
    assert GroupJob.from_reply(nxt).id == "second"
    assert gq.get_job("second").status == "active"
    assert gq.get_job("first") is None                      # keep_completed=0
    assert gq.run_script("complete", "t3", now, 10_000, 0, "1", "second", "g", "t2",
                         "[]") == [1]
    assert gq.is_empty()


def test_paused_queue_holds_its_jobs_without_spinning(own_gq):
    gq = own_gq
    gq.pause()
    gq.add(group_id="g", data={"n": 0})
    done: List[str] = []
    with GroupWorker(gq, lambda job: done.append(job.id), block_timeout=5):
        wait_until(lambda: bzpopmin_calls(gq) >= 1, 30, "the worker looking at the queue")
        before = bzpopmin_calls(gq)
        time.sleep(1.0)
        # one look per PAUSED_WAIT (0.5 s) at most: a spinning fetcher makes hundreds
        assert bzpopmin_calls(gq) - before <= 4 and done == []
        assert gq.is_paused()
        gq.resume()
        assert gq.wait_for_empty(30)
    assert len(done) == 1


def test_groups_run_in_parallel_up_to_concurrency(gq):
    barrier = threading.Barrier(4, timeout=20)       # passes only with 4 groups at once

    def handler(job: GroupJob) -> None:
        barrier.wait()
    for g in range(4):
        gq.add(group_id=f"p{g}", data={"n": 0})
    with GroupWorker(gq, handler, concurrency=4, backoff=0):
        assert gq.wait_for_empty(30)
    assert gq.get_job_counts()["failed"] == 0 and not barrier.broken


def test_closing_a_forked_copy_leaves_the_parents_worker_running(gq):
    import os
    release = threading.Event()
    done: List[str] = []

    def handler(job: GroupJob) -> None:
        release.wait(30)
        done.append(job.id)
    gq.add(group_id="g", data={"n": 0}, job_id="held")
    with GroupWorker(gq, handler) as w:
        wait_until(lambda: len(w.get_current_jobs()) == 1, 30)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if w.close(timeout=5) else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        release.set()
        gq.add(group_id="g", data={"n": 1}, job_id="after")
        assert gq.wait_for_empty(30)
    assert done == ["held", "after"]


def test_keep_completed_trims_the_oldest(redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url, keep_completed=2)
    ids = [gq.add(group_id="k", data={"n": n}).id for n in range(5)]
    def handler(job: GroupJob) -> int:
        time.sleep(0.005)                 # finish times (the retention scores) differ
        return job.data["n"]
    with GroupWorker(gq, handler):
        assert gq.wait_for_empty(30)
    assert gq.get_job_counts()["completed"] == 2
    assert [gq.get_job(i) is None for i in ids] == [True, True, True, False, False]
    assert gq.get_job(ids[4]).returnvalue == 4 and gq.get_job(ids[4]).status == "completed"
    gq.close()
