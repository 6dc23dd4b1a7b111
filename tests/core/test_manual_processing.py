"""Manual processing (BullMQ's "manually processing jobs"): a Worker made without a
processor, get_next_job(token) and the job's own moves, on real Redis."""
from __future__ import annotations

import json
import random
import threading
import time
from typing import Iterator, List

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import orijs_threads, wait_until


@pytest.fixture
def manual(redis_url, qname) -> Iterator[Worker]:
    worker = Worker(qname, None, connection=redis_url, drain_delay=1)
    yield worker
    worker.close()


def test_a_job_is_taken_with_the_callers_token_and_completed(manual, queue, events, r):
    added = queue.add("send", {"to": "a"})
    job = manual.get_next_job("my-token")
    assert job.id == added.id and job.data == {"to": "a"} and job.token == "my-token"
    assert r.get(queue.keys.lock(job.id)) == "my-token"
    assert 29_000 < r.pttl(queue.keys.lock(job.id)) <= 30_000
    assert queue.get_job_state(job.id) == "active"
    assert r.hget(queue.keys.job(job.id), "ats") == "1"
    assert job.move_to_completed({"sent": True}, "my-token") is None
    stored = r.hgetall(queue.keys.job(job.id))
    assert json.loads(stored["returnvalue"]) == {"sent": True} and stored["atm"] == "1"
    assert queue.get_job_state(job.id) == "completed" and not r.exists(queue.keys.lock(job.id))
    assert job.returnvalue == {"sent": True} and job.attempts_made == 1
    assert added.wait_until_finished(events, timeout=5) == {"sent": True}


def test_fetch_next_takes_the_next_job_with_the_same_token(manual, queue, r):
    first, second = queue.add("a", 1), queue.add("b", 2)
    job = manual.get_next_job("t")
    nxt = job.move_to_completed("done", "t", fetch_next=True)
    assert nxt.id == second.id and nxt.token == "t" and r.get(queue.keys.lock(second.id)) == "t"
    assert nxt.move_to_failed(RuntimeError("no"), "t", fetch_next=True) is None
    assert queue.get_job_state(first.id) == "completed"
    assert queue.get_job(second.id).failed_reason == "no"


def test_an_empty_queue_gives_none_at_once_or_after_the_block(manual):
    started = time.monotonic()
    assert manual.get_next_job("t", block=False) is None
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    assert manual.get_next_job("t", timeout=0.4) is None
    assert 0.35 < time.monotonic() - started < 2.0


def test_a_blocked_take_returns_the_job_added_meanwhile(manual, queue):
    threading.Timer(0.3, lambda: queue.add("late", {})).start()
    started = time.monotonic()
    job = manual.get_next_job("t", timeout=10)
    assert job is not None and job.name == "late"
    assert time.monotonic() - started < 2.0


def test_a_delayed_job_is_taken_when_it_is_due(manual, queue):
    queue.add("later", {}, delay=0.5)
    started = time.monotonic()
    job = manual.get_next_job("t", timeout=5)
    assert job is not None and job.name == "later"
    assert 0.4 < time.monotonic() - started < 3.0


def test_many_threads_taking_at_once_take_each_job_once(manual, queue):
    n, takers = 40, 6
    taken: List[str] = []
    lock = threading.Lock()

    def take(i):
        while True:
            job = manual.get_next_job(f"token-{i}", timeout=1.5)
            if job is None:
                return
            with lock:
                taken.append(job.id)
            job.move_to_completed(i, f"token-{i}")

    threads = [threading.Thread(target=take, args=(i,)) for i in range(takers)]
    for t in threads:
        t.start()
    for i in range(n):          # added while the takers block, race their takes
        queue.add("x", {"i": i})
    for t in threads:
        t.join(30)
    assert sorted(taken, key=int) == [str(i) for i in range(1, n + 1)]
    assert queue.get_job_counts("completed")["completed"] == n


def test_failing_retries_with_backoff_as_a_worker_does(manual, queue, r):
    added = queue.add("x", {}, attempts=3, backoff={"type": "fixed", "delay": 0.2})
    job = manual.get_next_job("t")
    assert job.move_to_failed(ValueError("first"), "t") is None
    assert queue.get_job_state(added.id) == "delayed"
    stored = queue.get_job(added.id)
    assert stored.attempts_made == 1 and stored.failed_reason == "first"
    assert "ValueError: first" in stored.stacktrace[-1]
    job = manual.get_next_job("t", timeout=5)        # due after its backoff
    assert job.id == added.id and job.attempts_made == 1
    job.move_to_failed(errors.UnrecoverableError("stop"), "t")    # attempts left: no retry
    assert queue.get_job_state(added.id) == "failed"
    assert r.hget(queue.keys.job(added.id), "atm") == "2"


def test_discard_fails_for_good(manual, queue):
    added = queue.add("x", {}, attempts=5)
    job = manual.get_next_job("t")
    job.discard()
    job.move_to_failed(RuntimeError("bad input"), "t")
    assert queue.get_job_state(added.id) == "failed"
    assert queue.get_job(added.id).failed_reason == "bad input"


def test_discard_applies_to_a_handlers_failure_too(queue, redis_url, qname):
    def handler(job):
        job.discard()
        raise RuntimeError("never again")
    added = queue.add("x", {}, attempts=5)
    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(added.id) == "failed", 10)
    assert queue.get_job(added.id).attempts_made == 1


def test_a_wrong_token_writes_nothing(manual, queue, r):
    added = queue.add("x", {})
    job = manual.get_next_job("right")
    with pytest.raises(errors.LockLost, match="held by another token"):
        job.move_to_completed(1, "wrong")
    with pytest.raises(errors.LockLost):
        job.move_to_failed(RuntimeError("x"), "wrong")
    with pytest.raises(errors.LockLost):
        job.move_to_wait("wrong")
    with pytest.raises(errors.LockLost):
        job.move_to_delayed(time.time() + 60, "wrong")
    assert job.extend_lock("wrong", 60) is False
    assert queue.get_job_state(added.id) == "active" and r.get(queue.keys.lock(added.id)) == "right"
    job.move_to_completed(1, "right")
    with pytest.raises(errors.LockLost, match="lock is gone"):     # twice: not active any more
        job.move_to_completed(1, "right")


def test_the_lock_is_not_renewed_but_extend_lock_renews_it(redis_url, qname, queue, r):
    with Worker(qname, None, connection=redis_url, lock_duration=1.0) as manual:
        first, second = queue.add("a", {}), queue.add("b", {})
        job = manual.get_next_job("t")
        kept = manual.get_next_job("u")
        for _ in range(4):
            time.sleep(0.35)
            assert kept.extend_lock("u", 1.0) is True
        assert not r.exists(queue.keys.lock(first.id))        # expired: never renewed
        assert r.get(queue.keys.lock(second.id)) == "u"
        with pytest.raises(errors.LockLost):
            job.move_to_completed(1, "t")
        kept.move_to_completed(2, "u")


def test_an_expired_job_is_taken_back_by_the_stalled_check_timer(redis_url, qname, queue):
    stalled = []
    with Worker(qname, None, connection=redis_url, lock_duration=0.3,
                stalled_interval=0.2) as manual:
        manual.on("stalled", stalled.append)
        added = queue.add("x", {})
        manual.get_next_job("t")
        manual.start_stalled_check_timer()
        manual.start_stalled_check_timer()          # idempotent: one thread
        assert len([t for t in orijs_threads() if "stalled-checker" in t.name]) == 1
        wait_until(lambda: stalled == [added.id], 10)
        assert queue.get_job_state(added.id) == "waiting"
        again = manual.get_next_job("t2")
        assert again.id == added.id and again.attempts_started == 2
        again.move_to_completed(1, "t2")
    wait_until(lambda: not [t for t in orijs_threads() if "stalled-checker" in t.name], 5)


def test_move_to_wait_and_move_to_delayed_count_no_attempt(manual, queue, r):
    added = queue.add("x", {}, attempts=2)
    job = manual.get_next_job("t")
    assert job.move_to_wait("t") == 0.0
    assert queue.get_job_state(added.id) == "waiting" and not r.exists(queue.keys.lock(added.id))
    job = manual.get_next_job("t")
    job.move_to_delayed(time.time() + 60, "t")
    assert queue.get_job_state(added.id) == "delayed"
    assert r.hget(queue.keys.job(added.id), "atm") is None


def test_moves_of_a_job_gone_or_unlocked_say_so_as_bullmq_does(manual, queue, r):
    added = queue.add("x", {})
    job = manual.get_next_job("t")
    queue.client.delete(queue.keys.lock(added.id))          # its lock expired...
    assert queue.remove(added.id)                           # ...and it was removed
    keys = sorted(r.keys("*"))
    for move in (lambda: job.move_to_delayed(time.time() + 60, "t"),
                 lambda: job.move_to_wait("t")):
        with pytest.raises(errors.JobNotFound, match="does not exist"):
            move()
    assert sorted(r.keys("*")) == keys
    waiting = queue.add("y", {})
    with pytest.raises(errors.LockLost, match="lock is gone"):    # BullMQ checks the lock first
        queue.get_job(waiting.id).move_to_delayed(time.time() + 60, "t")
    assert queue.get_job_state(waiting.id) == "waiting"


def test_max_started_attempts_fails_a_job_started_too_often(redis_url, qname, queue):
    failed = []
    with Worker(qname, None, connection=redis_url, max_started_attempts=1) as manual:
        manual.on("failed", lambda job, exc: failed.append((job.id, str(exc))))
        first, second = queue.add("a", {}), queue.add("b", {})
        job = manual.get_next_job("t")
        job.move_to_wait("t")                       # started once, back to wait
        taken = manual.get_next_job("t")            # the first fails, started twice
        assert taken.id == second.id
        assert failed == [(first.id, "job started more than allowable limit")]
        assert queue.get_job(first.id).failed_reason == "job started more than allowable limit"


def test_a_rate_limited_take_waits_for_the_limit(redis_url, qname, queue):
    with Worker(qname, None, connection=redis_url,
                limiter={"max": 1, "duration": 0.8}) as manual:
        queue.add("a", {})
        queue.add("b", {})
        manual.get_next_job("t").move_to_completed(1, "t")
        assert manual.get_next_job("t", block=False) is None
        started = time.monotonic()
        job = manual.get_next_job("t", timeout=5)
        assert job is not None and job.name == "b"
        assert 0.3 < time.monotonic() - started < 3.0


def test_events_of_a_manual_worker(manual, queue):
    seen = []
    for event in ("ready", "active", "drained", "completed", "failed", "closing", "closed"):
        manual.on(event, lambda *args, event=event: seen.append(event))
    manual.get_next_job("t", block=False)
    queue.add("a", {})
    manual.get_next_job("t").move_to_completed(1, "t")      # no worker event, as BullMQ
    manual.get_next_job("t", block=False)
    manual.close()
    assert seen == ["ready", "drained", "active", "drained", "closing", "closed"]


def test_paused_or_closed_takes_nothing_and_close_cuts_a_blocked_take(manual, queue):
    queue.add("a", {})
    manual.pause()
    assert manual.get_next_job("t") is None
    manual.resume()
    manual.get_next_job("t").move_to_completed(1, "t")
    results = []
    taker = threading.Thread(target=lambda: results.append(manual.get_next_job("t", timeout=30)))
    taker.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert manual.close(timeout=5)
    taker.join(5)
    assert not taker.is_alive() and results == [None]
    assert time.monotonic() - started < 3.0
    assert manual.get_next_job("t") is None


def test_a_handlers_job_may_be_moved_by_hand(queue, redis_url, qname, events):
    def handler(job):
        job.move_to_completed({"by": "hand"}, job.token)
        return "ignored"
    errors_seen = []
    added = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url) as worker:
        worker.on("error", errors_seen.append)
        assert added.wait_until_finished(events, timeout=10) == {"by": "hand"}
    assert errors_seen == []


def test_arguments_are_checked_before_anything_is_written(manual, queue, redis_url, qname, r):
    added = queue.add("x", {})
    with pytest.raises(errors.InvalidArgumentType, match="token"):
        manual.get_next_job(1)
    with pytest.raises(errors.InvalidArgument, match="token"):
        manual.get_next_job("")
    with pytest.raises(errors.InvalidArgumentType, match="block"):
        manual.get_next_job("t", block="yes")
    with pytest.raises(errors.InvalidArgument, match="timeout"):
        manual.get_next_job("t", timeout=-1)
    assert queue.get_job_state(added.id) == "waiting"
    job = manual.get_next_job("t")
    with pytest.raises(errors.InvalidArgumentType, match="error must be an exception"):
        job.move_to_failed("broken", "t")
    with pytest.raises(errors.InvalidArgumentType, match="return_value"):
        job.move_to_completed(object(), "t")
    with pytest.raises(errors.InvalidArgumentType, match="fetch_next"):
        job.move_to_completed(1, "t", fetch_next=1)
    with pytest.raises(errors.InvalidArgument, match="duration"):
        job.extend_lock("t", 0)
    assert queue.get_job_state(added.id) == "active" and r.get(queue.keys.lock(job.id)) == "t"
    with pytest.raises(errors.InvalidStateError, match="read by a Queue"):
        queue.get_job(added.id).move_to_completed(1, "t")


def test_what_a_manual_worker_refuses(manual, redis_url, qname):
    with pytest.raises(errors.InvalidStateError, match="get_next_job"):
        manual.start()
    with Worker(qname, lambda job: 1, connection=redis_url) as worker:
        with pytest.raises(errors.InvalidStateError, match="processor=None"):
            worker.get_next_job("t")
        with pytest.raises(errors.InvalidStateError, match="processor=None"):
            worker.start_stalled_check_timer()
    for option in ({"processes": 2}, {"autorun": True}):
        with pytest.raises(errors.InvalidArgument, match="processor"):
            Worker(qname, None, connection=redis_url, **option)


def test_close_racing_a_take_that_is_about_to_block(redis_url, qname):
    for i in range(20):
        worker = Worker(qname, None, connection=redis_url)
        results = []
        taker = threading.Thread(target=lambda: results.append(worker.get_next_job("t",
                                                                                   timeout=10)))
        taker.start()
        time.sleep(random.random() * 0.02)      # before, during or after it blocks
        started = time.monotonic()
        worker.close(timeout=5)
        taker.join(5)
        assert not taker.is_alive() and results == [None], i
        assert time.monotonic() - started < 2.5, i
