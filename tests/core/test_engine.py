"""Many queues in one engine: the Workers of a WorkerGroup share the fetcher,
finisher, lock renewer, stalled checker and handler pool, while each queue keeps its
own concurrency, rate limit, pause and stalled recovery."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, Iterator, List

import pytest

from orijs_sync import Queue, Worker, WorkerGroup, errors, worker_group
from orijs_sync.connection import RedisConnection
from orijs_sync.testing import wait_until


@pytest.fixture
def conn(redis_url: str) -> Iterator[RedisConnection]:
    c = RedisConnection(redis_url)
    yield c
    c.close()


@pytest.fixture
def group(conn: RedisConnection) -> Iterator[WorkerGroup]:
    g = WorkerGroup(conn)
    yield g
    g.close()


def engine_threads() -> List[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("orijs-")]


class Gauge:
    """Jobs running at once, per queue, and the most seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: Dict[str, int] = {}
        self.most: Dict[str, int] = {}
        self.release = threading.Event()

    def handler(self, name: str):
        def run(job):
            with self.lock:
                self.now[name] = self.now.get(name, 0) + 1
                self.most[name] = max(self.most.get(name, 0), self.now[name])
            self.release.wait(30)
            with self.lock:
                self.now[name] -= 1
            return job.id
        return run


def test_the_workers_of_a_group_share_one_set_of_threads(conn, group, namespace):
    before = set(engine_threads())
    names = [f"share-{namespace}-{i}" for i in range(30)]
    workers = [Worker(n, lambda job: job.data["i"], group=group).start() for n in names]
    try:
        roles = [t for t in engine_threads() if t not in before]
        assert sorted(roles) == ["orijs-fetcher-group", "orijs-finisher-group",
                                 "orijs-finisher-group-2", "orijs-lock-renewer-group",
                                 "orijs-stalled-checker-group"]
        queues = [Queue(n, connection=conn) for n in names]
        for i, q in enumerate(queues):
            q.add("x", {"i": i})
        wait_until(lambda: all(q.get_job_counts("completed")["completed"] == 1 for q in queues),
                   30)
        assert [q.get_jobs("completed")[0].returnvalue for q in queues] == list(range(30))
    finally:
        for w in workers:
            w.close()
    wait_until(lambda: not [t for t in engine_threads() if t not in before], 10)


def test_each_queue_keeps_its_own_concurrency(conn, group, namespace):
    gauge = Gauge()
    limits = {f"conc-{namespace}-a": 2, f"conc-{namespace}-b": 5}
    workers = [Worker(n, gauge.handler(n), group=group, concurrency=c).start()
               for n, c in limits.items()]
    try:
        for n in limits:
            Queue(n, connection=conn).add_bulk([{"name": "x", "data": {}} for _ in range(8)])
        wait_until(lambda: gauge.now == limits, 30)
        time.sleep(0.5)        # give an overrun a chance to show
        assert gauge.most == limits
        gauge.release.set()
        for n in limits:
            wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                "completed")["completed"] == 8, 30)
        assert gauge.most == limits
    finally:
        gauge.release.set()
        for w in workers:
            w.close()


def test_a_rate_limit_on_one_queue_does_not_slow_another(conn, group, namespace):
    slow, fast = f"rl-{namespace}-slow", f"rl-{namespace}-fast"
    done: Dict[str, int] = {slow: 0, fast: 0}

    def count(name):
        def run(job):
            done[name] += 1
        return run
    workers = [Worker(slow, count(slow), group=group, concurrency=5,
                      limiter={"max": 1, "duration": 60}).start(),
               Worker(fast, count(fast), group=group, concurrency=5).start()]
    try:
        Queue(slow, connection=conn).add_bulk([{"name": "x", "data": {}} for _ in range(5)])
        wait_until(lambda: done[slow] == 1, 20)
        Queue(fast, connection=conn).add_bulk([{"name": "x", "data": {}} for _ in range(50)])
        wait_until(lambda: done[fast] == 50, 30)
        assert done[slow] == 1          # still limited: one per minute
        assert Queue(slow, connection=conn).get_job_counts("waiting")["waiting"] == 4
    finally:
        for w in workers:
            w.close()


def test_pausing_one_queue_leaves_the_others_running(conn, group, namespace):
    names = [f"pause-{namespace}-{i}" for i in range(3)]
    done: Dict[str, int] = {n: 0 for n in names}

    def count(name):
        def run(job):
            done[name] += 1
        return run
    workers = {n: Worker(n, count(n), group=group, drain_delay=600).start() for n in names}
    queues = {n: Queue(n, connection=conn) for n in names}
    try:
        queues[names[0]].pause()                 # the whole queue (BullMQ's pause)
        workers[names[1]].pause()                # this worker only
        for q in queues.values():
            q.add("x", {})
        wait_until(lambda: done[names[2]] == 1, 20)
        time.sleep(0.5)
        assert done[names[0]] == done[names[1]] == 0
        queues[names[0]].resume()
        workers[names[1]].resume()
        wait_until(lambda: done[names[0]] == 1 and done[names[1]] == 1, 20)
    finally:
        for w in workers.values():
            w.close()


def add_from_another_process(redis_url: str, name: str) -> None:
    """Add a job as another process does: no Worker of this one can take it in the add's
    own call (see _local), so only a fetch, woken by the queue's marker, takes it."""
    code = f"from orijs_sync import Queue; Queue({name!r}, connection={redis_url!r}).add('x', {{}})"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def fetcher_blocked(r, client_name: str) -> bool:
    """The engine's fetcher (its connection named ``client_name``) is in a BZPOPMIN."""
    return any(c.get("name") == client_name and c.get("cmd") == "bzpopmin" and
               "b" in c.get("flags", "") for c in r.client_list())


def test_queues_join_and_leave_a_running_engine_without_waiting_a_block(conn, namespace,
                                                                        redis_url, r,
                                                                        monkeypatch):
    # Blocks of 10 min: a queue that joins is served only if its join wakes the fetcher
    # out of its block on the first queue's marker (drain_delay=600 likewise).
    monkeypatch.setattr(worker_group, "GROUP_BLOCK", 600.0)
    group = WorkerGroup(conn, name=f"join-{namespace}")
    first = Worker(f"join-{namespace}-a", lambda j: "a", group=group, drain_delay=600).start()
    later = f"join-{namespace}-b"
    completed = Queue(later, connection=conn).get_job_counts
    try:
        wait_until(lambda: fetcher_blocked(r, f"orijs:group:{group.name}"), 20,
                   what="the fetcher blocking on the first queue's marker")
        second = Worker(later, lambda j: "b", group=group, drain_delay=600)
        drained = threading.Event()
        second.on("drained", drained.set)
        second.start()
        wait_until(drained.is_set, 20, what="the joining queue's first fetch (a wake)")
        add_from_another_process(redis_url, later)
        wait_until(lambda: completed("completed")["completed"] == 1, 20,
                   what="the job taken by a fetch its marker woke")
        first.close(timeout=10)                   # a leaves; b still served
        add_from_another_process(redis_url, later)
        wait_until(lambda: completed("completed")["completed"] == 2, 20)
        assert second.close(timeout=10) is True
    finally:
        group.close(timeout=10)


def test_stalled_jobs_are_recovered_per_queue(conn, group, redis_url, namespace):
    names = [f"stall-{namespace}-{i}" for i in range(3)]
    for n in names:                   # a "crashed" worker took a job of each queue
        Queue(n, connection=conn).add("x", {})
        taker = Worker(n, lambda j: None, connection=redis_url, lock_duration=0.2)
        assert len(taker._move_to_active(1)[0]) == 1
    time.sleep(0.3)                   # their locks expire
    stalled: List[str] = []
    workers = []
    for n in names:
        w = Worker(n, lambda j: "rescued", group=group, stalled_interval=0.3)
        w.on("stalled", lambda job_id, n=n: stalled.append(n))
        workers.append(w.start())
    try:
        for n in names:
            wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                "completed")["completed"] == 1, 30)
        assert sorted(stalled) == sorted(names)
    finally:
        for w in workers:
            w.close()


MANY = """
import sys, time
from orijs_sync import Worker, WorkerGroup
group = WorkerGroup({url!r})
def handler(job):
    open(sys.argv[1], "a").write(f"start {{job.queue.name}}\\n")
    time.sleep(60)
for name in {names!r}:
    Worker(name, handler, group=group, lock_duration=1.0, stalled_interval=0.5).start()
time.sleep(120)
"""


def test_kill_9_of_a_process_serving_many_queues_recovers_every_queue(
        conn, redis_url, namespace, tmp_path):
    names = [f"k9-{namespace}-{i}" for i in range(12)]
    for n in names:
        Queue(n, connection=conn).add_bulk([{"name": "x", "data": {}} for _ in range(2)])
    log = tmp_path / "log.txt"
    script = tmp_path / "many.py"
    script.write_text(MANY.format(url=redis_url, names=names))
    proc = subprocess.Popen([sys.executable, str(script), str(log)])
    try:
        wait_until(lambda: log.exists() and log.read_text().count("start") == len(names), 60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(Queue(n, connection=conn).get_job_counts("active")["active"] == 1
               for n in names)
    workers = [Worker(n, lambda j: "rescued", connection=conn, stalled_interval=0.5,
                      lock_duration=1.0, concurrency=2).start() for n in names]
    try:
        for n in names:
            wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                "completed")["completed"] == 2, 60)
    finally:
        for w in workers:
            w.close()


def test_max_threads_bounds_the_jobs_running_at_once_over_all_queues(conn, namespace):
    gauge = Gauge()
    names = [f"cap-{namespace}-{i}" for i in range(3)]
    with WorkerGroup(conn, max_threads=4) as capped:
        for n in names:
            Worker(n, gauge.handler(n), group=capped, concurrency=5).start()
        queues = [Queue(n, connection=conn) for n in names]
        for q in queues:
            q.add_bulk([{"name": "x", "data": {}} for _ in range(5)])
        wait_until(lambda: sum(gauge.now.values()) == 4, 30)
        time.sleep(0.5)                          # give an overrun a chance to show
        assert sum(gauge.now.values()) == 4
        # no job is taken (locked in active) without a thread to run it
        assert sum(q.get_job_counts("active")["active"] for q in queues) == 4
        gauge.release.set()
        for q in queues:
            wait_until(lambda q=q: q.get_job_counts("completed")["completed"] == 5, 30)
    assert sum(gauge.most.values()) >= 4 and max(gauge.most.values()) <= 4


def test_a_wake_sent_before_the_block_reaches_redis_is_not_lost(conn, namespace, r):
    """The fetcher chose its markers and is about to send BZPOPMIN when a queue becomes
    fetchable: the wake must still end that block at once (a socket interrupt sent
    then finds no blocked call and is lost until the block times out)."""
    with WorkerGroup(conn) as g:
        idle = Worker(f"wake-{namespace}-idle", lambda j: None, group=g, drain_delay=600)
        idle.start()
        late = Worker(f"wake-{namespace}-late", lambda j: "ran", group=g, drain_delay=600)
        late.start()
        late.pause(wait=False)
        Queue(late.name, connection=conn).add("x", {})
        engine = idle._engine
        assert engine is not None and engine is late._engine
        pool = engine._fetcher.blocking.client.connection_pool
        for connection in pool._available_connections + list(pool._in_use_connections):
            connection.socket_timeout = 700.0    # its socket waits as long
            if connection._sock is not None:
                connection._sock.settimeout(700.0)
        # settled: blocked on idle's marker (its block ends within the group's 5 s), no
        # wake left over from the joins and the pause
        wait_until(lambda: engine._fetch_blocked and not r.exists(engine.wake_key), 20)
        armed = threading.Event()
        armed.set()
        start_block = engine.start_block

        def hooked():
            engine.longest_block = 600.0         # a lost wake would block that long
            markers, timeout = start_block()
            if markers and armed.is_set():       # chosen, not yet sent: wake now
                armed.clear()
                late.resume()
            return markers, timeout
        engine.start_block = hooked              # type: ignore[method-assign]
        wait_until(lambda: not armed.is_set(), 20)
        wait_until(lambda: Queue(late.name, connection=conn).get_job_counts(
            "completed")["completed"] == 1, 30)


def test_a_group_refuses_bad_arguments_and_workers_after_close(conn, redis_url, namespace):
    with pytest.raises(errors.InvalidArgumentType):
        WorkerGroup(conn, max_threads="8")        # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        WorkerGroup(conn, max_threads=0)
    g = WorkerGroup(conn)
    with pytest.raises(errors.InvalidArgument, match="group's connection"):
        Worker(f"bad-{namespace}", lambda j: None, group=g, connection=redis_url)
    g.close()
    late = Worker(f"late-{namespace}", lambda j: None, group=g)
    with pytest.raises(errors.ShutdownError):
        late.start()
    assert not late.is_running
    assert Queue(late.name, connection=conn).get_job_counts("active")["active"] == 0


def test_closing_the_group_closes_its_workers_and_joins_its_threads(conn, namespace):
    before = set(engine_threads())
    g = WorkerGroup(conn)
    workers = [Worker(f"gclose-{namespace}-{i}", lambda j: "ok", group=g).start()
               for i in range(5)]
    assert g.workers == workers
    assert g.close(timeout=10) is True
    assert all(not w.is_running for w in workers) and g.workers == []
    assert not [t for t in engine_threads() if t not in before]


def test_a_worker_alone_keeps_its_own_named_threads(conn, namespace):
    before = set(engine_threads())
    name = f"alone-{namespace}"
    with Worker(name, lambda j: "ok", connection=conn, concurrency=3):
        roles = sorted(t for t in engine_threads() if t not in before)
        assert roles == sorted([f"orijs-{r}-{name}" for r in
                                ("fetcher", "finisher", "lock-renewer", "stalled-checker")]
                               + [f"orijs-finisher-{name}-2"])   # its second writer
    assert not [t for t in engine_threads() if t not in before]


def test_each_queue_keeps_its_own_lock_renewed_in_one_engine(conn, group, namespace, r):
    """Jobs outliving their locks on two queues with different lock durations: both
    locks are renewed (in the one renewer's pipelined calls), each with its own duration,
    and a lock lost on one queue is reported by that queue's worker only."""
    locks = {f"lock-{namespace}-a": 1.0, f"lock-{namespace}-b": 2.0,
             f"lock-{namespace}-c": 1.0}
    release = threading.Event()
    errors_of: Dict[str, List[BaseException]] = {n: [] for n in locks}
    workers = {}
    for n, lock in locks.items():
        w = Worker(n, lambda job: release.wait(30) and "done", group=group, lock_duration=lock,
                   skip_stalled_check=True)
        w.on("error", errors_of[n].append)
        workers[n] = w.start()
    jobs = {n: Queue(n, connection=conn).add("x", {}) for n in locks}
    try:
        for n in locks:
            wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                "active")["active"] == 1, 20)
        lost = f"lock-{namespace}-c"
        r.set(f"bull:{lost}:{jobs[lost].id}:lock", "another-worker", px=60_000)
        time.sleep(2.5)                          # past every lock several times over
        for n, lock in locks.items():
            if n != lost:
                ttl = r.pttl(f"bull:{n}:{jobs[n].id}:lock")
                assert 0 < ttl <= lock * 1000
        release.set()
        for n in locks:
            if n != lost:
                wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                    "completed")["completed"] == 1, 20)
        wait_until(lambda: len(errors_of[lost]) >= 1, 20)
        assert all(isinstance(e, errors.LockLost) for e in errors_of[lost])
        assert errors_of[f"lock-{namespace}-a"] == errors_of[f"lock-{namespace}-b"] == []
    finally:
        release.set()


def test_outcomes_written_in_one_pipeline_are_not_told_as_lost_locks(conn, group, namespace):
    """Two queues' outcomes go to Redis in one pipelined round trip; a renewal landing
    after that write, before the finisher has read its reply, finds their locks gone.
    Those jobs are being finished, not lost: no ``LockLost``, and each ran once."""
    release = threading.Event()
    names = [f"pipe-{namespace}-{x}" for x in "ab"]
    workers = [Worker(n, lambda job: release.wait(30) and job.id, group=group,
                      concurrency=2).start() for n in names]
    told: List[BaseException] = []
    for w in workers:
        w.on("error", told.append)
    finisher = workers[0]._finisher
    send_many = finisher._send_many
    renewed: List[List[str]] = []

    def send_then_renew(groups):
        sent = send_many(groups)              # written: the jobs' locks are gone
        for w in workers:                     # a renewal lands now, as its role would
            call = w._renewer.call()
            if call is not None:
                reply = w.scripts.run(*call)
                renewed.append(list(reply))
                w._renewer.done(reply)
        return sent
    finisher._send_many = send_then_renew
    queues = [Queue(n, connection=conn) for n in names]
    for _ in range(20):                      # until both queues' outcomes share a batch
        release.clear()
        jobs = [q.add("x", {}) for q in queues for _ in range(2)]
        wait_until(lambda: all(q.get_job_counts("active")["active"] == 2 for q in queues))
        release.set()
        for q, job in zip(queues * 2, jobs):
            wait_until(lambda job=job: job.queue.get_job_state(job.id) == "completed")
        if any(renewed):
            break
    assert any(renewed), "no pipelined write of two queues happened"
    assert told == []
    for q in queues:
        for job in q.get_jobs(["completed"]):
            assert job.attempts_made == 1


def test_markers_past_the_first_shard_are_watched_by_watcher_threads(
        conn, namespace, monkeypatch):
    """Queues past the fetcher's shard of markers are waited on by marker watchers (one
    per shard); a marker they pop wakes the fetcher, which may block on its own shard."""
    from orijs_sync.engine import engine as _engine
    monkeypatch.setattr(_engine, "SHARD_SIZE", 3)
    before = set(engine_threads())
    names = [f"shard-{namespace}-{i}" for i in range(8)]     # shards 0, 1, 2
    with WorkerGroup(conn, name="sharded") as g:
        workers = {n: Worker(n, lambda job: job.data["i"], group=g, drain_delay=600).start()
                   for n in names}
        started = sorted(t for t in engine_threads() if t not in before)
        assert [t for t in started if "watcher" in t] == [
            "orijs-marker-watcher-0-sharded", "orijs-marker-watcher-1-sharded",
            "orijs-marker-watcher-2-sharded"]
        time.sleep(0.3)                       # every queue found empty: all block now
        for rounds in range(3):               # each shard's blocker pops, many times
            for i, n in enumerate(reversed(names)):
                Queue(n, connection=conn).add("x", {"i": i})
            for n in names:
                wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
                    "completed")["completed"] == rounds + 1, 20)
        workers[names[7]].close()             # a watcher's queue leaves, another joins
        late = f"shard-{namespace}-late"
        Worker(late, lambda job: "late", group=g, drain_delay=600).start()
        Queue(late, connection=conn).add("x", {})
        wait_until(lambda: Queue(late, connection=conn).get_job_counts(
            "completed")["completed"] == 1, 20)
    assert not [t for t in engine_threads() if t not in before]


def finish_together(conn, group, names, handler_of, concurrency, count, release):
    """A worker per queue in ``group`` (``handler_of(name)``), ``count`` jobs each, the
    barrier opened once they hold it, every job completed; the errors they reported."""
    problems: List[BaseException] = []
    for n in names:
        w = Worker(n, handler_of(n), group=group, concurrency=concurrency)
        w.on("error", problems.append)
        w.start()
    for n in names:
        Queue(n, connection=conn).add_bulk([{"name": "x", "data": {"i": i}}
                                            for i in range(count)])
    release.wait()
    for n in names:
        wait_until(lambda n=n: Queue(n, connection=conn).get_job_counts(
            "completed")["completed"] == count, 30)
    return problems


def test_outcomes_of_many_queues_are_written_in_one_pipelined_round_trip(
        conn, group, namespace, r):
    """Jobs of several queues finishing together: the finisher sends their queues'
    moveToFinished calls in one pipeline; calls whose script Redis lost (SCRIPT FLUSH
    just before the first pipeline) are sent again on their own; every outcome is
    written once, no error reported."""
    from orijs_sync.engine import engine_roles as _engine_roles
    names = [f"fin-{namespace}-{i}" for i in range(4)]
    release = threading.Barrier(len(names) * 4 + 1, timeout=30)
    pipelined: List[int] = []
    real = _engine_roles.Finisher._send_many
    flushing = threading.Lock()

    def counted(self, groups):
        # Redis loses its scripts just before the first pipeline, once. The finisher's
        # two threads both come here: the other one waits until the flush is done (it
        # once sent its pipeline meanwhile, loaded the script on NOSCRIPT, and the
        # flush landed between that load and its resend: a race of the test's own)
        with flushing:
            if not pipelined:
                r.script_flush()
            pipelined.append(len(groups))
        return real(self, groups)
    def handler_of(n):
        def handler(job):
            if job.data["i"] < 4:
                release.wait()                 # 16 jobs, 4 per queue, finish together
            return f"{n}:{job.data['i']}"
        return handler
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_engine_roles.Finisher, "_send_many", counted)
        problems = finish_together(conn, group, names, handler_of, 4, 12, release)
    assert max(pipelined) >= 2                   # several queues in one round trip
    for n in names:
        values = sorted(j.returnvalue for j in Queue(n, connection=conn).get_completed(0, -1))
        assert values == sorted(f"{n}:{i}" for i in range(12))
        events = [f for _, f in r.xrange(f"bull:{n}:events") if f["event"] == "completed"]
        assert len(events) == 12                 # each written once
    assert problems == []


def test_outcomes_survive_a_failed_finishing_pipeline(conn, group, namespace):
    """The pipeline carrying several queues' outcomes fails as a whole (it may or may
    not have run): each queue's same call is sent again on its own, nothing is lost."""
    from orijs_sync.store import connection as connection_module
    from orijs_sync.store.scripts import Scripts
    finish_sha = Scripts(conn.client).get("moveToFinished").sha
    names = [f"finfail-{namespace}-{i}" for i in range(3)]
    release = threading.Barrier(len(names) * 2 + 1, timeout=30)
    failed: List[int] = []
    real = connection_module._TranslatingPipeline.execute

    def fail_once(self, raise_on_error=True):
        finishing = [c for c in self.command_stack if finish_sha in c[0]]
        if not failed and len(finishing) >= 2:
            failed.append(len(finishing))
            self.reset()
            raise RuntimeError("the pipeline failed (injected)")
        return real(self, raise_on_error)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(connection_module._TranslatingPipeline, "execute", fail_once)
        problems = finish_together(conn, group, names,
                                   lambda n: lambda job: release.wait() >= 0 and job.data["i"],
                                   2, 2, release)
    assert failed and failed[0] >= 2
    for n in names:
        assert sorted(j.returnvalue for j in Queue(n, connection=conn).get_completed(0, -1)) \
            == [0, 1]
    assert problems == []


def test_a_marker_popped_while_its_queue_is_being_fetched_is_not_lost(conn, namespace, r,
                                                                        monkeypatch):
    """A watcher pops a queue's marker while the fetcher's call for that queue is under
    way and finds nothing (the job came just after it): the fetcher must look again
    rather than wait out the drain delay on a marker that is gone."""
    from orijs_sync.engine import engine as _engine
    monkeypatch.setattr(_engine, "SHARD_SIZE", 1)            # every queue its own shard
    with WorkerGroup(conn, name="inflight") as g:
        first = Worker(f"inflight-{namespace}-a", lambda job: None, group=g, drain_delay=600)
        first.start()
        late = Worker(f"inflight-{namespace}-b", lambda job: "ran", group=g, drain_delay=600)
        engine = first._engine
        assert engine is not None
        fired = threading.Event()
        marker_fired = engine.marker_fired

        def watched(marker):
            marker_fired(marker)
            if marker == late.keys.marker:
                fired.set()
        engine.marker_fired = watched           # type: ignore[method-assign]
        armed = threading.Event()
        armed.set()
        fetch_reply = late._fetch_reply

        def hooked(reply):
            jobs, ttl, next_delayed = fetch_reply(reply)
            if armed.is_set() and not jobs:    # found nothing: a job comes now, its marker
                armed.clear()                  # popped before this reply is handled
                Queue(late.name, connection=conn).add("x", {})
                fired.wait(20)
            return jobs, ttl, next_delayed
        late._fetch_reply = hooked              # type: ignore[method-assign]
        late.start()
        assert late._engine is engine and len(engine._watchers) == 2
        wait_until(lambda: not armed.is_set(), 20)
        assert fired.wait(20)
        wait_until(lambda: Queue(late.name, connection=conn).get_job_counts(
            "completed")["completed"] == 1, 20)


def test_two_finishing_writes_are_in_flight_each_with_half_the_concurrency(conn, namespace):
    """While one finishing write is in Redis (held here), the finisher's other thread
    writes the rest of the queue's outcomes, each batch at most half the concurrency:
    the jobs of one batch run while the other is written."""
    name = f"halves-{namespace}"
    Queue(name, connection=conn).add_bulk([{"name": "x", "data": {"i": i}} for i in range(12)])
    sizes: List[int] = []
    held, release = threading.Event(), threading.Event()
    together = threading.Barrier(4)

    def handler(job):
        if job.data["i"] < 4:
            together.wait(20)             # the first four finish at once: none is alone
        return job.data["i"]
    worker = Worker(name, handler, connection=conn, concurrency=4)
    run = worker._run_hot_script

    def hooked(script, keys, args):
        if script == "moveToFinished":
            sizes.append(int(args[4]))
            if not held.is_set():
                held.set()
                release.wait(30)          # the first write waits in "Redis"
        return run(script, keys, args)
    worker._run_hot_script = hooked       # type: ignore[method-assign]
    counts = Queue(name, connection=conn)
    try:
        worker.start()
        assert held.wait(20)
        wait_until(lambda: counts.get_job_counts("completed")["completed"] >= 8, 20)
    finally:
        release.set()
    wait_until(lambda: counts.get_job_counts("completed")["completed"] == 12, 20)
    worker.close()
    assert sizes and max(sizes) <= 2, sizes


def test_taken_jobs_are_decoded_by_the_threads_that_run_them(conn, namespace, monkeypatch):
    """The fetcher and the finisher hand a taken job's hash on undecoded: decoding (JSON
    of data and opts...) is done by the pool thread that runs the job, so the threads
    that go back to Redis do so sooner. A hash that cannot be decoded still fails its job."""
    from orijs_sync.job import Job
    decoded_on: List[str] = []
    load = Job._load

    def traced(job, fields):
        decoded_on.append(threading.current_thread().name)
        return load(job, fields)
    monkeypatch.setattr(Job, "_load", traced)
    name = f"decode-{namespace}"
    queue = Queue(name, connection=conn)
    queue.add_bulk([{"name": "x", "data": {"i": i}} for i in range(20)])
    with Worker(name, lambda job: job.data["i"], connection=conn, concurrency=4):
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 20, 20)
    taken = [t for t in decoded_on if t.startswith("orijs-")]
    assert len(taken) == 20 and all(t.startswith("orijs-worker-") for t in taken), taken
