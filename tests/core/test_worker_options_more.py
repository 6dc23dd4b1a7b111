"""BullMQ's worker options max_started_attempts, skip_lock_renewal, lock_renew_time and
maximum_rate_limit_delay (seconds), as BullMQ applies them, on real Redis."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def _stall_once(queue, redis_url, qname, added):
    """Start the job once and let its lock expire (a crashed worker), so that it goes
    back to wait with one start counted."""
    with Worker(qname, None, connection=redis_url, lock_duration=0.2,
                stalled_interval=0.1) as manual:
        manual.get_next_job("t")
        manual.start_stalled_check_timer()
        wait_until(lambda: queue.get_job_state(added.id) == "waiting", 10)


def test_max_started_attempts_fails_a_job_started_too_often(queue, redis_url, qname, events):
    added = queue.add("x", {}, attempts=5)
    _stall_once(queue, redis_url, qname, added)
    ran = []
    failed = []
    with Worker(qname, ran.append, connection=redis_url, max_started_attempts=1) as worker:
        worker.on("failed", lambda job, exc: failed.append(str(exc)))
        with pytest.raises(errors.JobFailed, match="job started more than allowable limit"):
            added.wait_until_finished(events, timeout=10)
    assert ran == [] and failed == ["job started more than allowable limit"]
    stored = queue.get_job(added.id)
    assert stored.attempts_started == 2 and queue.get_job_state(added.id) == "failed"


def test_max_started_attempts_zero_or_none_is_no_limit(queue, redis_url, qname, events):
    added = queue.add("x", {})
    _stall_once(queue, redis_url, qname, added)
    with Worker(qname, lambda job: "ran", connection=redis_url, max_started_attempts=0):
        assert added.wait_until_finished(events, timeout=10) == "ran"


def test_max_started_attempts_allows_that_many_starts(queue, redis_url, qname, events):
    added = queue.add("x", {})
    _stall_once(queue, redis_url, qname, added)
    with Worker(qname, lambda job: job.attempts_started, connection=redis_url,
                max_started_attempts=2):
        assert added.wait_until_finished(events, timeout=10) == 2


def _lock_ttls(queue, r, job_id, seconds):
    """The lock's remaining ms, sampled every 50 ms for ``seconds``."""
    ttls = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ttls.append(r.pttl(queue.keys.lock(job_id)))
        time.sleep(0.05)
    return ttls


def _run_blocked(queue, worker_kwargs, redis_url, qname, r, seconds):
    release, started = threading.Event(), threading.Event()

    def handler(job):
        started.set()
        release.wait(20)
        return 1

    added = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url, **worker_kwargs) as worker:
        errors_seen = []
        worker.on("error", errors_seen.append)
        assert started.wait(10)
        ttls = _lock_ttls(queue, r, added.id, seconds)
        release.set()
    return added, ttls, errors_seen


def test_skip_lock_renewal_lets_the_lock_expire(queue, redis_url, qname, r):
    cpu = time.process_time()
    added, ttls, errors_seen = _run_blocked(
        queue, {"lock_duration": 0.5, "skip_lock_renewal": True}, redis_url, qname, r, 1.0)
    assert time.process_time() - cpu < 0.6         # the renewer rests, it does not spin
    assert ttls[-1] == -2                          # expired while the handler ran
    wait_until(lambda: errors_seen, 5)             # its outcome could not be written
    assert isinstance(errors_seen[0], errors.LockLost)
    assert queue.get_job_state(added.id) == "active"     # left to the stalled check


def test_locks_are_renewed_by_default(queue, redis_url, qname, r):
    added, ttls, errors_seen = _run_blocked(queue, {"lock_duration": 1.0}, redis_url, qname,
                                            r, 1.5)
    assert min(ttls) > 0 and errors_seen == []
    assert queue.get_job_state(added.id) == "completed"


def test_lock_renew_time_paces_the_renewals(queue, redis_url, qname, r):
    # renewed every half of lock_renew_time (0.2 s): the 6 s lock stays near 6 s (0.6 s of
    # slack for a loaded machine); with the default (every 1.5 s) it falls to about 4.5 s
    # before each renewal, and a 2 s look sees one
    _, ttls, _ = _run_blocked(queue, {"lock_duration": 6, "lock_renew_time": 0.4},
                              redis_url, qname, r, 2.0)
    assert min(ttls) > 5_200
    _, ttls, _ = _run_blocked(queue, {"lock_duration": 6}, redis_url, qname, r, 2.0)
    assert min(ttls) < 5_000


def _rate_limited_with_a_delayed_job(queue, redis_url, qname, r, **kwargs):
    """The queue rate limited for 30 s (as worker.rate_limit(30) does) and a job delayed
    0.3 s: only a worker looking again while limited promotes it."""
    worker = Worker(qname, lambda job: 1, connection=redis_url,
                    limiter={"max": 100, "duration": 60}, **kwargs)
    r.set(queue.keys.limiter, 9007199254740991, px=30_000)
    delayed = queue.add("later", {}, delay=0.3)
    worker.start()
    return worker, delayed


def test_maximum_rate_limit_delay_bounds_a_rate_limited_wait(queue, redis_url, qname, r):
    worker, delayed = _rate_limited_with_a_delayed_job(queue, redis_url, qname, r,
                                                       maximum_rate_limit_delay=0.2)
    try:
        wait_until(lambda: queue.get_job_state(delayed.id) == "waiting", 5)   # promoted
    finally:
        worker.close()


def test_the_default_rate_limit_wait_is_not_cut_short(queue, redis_url, qname, r):
    worker, delayed = _rate_limited_with_a_delayed_job(queue, redis_url, qname, r)
    try:
        time.sleep(1.5)
        assert queue.get_job_state(delayed.id) == "delayed"       # nobody looked again
    finally:
        worker.close()


@pytest.mark.parametrize("kwargs, error, argument", [
    ({"max_started_attempts": -1}, errors.InvalidArgument, "max_started_attempts"),
    ({"max_started_attempts": 1.5}, errors.InvalidArgumentType, "max_started_attempts"),
    ({"skip_lock_renewal": "yes"}, errors.InvalidArgumentType, "skip_lock_renewal"),
    ({"lock_renew_time": 0}, errors.InvalidArgument, "lock_renew_time"),
    ({"lock_renew_time": 31}, errors.InvalidArgument, "lock_renew_time"),
    ({"lock_renew_time": "1"}, errors.InvalidArgumentType, "lock_renew_time"),
    ({"maximum_rate_limit_delay": 0}, errors.InvalidArgument, "maximum_rate_limit_delay"),
    ({"maximum_rate_limit_delay": None}, errors.InvalidArgumentType,
     "maximum_rate_limit_delay"),
])
def test_bad_values_are_refused_naming_the_option(redis_url, qname, kwargs, error, argument):
    with pytest.raises(error) as info:
        Worker(qname, lambda job: 1, connection=redis_url, **kwargs)
    assert info.value.argument == argument
