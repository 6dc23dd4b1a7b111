"""A resting events thread (``orijs_sync.waits.expect``), on real Redis and real processes.

While no listener wants events as they are written and every waiter waits for a job a
Worker of this process holds, the events thread does not read after every event: the
Worker's write settles the waiters. ``REST`` is set to 30 s here, far past every
timeout below, so a test passes only if the thread woke when it had to (a waiter on a
job no Worker here holds, a job let go unwritten, a listener, ``catch_up``), never by
its periodic read."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, Iterator, List, Tuple

import pytest

from orijs_sync import QueueEvents, Worker
from orijs_sync import queue_events as queue_events_module
from orijs_sync.events import BullMQEventProvider
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

OTHER_WORKER = """
import sys
from orijs_sync import Worker
url, name, prefix = sys.argv[1:4]
with Worker(name, lambda job: {"by": "other", "data": job.data}, connection=url,
            prefix=prefix):
    print("READY", flush=True)
    sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def long_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_events_module, "REST", 30.0, raising=False)


@pytest.fixture
def other_worker(redis_url: str) -> Iterator[Any]:
    """``start(queue name[, prefix])``: a Worker in another process, READY once it
    runs; stopped when its stdin closes (killed by its PID if it does not end)."""
    procs: List[subprocess.Popen] = []

    def start(name: str, prefix: str = "bull") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", OTHER_WORKER, redis_url, name, prefix],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        return proc
    yield start
    for proc in procs:
        proc.stdin.close()       # type: ignore[union-attr]
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def xreads(r: Any) -> int:
    return int(r.info("commandstats").get("cmdstat_xread", {}).get("calls", 0))


def test_the_thread_rests_while_a_worker_here_holds_every_waited_job(queue, events,
                                                                     redis_url, qname, r):
    """Each wait is registered once the Worker here holds its job (an add that finds
    the Worker's one slot not yet free leaves the job to its fetcher: a wait registered
    before that take is read from the stream, rightly), and the job runs only then."""
    gate = threading.Semaphore(0)

    def handler(job: Any) -> Any:
        assert gate.acquire(timeout=10)
        return job.data["i"] * 2

    def request(i: int) -> Any:
        job_id = queue.add("x", {"i": i}).id
        wait_until(lambda: worker._holds(job_id), 10, "the job held here")
        fut = events.job_future(queue, job_id)
        gate.release()
        return fut.result(10)
    with Worker(qname, handler, connection=redis_url) as worker:
        assert request(0) == 0
        before = xreads(r)
        assert [request(i) for i in range(50)] == [i * 2 for i in range(50)]
        assert xreads(r) - before <= 3          # not one read (or more) per job
        assert events.catch_up(10)              # and nothing was skipped


def test_a_listener_keeps_the_thread_reading_as_events_are_written(queue, events,
                                                                   redis_url, qname):
    seen: List[str] = []
    with Worker(qname, lambda job: None, connection=redis_url):
        queue.add("x", {}).wait_until_finished(events, 10)
        events.on("completed", lambda job_id, value: seen.append(job_id))
        for _ in range(3):
            job_id = queue.add("x", {}).id
            wait_until(lambda: job_id in seen, 10, "the listener told of the completion")  # noqa: B023


def test_a_wait_on_a_job_run_in_another_process_is_read_from_the_stream(
        queue, events, redis_url, qname, other_worker):
    """The second wait starts while the thread rests (it read the first outcome and
    nobody waited then): its registration wakes it."""
    other_worker(qname)
    for n in (1, 2):
        job = queue.add("x", {"n": n})
        assert job.wait_until_finished(events, 10) == {"by": "other", "data": {"n": n}}


def test_a_job_the_worker_here_lets_go_unwritten_wakes_the_thread(
        queue, events, redis_url, qname, other_worker):
    """Held here when the wait starts (the thread may rest), then failed and retried:
    the retry runs in another process, and only the stream can tell its outcome."""
    registered = threading.Event()
    worker: List[Worker] = []

    def first_try(job: Any) -> Any:
        assert registered.wait(10)
        worker[0].pause(wait=False)           # the retry is not taken here
        raise RuntimeError("the first try fails")
    worker.append(Worker(qname, first_try, connection=redis_url))
    with worker[0]:
        job = queue.add("x", {"n": 2}, attempts=2)
        wait_until(lambda: job.id in worker[0]._active, 10, "the job held here")
        fut = events.job_future(queue, job.id)
        registered.set()
        wait_until(lambda: queue.get_job_state(job.id) == "waiting", 10, "the retry waiting")
        other_worker(qname)
        assert fut.result(10) == {"by": "other", "data": {"n": 2}}


def test_catch_up_reads_at_once_while_the_thread_rests(queue, redis_url, qname):
    with QueueEvents(qname, connection=redis_url) as events, \
            Worker(qname, lambda job: None, connection=redis_url):
        queue.add("x", {}).wait_until_finished(events, 10)
        for _ in range(5):
            queue.add("x", {})
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 6, 10)
        assert events.catch_up(10)
        last = queue.client.xrevrange(queue.keys.events, count=1)[0][0]
        assert events._streams[queue.keys.events][1] == last


def test_emit_with_its_handler_here_leaves_the_thread_resting(redis_url, namespace, r):
    provider = BullMQEventProvider(redis_url, prefix=f"{namespace}-emit").start()
    try:
        provider.subscribe("order.placed", lambda message: message.payload["n"] + 1)
        assert provider.emit("order.placed", {"n": 0}).result(timeout=10) == 1
        before = xreads(r)
        got = [provider.emit("order.placed", {"n": n}).result(timeout=10) for n in range(30)]
        assert got == [n + 1 for n in range(30)]
        # not one read (or two) per emit; an emit whose add finds the handler's slot not
        # yet free (a busy machine) leaves its job to the fetcher: read, rightly
        assert xreads(r) - before <= 6
    finally:
        provider.stop()


def test_emit_with_its_handler_in_another_process_is_read_from_the_stream(
        redis_url, namespace, other_worker):
    provider = BullMQEventProvider(redis_url, prefix=f"{namespace}-emit").start()
    try:
        other_worker(provider.queue_manager.get_queue_name("order.shipped"),
                     f"{namespace}-emit")
        for n in (1, 2):
            result = provider.emit("order.shipped", {"n": n}).result(timeout=10)
            assert result["by"] == "other" and result["data"]["payload"] == {"n": n}
    finally:
        provider.stop()


def test_a_workflow_run_here_leaves_the_thread_resting(redis_url, namespace, r):
    wf = (Workflow("Rested").step("a", lambda ctx: 1)
          .step("b", lambda ctx: ctx.get_result("a") + 1))
    provider = BullMQWorkflowProvider(redis_url, queue_prefix=f"{namespace}.wf")
    provider.register(wf)
    with provider:
        first = provider.execute(wf, {}).result(timeout=20)
        before = xreads(r)
        assert [provider.execute(wf, {}).result(timeout=20) for _ in range(10)] == [first] * 10
        assert xreads(r) - before <= 6          # as for emit, above


def test_resting_threads_read_in_turns(redis_url, namespace, r, monkeypatch):
    """Sixteen events threads (one stream each here), all resting while entries keep
    coming: each reads in its own slot of the rest, one at a time. Resting as long from
    the same start, they read together, each over its streams: with a thousand queues
    that held Redis and the process for milliseconds in a row, every half second."""
    rest = 1.6
    monkeypatch.setattr(queue_events_module, "REST", rest)
    monkeypatch.setattr(queue_events_module, "SHARD_SIZE", 1)
    names = [f"{namespace}-turns{i}" for i in range(16)]
    reads: List[Tuple[float, str]] = []
    deliver = QueueEvents._deliver

    def counted(self: Any, stream: str, entries: Any) -> None:
        reads.append((time.monotonic(), stream))
        deliver(self, stream, entries)
    monkeypatch.setattr(QueueEvents, "_deliver", counted)
    stop = threading.Event()

    def write() -> None:        # every stream gets entries all along
        while not stop.wait(0.02):
            pipe = r.pipeline(transaction=False)
            for name in names:
                pipe.xadd(f"bull:{name}:events", {"event": "progress", "jobId": "1"})
            pipe.execute()
    writer = threading.Thread(target=write)
    with QueueEvents(names, redis_url) as events:
        assert len(events._tailers) == 16
        writer.start()
        try:
            started = time.monotonic()
            time.sleep(3 * rest)
        finally:
            stop.set()
            writer.join(10)
    # past the first reads (each thread reads at once when it starts), the reads of
    # two rests: no 20 ms holds the reads of more than a few threads
    later = sorted(t for t, _ in reads if started + rest <= t <= started + 3 * rest)
    assert len(later) >= 16
    crowd = max(sum(1 for t in later if first <= t < first + 0.02) for first in later)
    assert crowd <= 4, f"{crowd} threads read within 20 ms"
