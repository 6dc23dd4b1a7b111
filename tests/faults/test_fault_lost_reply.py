"""A reply lost after Redis ran the call: the jobs the call took for this worker are not
left to stall. The call is made to land and its reply to be lost on purpose: the proxy
delays every chunk, the test sees the take in Redis (the job's lock), then cuts every
connection before the delayed reply reaches the worker.

Without care, a job taken by such a call sits in ``active`` under a lock nobody renews
until the lock expires and the stalled checker moves it back (a job that stalls past
``max_stalled_count`` even fails without having run). Here the lock outlives the
test's wait many times over, so only a worker that takes its lost jobs back passes."""
from __future__ import annotations

import threading
import time
from typing import List

import pytest
import redis

from orijs_sync import Queue, Worker, errors
from orijs_sync.testing import wait_until

LOCK = 60.0          # seconds: far longer than any wait below
LATENCY = 0.4        # each way, while the call that loses its reply is made


def _cut_once_taken(proxy, r: redis.Redis, lock_key: str) -> None:
    """Wait until Redis holds ``lock_key`` (the call landed), then cut every connection:
    the call's reply is still in the proxy's delay line."""
    wait_until(lambda: r.exists(lock_key), 10, "the call to land")
    proxy.cut()
    proxy.set_latency(0)


def _completes(queue: Queue, job_id: str, how: str) -> None:
    """Job ``job_id``, taken by ``how``, completes long before its lock would expire."""
    wait_until(lambda: queue.get_job_state(job_id) == "completed", LOCK / 4,
               f"job {job_id}, {how}, to complete")


def _worker(qname: str, url: str, handler, events: List[str], drain_delay: float = 1) -> Worker:
    worker = Worker(qname, handler, connection=url, concurrency=1, lock_duration=LOCK,
                    stalled_interval=LOCK, max_stalled_count=0, drain_delay=drain_delay,
                    max_reconnect_delay=0.2, autorun=False)
    worker.on("stalled", lambda job_id, prev: events.append(f"stalled {job_id}"))
    return worker


def test_a_job_taken_by_a_finish_whose_reply_was_lost_runs_at_once(proxy, proxied_url,
                                                                   redis_url, namespace):
    """moveToFinished writes A's outcome and takes B; the reply is lost; B runs now."""
    qname = f"lr-{namespace}"
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue(qname, connection=redis_url)
    started, release, ran, events = threading.Event(), threading.Event(), [], []

    def handler(job):
        ran.append(job.id)
        if job.id == "a":
            started.set()
            assert release.wait(10)
        return job.id

    worker = _worker(qname, proxied_url, handler, events)
    try:
        queue.add("x", {}, job_id="a")
        worker.start()
        assert started.wait(10)
        queue.add("x", {}, job_id="b")
        proxy.set_latency(LATENCY)
        time.sleep(LATENCY * 3)          # the worker's pending reads see the latency too
        release.set()
        _cut_once_taken(proxy, r, queue.keys.job("b") + ":lock")
        _completes(queue, "b", "taken by the finish whose reply was lost")
        assert queue.get_job_state("a") == "completed"
        assert ran == ["a", "b"] and events == []
    finally:
        worker.close(10)
        queue.close()
        r.close()


def test_a_job_taken_by_a_fetch_whose_reply_was_lost_runs_at_once(proxy, proxied_url,
                                                                  redis_url, namespace):
    """moveToActive takes C for an idle worker; the reply is lost; C runs now."""
    qname = f"lr-{namespace}"
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue(qname, connection=redis_url)
    ran, events = [], []
    worker = _worker(qname, proxied_url, lambda job: ran.append(job.id), events)
    try:
        worker.start()
        assert worker.is_running
        proxy.set_latency(LATENCY)
        time.sleep(LATENCY * 3)
        queue.add("x", {}, job_id="c")
        _cut_once_taken(proxy, r, queue.keys.job("c") + ":lock")
        _completes(queue, "c", "taken by the fetch whose reply was lost")
        assert ran == ["c"] and events == []
    finally:
        worker.close(10)
        queue.close()
        r.close()


def test_a_job_handed_over_by_an_add_whose_reply_was_lost_runs_at_once(proxy, proxied_url,
                                                                     redis_url, namespace):
    """An add in a process whose Worker of the queue has a free slot takes the job for
    it in the same call; the reply is lost (the add fails): the job runs now."""
    qname = f"lr-{namespace}"
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    check = Queue(qname, connection=redis_url)
    queue = Queue(qname, connection=proxied_url)
    ran, events, raised = [], [], []
    # (a long drain delay: no look of its own holds the worker's slot when the add comes)
    worker = _worker(qname, proxied_url, lambda job: ran.append(job.id), events, LOCK)

    def add():
        try:
            queue.add("x", {}, job_id="d")
        except errors.ConnectionError as exc:
            raised.append(exc)

    adding = threading.Thread(target=add)
    try:
        worker.start()
        wait_until(lambda: any(c.get("cmd") == "bzpopmin" for c in r.client_list()), 10,
                   "the worker to wait on its queue's marker, its slot free")
        proxy.set_latency(LATENCY)
        time.sleep(LATENCY * 3)
        adding.start()
        _cut_once_taken(proxy, r, check.keys.job("d") + ":lock")
        adding.join(10)
        assert len(raised) == 1, "the add's reply was not lost"
        _completes(check, "d", "handed over by the add whose reply was lost")
        assert ran == ["d"] and events == []
    finally:
        worker.close(10)
        queue.close()
        check.close()
        r.close()


@pytest.mark.parametrize("held", ["charge", "ship"])
def test_a_workflow_whose_step_write_lost_its_reply_completes_in_time(proxy, proxied_url,
                                                                    redis_url, namespace,
                                                                    held):
    """The write of step ``held`` takes the job it makes ready (step 'ship' after
    'charge'; after 'ship', the workflow's own job, in another queue) and loses its
    reply: the workflow completes as if nothing happened, well within its timeout."""
    from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

    r = redis.Redis.from_url(redis_url, decode_responses=True)
    started, release = threading.Event(), threading.Event()

    def step(name):
        def run(ctx):
            if name == held:
                started.set()
                assert release.wait(10)
            return name
        return run

    workflow = Workflow("LostReply")
    for name in ("validate", "charge", "ship"):
        workflow = workflow.step(name, step(name))
    provider = BullMQWorkflowProvider(proxied_url, queue_prefix=f"{namespace}.wf",
                                      stall_interval=LOCK / 2, concurrency=1)
    provider.register(workflow)
    builder = provider.flow_builder
    steps = Queue(builder.steps_queue("LostReply"), connection=redis_url)
    flows = Queue(builder.workflow_queue("LostReply"), connection=redis_url)
    try:
        provider.start()
        handle = provider.execute(workflow, {}, timeout=LOCK / 2)
        assert started.wait(10)
        proxy.set_latency(LATENCY)
        time.sleep(LATENCY * 3)
        release.set()
        taken = steps.keys.job(f"{handle.id}-step-ship") if held == "charge" \
            else flows.keys.job(handle.id)
        _cut_once_taken(proxy, r, taken + ":lock")
        assert handle.result(timeout=LOCK / 4) == {"validate": "validate", "charge": "charge",
                                                   "ship": "ship"}
    finally:
        provider.stop(10)
        steps.close()
        flows.close()
        r.close()
