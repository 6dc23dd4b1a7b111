"""QueueEvents: one thread over many streams, listeners and waits."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import orijs_threads, wait_until


def test_one_thread_watches_many_queues(redis_url, namespace):
    names = [f"ev{i}-{namespace}" for i in range(3)]
    seen = []
    with QueueEvents(names, connection=redis_url) as ev:
        ev.on_event(lambda e: seen.append((e.queue, e.event)))
        for name in names:
            with Queue(name, connection=redis_url) as q:
                q.add("x", {})
        wait_until(lambda: len(seen) == 6)
        assert len(orijs_threads()) == 1
    assert {q for q, _ in seen} == set(names)
    assert orijs_threads() == []


def test_many_streams_are_shared_out_over_a_few_threads(redis_url, namespace, r):
    from orijs_sync.queue_events import SHARD_SIZE
    names = [f"sh{i}-{namespace}" for i in range(SHARD_SIZE * 3 + 5)]
    seen = []
    with QueueEvents(names[:-1], connection=redis_url) as ev:
        ev.on("completed", lambda job_id, value: seen.append(job_id))
        ev.add_queue(names[-1])                    # after start: read at once
        assert len(orijs_threads()) == 4           # one per SHARD_SIZE streams
        picked = names[::SHARD_SIZE // 2] + [names[-1]]
        for name in picked:                        # a stream of every shard
            r.xadd(f"bull:{name}:events", {"event": "completed", "jobId": name,
                                           "returnvalue": "1"})
        wait_until(lambda: sorted(seen) == sorted(picked), 20)
        ev.remove_queue(names[0])
        r.xadd(f"bull:{names[0]}:events", {"event": "completed", "jobId": "gone",
                                           "returnvalue": "1"})
        r.xadd(f"bull:{names[1]}:events", {"event": "completed", "jobId": "kept",
                                           "returnvalue": "1"})
        wait_until(lambda: "kept" in seen, 20)
        assert "gone" not in seen
    assert orijs_threads() == []


def test_listeners_get_job_id_and_value(queue, events, redis_url, qname):
    got = {}
    events.on("completed", lambda job_id, value: got.setdefault("completed", (job_id, value)))
    events.on("failed", lambda job_id, value: got.setdefault("failed", (job_id, value)))
    events.on("progress", lambda job_id, value: got.setdefault("progress", (job_id, value)))

    def handler(job):
        if job.data.get("fail"):
            raise ValueError("nope")
        job.update_progress({"pct": 50})
        return [1, 2]

    ok, bad = queue.add("x", {}), queue.add("x", {"fail": True})
    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: len(got) == 3)
    assert got["completed"] == (ok.id, [1, 2])
    assert got["failed"] == (bad.id, "nope")
    assert got["progress"] == (ok.id, {"pct": 50})


@pytest.mark.parametrize("protocol", [2, 3])
def test_events_and_jobs_over_either_protocol(redis_url, qname, protocol):
    """Over RESP3 (``?protocol=3``) XREAD answers a map of streams, not a list of pairs:
    the events thread reads both shapes (it once failed on every read of a RESP3
    reply), as the fetcher's BZPOPMIN does."""
    url = f"{redis_url}{'&' if '?' in redis_url else '?'}protocol={protocol}"
    got = []
    with Queue(qname, connection=url) as queue, QueueEvents(qname, connection=url) as events:
        events.on("completed", lambda job_id, value: got.append((job_id, value)))
        with Worker(qname, lambda job: job.data["n"] * 2, connection=url):
            job = queue.add("x", {"n": 21})
            assert job.wait_until_finished(events, timeout=10) == 42
            later = queue.add("x", {"n": 1})     # the fetcher blocked in BZPOPMIN meanwhile
            assert later.wait_until_finished(events, timeout=10) == 2
        wait_until(lambda: len(got) == 2)
    assert got == [(job.id, 42), (later.id, 2)]


def test_a_failing_listener_does_not_stop_the_thread(queue, events):
    """Each event reaches the failing listener once, and the thread goes on past it.
    Counting calls alone would pass if the failure made the thread deliver the first
    event again: the calls are the job ids, in order, each once, once the thread has
    read past everything written (``catch_up``: it does not if it keeps re-reading)."""
    calls = []

    def broken(job_id, value):
        calls.append(job_id)
        raise RuntimeError("listener bug")

    events.on("added", broken)
    jobs = [queue.add("x", {}) for _ in range(3)]
    wait_until(lambda: set(calls) >= {job.id for job in jobs}, what="every job's event")
    assert events.catch_up(10)
    assert calls == [job.id for job in jobs]


def test_wait_until_finished_on_an_already_finished_job(queue, events, redis_url, qname):
    job = queue.add("x", {"v": 3})
    with Worker(qname, lambda j: j.data["v"] * 2, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "completed")
    assert job.wait_until_finished(events, timeout=1) == 6


def test_wait_until_finished_times_out(queue, events):
    job = queue.add("x", {})
    with pytest.raises(errors.TimeoutError):
        job.wait_until_finished(events, timeout=0.2)
    with pytest.raises(TimeoutError):  # the builtin too
        job.wait_until_finished(events, timeout=0.1)
    assert events._waiters == {}


def test_close_fails_pending_waits(queue, redis_url, qname):
    ev = QueueEvents(qname, connection=redis_url)
    fut = ev.job_future(queue, queue.add("x", {}).id)
    ev.close()
    with pytest.raises(errors.ShutdownError):
        fut.result(timeout=1)
    with pytest.raises(errors.ShutdownError):
        ev.job_future(queue, "1")


def test_close_from_a_listener_completes_the_close(queue, redis_url, namespace, r):
    """close() on the events thread itself (from a listener) cannot join that thread;
    it once raised there and skipped the rest of the close. Now it does all but the
    join: pending waits fail with ShutdownError, the connections are let go, no
    listener is called again, and the thread ends once the listener returns."""
    name = f"qe-close-{namespace}"
    url = f"{redis_url}{'&' if '?' in redis_url else '?'}client_name={name}"
    ev = QueueEvents(queue.name, connection=url, autorun=False)
    try:
        first = queue.add("x", {})
        pending = ev.job_future(queue, first.id)      # no worker runs it
        queue.add("x", {})
        queue.add("x", {})
        calls, raised = [], []

        def close_here(job_id, value):
            calls.append(job_id)
            try:
                ev.close()
            except Exception as exc:  # noqa: BLE001 - the test reports it below
                raised.append(exc)

        ev.on("added", close_here)
        ev.start()          # its first read takes the three "added" events at once
        with pytest.raises(errors.ShutdownError):
            pending.result(timeout=10)
        wait_until(lambda: orijs_threads() == [], 10, "the events thread to end")
        assert raised == []
        assert calls == [first.id]
        assert ev._waiters == {}
        wait_until(lambda: all(c["name"] != name for c in r.client_list()), 10,
                   "the QueueEvents' connections to be closed")
    finally:
        ev.close()


def test_remove_queue_settles_the_waits_on_its_jobs(redis_url, namespace):
    """A wait on a job of a queue no longer watched would never hear of its outcome:
    remove_queue fails it at once with ShutdownError naming the queue. Waits on the
    queues still watched go on."""
    kept, dropped = f"k-{namespace}", f"d-{namespace}"
    with QueueEvents([kept, dropped], connection=redis_url) as ev, \
            Queue(kept, connection=redis_url) as qk, Queue(dropped, connection=redis_url) as qd:
        blocked, future_job, kept_job = qd.add("x", {}), qd.add("x", {}), qk.add("x", {"v": 7})
        outcome: list = []

        def wait_blocked():
            try:
                outcome.append(blocked.wait_until_finished(ev, timeout=30))
            except Exception as exc:  # noqa: BLE001 - the test looks at it below
                outcome.append(exc)

        waiter = threading.Thread(target=wait_blocked, name="test-waiter")
        waiter.start()
        try:
            future = ev.job_future(qd, future_job.id)
            kept_future = ev.job_future(qk, kept_job.id)
            wait_until(lambda: (dropped, blocked.id) in ev._waiters)
            ev.remove_queue(dropped)
            assert isinstance(future.exception(timeout=5), errors.ShutdownError)
            with pytest.raises(errors.ShutdownError, match=f"no longer watches queue '{dropped}'"):
                future.result(timeout=0)
        finally:
            waiter.join(10)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], errors.ShutdownError)
        assert dropped in str(outcome[0])
        assert all(queue == kept for queue, _ in ev._waiters)
        with Worker(kept, lambda j: j.data["v"], connection=redis_url):
            assert kept_future.result(timeout=10) == 7


def test_a_wait_begun_as_its_queue_is_removed_is_refused(redis_url, namespace,
                                                        monkeypatch):
    """remove_queue between a wait's check that the queue is watched and its
    registration would leave it registered on a queue nobody reads: the check is made
    as it registers, so the wait is refused (or, registered first, failed by
    remove_queue)."""
    name = f"d-{namespace}"
    with QueueEvents(name, connection=redis_url) as ev, \
            Queue(name, connection=redis_url) as q:
        job = q.add("x", {})
        real = QueueEvents.resume_after_fork

        def removed_meanwhile(self):      # runs inside job_future, before it registers
            self.remove_queue(name)
            real(self)
        monkeypatch.setattr(QueueEvents, "resume_after_fork", removed_meanwhile)
        with pytest.raises(errors.InvalidArgument, match="does not watch"):
            ev.job_future(q, job.id)
        assert ev._waiters == {}


def test_wait_on_a_job_finished_and_removed_before_the_wait_began(queue, events, redis_url,
                                                                  qname, r):
    job = queue.add("x", {"v": 5}, remove_on_complete=True)
    failing = queue.add("x", {"v": 0}, remove_on_fail=True)
    with Worker(qname, lambda j: 10 // j.data["v"], connection=redis_url):
        wait_until(lambda: not r.exists(queue.keys.job(job.id), queue.keys.job(failing.id)))
    wait_until(lambda: (qname, failing.id) in events._recent)
    # The hashes are gone; the events thread saw both outcomes and remembers them.
    assert job.wait_until_finished(events, timeout=1) == 2
    with pytest.raises(errors.JobFailed, match="division"):
        failing.wait_until_finished(events, timeout=1)


def test_recent_outcomes_are_bounded(redis_url, qname):
    with QueueEvents(qname, connection=redis_url, recent_outcomes=10) as ev, \
            Queue(qname, connection=redis_url) as q:
        q.add_bulk([{"name": "x", "data": {}} for _ in range(30)])
        with Worker(qname, lambda j: None, connection=redis_url, concurrency=4):
            wait_until(lambda: q.get_job_counts("completed")["completed"] == 30)
        wait_until(lambda: len(ev._recent) == 10)
        time.sleep(0.2)
        assert len(ev._recent) == 10


def test_add_queue_takes_effect_at_once(redis_url, namespace):
    first, second = f"a-{namespace}", f"b-{namespace}"
    seen = []
    with QueueEvents(first, connection=redis_url, block_timeout=30) as ev:
        ev.on_event(lambda e: seen.append(e.queue))
        time.sleep(0.2)              # the tailer is blocked on the first stream only
        ev.add_queue(second)
        with Queue(second, connection=redis_url) as q:
            q.add("x", {})
        wait_until(lambda: second in seen, 5)   # well before the 30 s block would end


def test_a_retried_job_is_not_answered_with_its_earlier_failure(queue, events, redis_url, qname):
    runs = []

    def second_time_lucky(job):
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("first run fails")
        return "second run"

    job = queue.add("x", {})
    with Worker(qname, second_time_lucky, connection=redis_url):
        with pytest.raises(errors.JobFailed, match="first run"):
            job.wait_until_finished(events, timeout=10)
        wait_until(lambda: (qname, job.id) in events._recent)
    job.retry()          # back to wait: no worker runs it now
    with pytest.raises(errors.TimeoutError):
        job.wait_until_finished(events, timeout=0.5)
    with Worker(qname, second_time_lucky, connection=redis_url):
        assert job.wait_until_finished(events, timeout=10) == "second run"


def test_a_reused_job_id_is_not_answered_with_the_earlier_jobs_outcome(queue, events,
                                                                       redis_url, qname):
    first = queue.add("x", {"v": 1}, job_id="reused")
    with Worker(qname, lambda j: j.data["v"], connection=redis_url):
        assert first.wait_until_finished(events, timeout=10) == 1
    wait_until(lambda: (qname, "reused") in events._recent)
    assert queue.remove("reused")
    second = queue.add("x", {"v": 2}, job_id="reused")
    with pytest.raises(errors.TimeoutError):
        second.wait_until_finished(events, timeout=0.5)
    with Worker(qname, lambda j: j.data["v"], connection=redis_url):
        assert second.wait_until_finished(events, timeout=10) == 2


def test_the_first_queue_added_to_an_empty_queue_events_is_read_at_once(redis_url, qname):
    seen = []
    with QueueEvents([], connection=redis_url, block_timeout=30) as ev, \
            Queue(qname, connection=redis_url) as q:
        ev.on_event(lambda e: seen.append(e.event))
        time.sleep(0.2)              # the tailer sleeps: nothing to watch
        ev.add_queue(qname)
        q.add("x", {})
        wait_until(lambda: "added" in seen, 5)   # well before the 30 s sleep would end


def test_remove_queue_and_off_stop_deliveries(redis_url, namespace):
    kept, dropped = f"k-{namespace}", f"d-{namespace}"
    raw, added = [], []

    def on_added(job_id, name):
        added.append(job_id)

    with QueueEvents([kept, dropped], connection=redis_url) as ev, \
            Queue(kept, connection=redis_url) as qk, Queue(dropped, connection=redis_url) as qd:
        ev.on_event(lambda e: raw.append(e.queue))
        ev.on("added", on_added)
        qd.add("x", {})
        first = qk.add("x", {})
        wait_until(lambda: raw.count(kept) >= 2 and dropped in raw and first.id in added)
        ev.remove_queue(dropped)
        ev.off("added", on_added)
        assert ev.queues == [kept]
        with pytest.raises(ValueError, match="does not watch"):
            ev.job_future(qd, "1")
        before_dropped, before_added = raw.count(dropped), len(added)
        qd.add("x", {})
        marker = qk.add("x", {})
        wait_until(lambda: raw.count(kept) >= 4)          # the marker's events came through
        assert raw.count(dropped) == before_dropped and len(added) == before_added
        assert marker.id not in added


def test_a_wait_for_a_job_removed_on_completion_before_its_event_is_read(
        queue, redis_url, qname):
    """The job finished and was removed before the wait began, and the events thread
    has not read its outcome yet: the outcome, read later, settles the wait. (The
    QueueEvents is made after the write, so no Worker's write told it: see
    test_local_handoff for that.)"""
    job = queue.add("x", {"n": 7}, remove_on_complete=True)
    with Worker(qname, lambda j: j.data["n"] * 6, connection=redis_url):
        wait_until(lambda: queue.get_job(job.id) is None, 20)           # done and removed
    events = QueueEvents(qname, connection=redis_url, autorun=False,     # reads nothing yet
                         last_event_id="0")
    try:
        future = events.job_future(queue, job.id)
        assert not future.done()
        events.start()                                  # reads the stream from before the add
        assert future.result(timeout=10) == 42
    finally:
        events.close()


def test_a_wait_reads_the_jobs_current_run_in_one_round_trip(queue, events, redis_url,
                                                             qname, r):
    """Before it listens, a wait reads the job's state, outcome and the stream's last id
    in one script call: no SCRIPT EXISTS and no MULTI per wait (each was one more round
    trip on the caller's path); the answers stay those of the run it waits for."""
    def calls(name: str) -> int:
        return int(r.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))

    with Worker(qname, lambda j: j.data["v"] * 2, connection=redis_url):
        assert queue.add("x", {"v": 1}).wait_until_finished(events, timeout=10) == 2
        before = {name: calls(name) for name in ("script|exists", "multi", "exec")}
        done = [queue.add("x", {"v": v}) for v in range(2, 12)]
        assert [j.wait_until_finished(events, timeout=10) for j in done] == \
            [v * 2 for v in range(2, 12)]
        failing = queue.add("x", {"v": {}})          # {} * 2 raises
        with pytest.raises(errors.JobFailed):
            failing.wait_until_finished(events, timeout=10)
        # already finished: answered from the read alone
        assert done[0].wait_until_finished(events, timeout=1) == 4
    assert {name: calls(name) for name in ("script|exists", "multi", "exec")} == before


def test_a_wait_on_a_job_this_process_added_asks_redis_nothing(queue, events, redis_url,
                                                               qname, monkeypatch):
    """``Queue.add`` knows the id of its job's "added" event. Every outcome of that run
    is written after it, and the events thread reads the stream from before it, so a
    wait that starts before the run ends listens without reading the job's state first
    (one round trip less on the request-response path). A wait that starts after the
    outcome was read asks Redis which run is current."""
    reads: list = []
    real = QueueEvents._current_run

    def counted(self, q, job_id):
        reads.append(job_id)
        return real(self, q, job_id)
    monkeypatch.setattr(QueueEvents, "_current_run", counted)
    gate = threading.Event()
    with Worker(qname, lambda j: gate.wait(10) and j.data["v"] * 2, connection=redis_url,
                concurrency=4):
        jobs = [queue.add("x", {"v": v}) for v in range(3)]
        events.catch_up(5)        # the thread has read past their "added" events
        waits = [events._job_future(queue, j.id, j._added_event) for j in jobs]
        gate.set()
        assert [f.result(timeout=10) for f in waits] == [0, 2, 4]
        assert reads == []
        wait_until(lambda: (qname, jobs[1].id) in events._recent)
        assert jobs[1].wait_until_finished(events, timeout=5) == 2
        assert reads == [jobs[1].id]


def test_a_wait_listening_without_a_read_ignores_an_earlier_run_of_its_id(
        queue, redis_url, qname, monkeypatch):
    """A run of the same id removed on finishing, its outcome still unread by the events
    thread, does not settle the wait on the next run."""
    first = queue.add("x", {"v": "first"}, job_id="dup", remove_on_complete=True)
    with Worker(qname, lambda j: j.data["v"], connection=redis_url):
        wait_until(lambda: queue.get_job(first.id) is None)
    gate = threading.Event()
    real = QueueEvents._deliver

    def held(self, *args):
        gate.wait(10)
        return real(self, *args)
    monkeypatch.setattr(QueueEvents, "_deliver", held)
    with QueueEvents(qname, connection=redis_url, last_event_id="0-0") as events:
        second = queue.add("x", {"v": "second"}, job_id="dup")
        assert second._added_event is not None
        future = events._job_future(queue, second.id, second._added_event)
        gate.set()             # the thread now reads the first run's outcome, then more
        events.catch_up(5)
        assert not future.done()
        with Worker(qname, lambda j: j.data["v"], connection=redis_url):
            assert future.result(timeout=10) == "second"


def test_a_job_id_that_existed_gives_no_added_event(queue):
    queue.add("x", {}, job_id="same")
    again = queue.add("x", {}, job_id="same")
    assert again._added_event is None


def test_a_wait_after_its_outcome_left_the_remembered_ones_reads_redis(queue, redis_url,
                                                                       qname):
    """The outcome of a job added here was read and then dropped from the bounded
    memory of recent outcomes: the wait cannot listen for it, so it reads Redis."""
    with QueueEvents(qname, connection=redis_url, recent_outcomes=2) as events:
        with Worker(qname, lambda j: j.data["v"], connection=redis_url):
            first = queue.add("x", {"v": "first"})
            later = [queue.add("x", {"v": v}) for v in range(4)]
            assert later[-1].wait_until_finished(events, timeout=10) == 3
            events.catch_up(5)
            assert (qname, first.id) not in events._recent
            assert first.wait_until_finished(events, timeout=5) == "first"
