"""Job options and the worker's handling of attempts, delays and priorities."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def finished(queue, *jobs):
    """True once every job is in completed or failed (or gone: removed on finishing)."""
    return lambda: all(queue.get_job_state(j.id) in ("completed", "failed", "unknown")
                       for j in jobs)


def run_all(queue, redis_url, qname, handler, jobs, until=None, **worker_kw):
    """Run a worker until every job of ``jobs`` finished and ``until()`` (if given) holds,
    then close it: the state asserted afterwards is reached with the worker running."""
    assert jobs, "run_all needs the jobs it waits for"
    done = finished(queue, *jobs)
    with Worker(qname, handler, connection=redis_url, **worker_kw):
        wait_until(lambda: done() and (until is None or until()), 30)


def test_priorities_run_lowest_number_first_then_fifo(queue, redis_url, qname):
    order = []
    jobs = [queue.add("p", {"n": "late"}, priority=10), queue.add("p", {"n": "plain"}),
            queue.add("p", {"n": "first"}, priority=1),
            queue.add("p", {"n": "second"}, priority=1)]
    run_all(queue, redis_url, qname, lambda j: order.append(j.data["n"]), jobs)
    # Plain (priority 0) jobs sit in wait and go before prioritized ones, as in BullMQ.
    assert order == ["plain", "first", "second", "late"]


def test_lifo_runs_newest_first(queue, redis_url, qname):
    order = []
    jobs = [queue.add("x", {"i": i}) for i in range(3)]
    jobs.append(queue.add("x", {"i": 99}, lifo=True))
    run_all(queue, redis_url, qname, lambda j: order.append(j.data["i"]), jobs)
    assert order[0] == 99 and order[1:] == [0, 1, 2]


def test_delayed_job_waits_then_runs(queue, redis_url, qname, r):
    job = queue.add("d", {}, delay=0.6)
    assert job.get_state() == "delayed"
    score = r.zscore(queue.keys.delayed, job.id)
    assert int(score) >> 12 == job.timestamp + 600  # BullMQ's encoding: ms * 4096 + seq
    ran_at = []
    with Worker(qname, lambda j: ran_at.append(time.time() * 1000), connection=redis_url):
        wait_until(lambda: ran_at, 10)
    assert ran_at[0] >= job.timestamp + 600


def test_delayed_jobs_keep_their_order(queue, redis_url, qname):
    order = []
    now = time.time()
    jobs = [queue.add("d", {"n": 3}, delay=0.9), queue.add("d", {"n": 1}, delay=0.3),
            queue.add("d", {"n": 2}, delay=0.6)]
    run_all(queue, redis_url, qname, lambda j: order.append(j.data["n"]), jobs)
    assert order == [1, 2, 3]
    assert time.time() - now >= 0.9


def test_retries_with_exponential_backoff_then_fail(queue, redis_url, qname, r):
    attempts = []

    def flaky(job):
        attempts.append((job.attempts_made, time.monotonic()))
        raise RuntimeError(f"try {job.attempts_made}")

    job = queue.add("f", {}, attempts=3, backoff={"type": "exponential", "delay": 0.2})
    run_all(queue, redis_url, qname, flaky, [job])
    assert [a for a, _ in attempts] == [0, 1, 2]
    gaps = [b - a for (_, a), (_, b) in zip(attempts, attempts[1:])]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4  # 2^(n-1) * delay
    final = queue.get_job(job.id)
    assert final.attempts_made == 3 and final.attempts_started == 3
    assert final.failed_reason == "try 2" and len(final.stacktrace) == 3
    events = [f["event"] for _, f in r.xrange(queue.keys.events)]
    assert events.count("delayed") == 2 and events.count("failed") == 1
    assert events[events.index("failed") + 1] == "retries-exhausted"


def test_retry_without_backoff_goes_straight_back_to_wait(queue, redis_url, qname):
    seen = []

    def once_bad(job):
        seen.append(job.attempts_made)
        if job.attempts_made == 0:
            raise RuntimeError("first time")
        return "second time"

    job = queue.add("f", {}, attempts=2)
    run_all(queue, redis_url, qname, once_bad, [job])
    assert seen == [0, 1]
    final = queue.get_job(job.id)
    assert final.returnvalue == "second time" and final.attempts_made == 2


def test_unrecoverable_error_fails_at_once(queue, redis_url, qname):
    calls = []

    def fatal(job):
        calls.append(1)
        raise errors.UnrecoverableError("bad card number")

    job = queue.add("f", {}, attempts=5, backoff=0.01)
    run_all(queue, redis_url, qname, fatal, [job])
    assert len(calls) == 1
    assert queue.get_job(job.id).failed_reason == "bad card number"


def test_custom_backoff_strategy(queue, redis_url, qname):
    seen = []

    def strategy(attempts_made, exc, job):
        seen.append((attempts_made, str(exc)))
        return 0.05 if attempts_made < 2 else None  # None: stop retrying

    job = queue.add("f", {}, attempts=10, backoff={"type": "mine"})
    run_all(queue, redis_url, qname, lambda j: 1 / 0, [job],
            backoff_strategies={"mine": strategy})
    assert [a for a, _ in seen] == [1, 2]
    assert queue.get_job(job.id).attempts_made == 2


def test_move_to_delayed_does_not_count_an_attempt(queue, redis_url, qname):
    runs = []

    def handler(job):
        runs.append(job.attempts_made)
        if len(runs) == 1:
            job.move_to_delayed(time.time() + 0.3)
            raise errors.DelayedError()
        return "later"

    job = queue.add("m", {})
    run_all(queue, redis_url, qname, handler, [job])
    final = queue.get_job(job.id)
    assert runs == [0, 0] and final.returnvalue == "later"
    assert final.attempts_made == 1 and final.attempts_started == 2


def test_remove_on_complete_true_and_count(queue, redis_url, qname, r):
    gone = queue.add("x", {}, remove_on_complete=True)
    run_all(queue, redis_url, qname, lambda j: None, [gone],
            until=lambda: not r.exists(queue.keys.job(gone.id)))
    jobs = queue.add_bulk([{"name": "x", "data": {}, "opts": {"remove_on_complete": 2}}
                           for _ in range(5)])
    run_all(queue, redis_url, qname, lambda j: None, jobs)
    kept = r.zrange(queue.keys.completed, 0, -1)
    assert len(kept) == 2 and set(kept) <= {j.id for j in jobs}
    assert sum(r.exists(queue.keys.job(j.id)) for j in jobs) == 2


def test_remove_on_fail_by_age(queue, redis_url, qname, r):
    old = queue.add("x", {}, remove_on_fail={"age": 0.1})
    run_all(queue, redis_url, qname, lambda j: 1 / 0, [old])
    assert r.zrange(queue.keys.failed, 0, -1) == [old.id]
    time.sleep(0.25)
    new = queue.add("x", {}, remove_on_fail={"age": 0.1})
    run_all(queue, redis_url, qname, lambda j: 1 / 0, [new],
            until=lambda: queue.get_job_state(new.id) == "failed")
    assert not r.exists(queue.keys.job(old.id))
    assert r.zrange(queue.keys.failed, 0, -1) == [new.id]


def test_deduplication_keeps_one_job_while_the_key_lives(queue, redis_url, qname, r):
    first = queue.add("x", {"v": 1}, deduplication={"id": "user-7", "ttl": 0.3})
    second = queue.add("x", {"v": 2}, deduplication={"id": "user-7", "ttl": 0.3})
    assert second.id == first.id and r.llen(queue.keys.wait) == 1
    assert r.hget(queue.keys.job(first.id), "deid") == "user-7"
    time.sleep(0.4)
    third = queue.add("x", {"v": 3}, deduplication={"id": "user-7", "ttl": 0.3})
    assert third.id != first.id


def test_progress_logs_and_data_from_a_handler(queue, redis_url, qname):
    def handler(job):
        job.update_progress(40)
        job.log("step one")
        job.log("step two")
        job.update_data({**job.data, "seen": True})
        return "ok"

    job = queue.add("x", {"a": 1}, keep_logs=5)
    run_all(queue, redis_url, qname, handler, [job])
    got = queue.get_job(job.id)
    assert got.progress == 40 and got.data == {"a": 1, "seen": True}
    assert queue.get_job_logs(job.id) == {"logs": ["step one", "step two"], "count": 2}


@pytest.mark.parametrize("opts, name", [
    ({"delay": -1}, "delay"), ({"priority": 1.5}, "priority"), ({"priority": -1}, "priority"),
    ({"priority": 2 ** 21 + 1}, "priority"), ({"attempts": 0}, "attempts"),
    ({"backoff": {"type": "fixed"}}, "backoff"), ({"backoff": "soon"}, "backoff"),
    ({"remove_on_complete": -1}, "remove_on_complete"),
    ({"remove_on_fail": {"ages": 3}}, "remove_on_fail"), ({"deduplication": {"ttl": 1}}, "deduplication"),
    ({"colour": "red"}, "unknown key 'colour'"),
])
def test_bad_options_are_refused_by_name_and_write_nothing(queue, r, opts, name):
    with pytest.raises((TypeError, ValueError), match=name):
        queue.add("x", {}, **opts)
    assert r.exists(queue.keys.id, queue.keys.wait, queue.keys.delayed) == 0


def test_worker_pause_and_resume_locally(queue, redis_url, qname):
    done = []
    worker = Worker(qname, lambda j: done.append(j.id), connection=redis_url).start()
    try:
        worker.pause()
        queue.add("x", {})
        time.sleep(0.3)
        assert done == [] and worker.is_paused
        worker.resume()
        wait_until(lambda: len(done) == 1)
    finally:
        worker.close()


def test_rate_limiter_is_shared_by_workers(queue, redis_url, qname):
    stamps = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            stamps.append(time.monotonic())

    queue.add_bulk([{"name": "x", "data": {}} for _ in range(6)])
    limiter = {"max": 2, "duration": 0.5}
    with Worker(qname, handler, connection=redis_url, concurrency=4, limiter=limiter), \
            Worker(qname, handler, connection=redis_url, concurrency=4, limiter=limiter):
        wait_until(lambda: len(stamps) == 6, 15)
    stamps.sort()
    # 6 jobs at 2 per 0.5 s need at least two full windows after the first.
    assert stamps[-1] - stamps[0] >= 0.9


def test_manual_rate_limit_from_a_handler(queue, redis_url, qname):
    runs = []

    def handler(job):
        runs.append(time.monotonic())
        if len(runs) == 1:
            worker.rate_limit(0.5)
            raise errors.RateLimitError()
        return "ok"

    job = queue.add("x", {})
    worker = Worker(qname, handler, connection=redis_url, limiter={"max": 100, "duration": 1})
    with worker:
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 10)
    assert runs[1] - runs[0] >= 0.45
    assert queue.get_job(job.id).attempts_made == 1


def test_timestamp_option_is_stored_as_given(queue):
    job = queue.add("x", {}, timestamp=1_700_000_000_000)
    assert job.timestamp == 1_700_000_000_000
    assert queue.get_job(job.id).timestamp == 1_700_000_000_000


def test_a_jobs_own_remove_options_win_over_the_workers_even_false(queue, redis_url, qname, r):
    """As in BullMQ, a job's removeOnComplete/removeOnFail, when set (false included),
    wins over the worker's."""
    kept = queue.add("x", {}, remove_on_complete=False)
    dropped = queue.add("x", {})
    run_all(queue, redis_url, qname, lambda j: None, [kept, dropped], remove_on_complete=True)
    assert queue.get_job_state(kept.id) == "completed"
    assert not r.exists(queue.keys.job(dropped.id))
    kept_failed = queue.add("x", {}, remove_on_fail=False)
    dropped_failed = queue.add("x", {})
    run_all(queue, redis_url, qname, lambda j: 1 / 0, [kept_failed, dropped_failed],
            remove_on_fail=True)
    assert queue.get_job_state(kept_failed.id) == "failed"
    assert not r.exists(queue.keys.job(dropped_failed.id))
    assert queue.get_job(kept.id).opts["removeOnComplete"] is False   # stored as Node stores it


def test_unknown_backoff_strategy_fails_the_job_at_once_naming_it(queue, redis_url, qname):
    """A strategy registered only elsewhere (say in a Node worker): the job must not stay
    in active until stall recovery; it fails now, the reason naming the strategy."""
    calls, errors_seen = [], []

    def boom(job):
        calls.append(job.attempts_made)
        raise RuntimeError("card declined")

    job = queue.add("f", {}, attempts=3, backoff={"type": "node-only", "delay": 0.01})
    worker = Worker(qname, boom, connection=redis_url, stalled_interval=0.5)
    worker.on("error", errors_seen.append)
    with worker:
        wait_until(lambda: queue.get_job_state(job.id) == "failed", 20)
    final = queue.get_job(job.id)
    assert "node-only" in final.failed_reason and "card declined" in final.failed_reason
    assert calls == [0] and final.attempts_made == 1
    assert any("node-only" in str(e) for e in errors_seen)
