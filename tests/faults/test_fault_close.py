"""close(timeout)/stop(timeout) while Redis is held (connections open, nothing answered):
each returns within its timeout plus a margin, raising nothing but an OrijsError, with a
job finishing during the hold (its outcome write is held too). Worker, GroupWorker, the
event provider and the workflow provider, each after some work went through the proxy."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

from fault_helpers import MARGIN, Bounded
from fault_proxy import FaultProxy

from orijs_sync import Queue, Worker, errors
from orijs_sync.events import BullMQEventProvider
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

CLOSE_TIMEOUT = 3.0
HANDLER_SECONDS = 0.5       # a handler running when the hold starts ends during it


def closes_in_time_while_held(proxy: FaultProxy, what: str, close: Callable[[], Any]) -> None:
    proxy.hold()
    try:
        call = Bounded(what, close)
        in_time = call.wait(CLOSE_TIMEOUT + MARGIN)
    finally:
        proxy.release()
    call.finish()
    assert call.raised is None or isinstance(call.raised, errors.OrijsError), repr(call.raised)
    assert in_time, f"{what} did not return within its timeout + {MARGIN}s while Redis was " \
                    f"held: it returned {call.elapsed and round(call.elapsed, 2)} s after the " \
                    f"call, the hold being released at {CLOSE_TIMEOUT + MARGIN} s (None: " \
                    f"still running 30 s after the release)"


def slow_handler(started: threading.Event) -> Callable[[Any], Any]:
    def run(job: Any) -> str:
        started.set()
        time.sleep(HANDLER_SECONDS)
        return "done"
    return run


def test_worker_close_returns_in_time_while_redis_is_held(proxy, proxied_url, redis_url,
                                                          namespace):
    qname = f"fc-{namespace}"
    started = threading.Event()
    with contextlib.ExitStack() as stack:
        queue = Queue(qname, connection=proxied_url)
        stack.callback(queue.close)
        check = Queue(qname, connection=redis_url)
        stack.callback(check.close)
        worker = Worker(qname, slow_handler(started), connection=proxied_url, concurrency=2,
                        lock_duration=5, stalled_interval=2, drain_delay=1)
        stack.callback(worker.close, 10)
        worker.start()
        first = queue.add("x", {})
        wait_until(lambda: check.get_job_state(first.id) == "completed", 20)
        started.clear()
        queue.add("x", {})
        assert started.wait(10)
        closes_in_time_while_held(proxy, f"Worker.close(timeout={CLOSE_TIMEOUT})",
                                  lambda: worker.close(timeout=CLOSE_TIMEOUT))


def test_group_worker_close_returns_in_time_while_redis_is_held(proxy, proxied_url, redis_url,
                                                                namespace):
    gname = f"fcg-{namespace}"
    started = threading.Event()
    with contextlib.ExitStack() as stack:
        queue = GroupQueue(gname, connection=proxied_url, job_timeout=5, keep_completed=100)
        stack.callback(queue.close)
        check = GroupQueue(gname, connection=redis_url, keep_completed=100)
        stack.callback(check.close)
        worker = GroupWorker(queue, slow_handler(started), concurrency=2, stalled_interval=2,
                             block_timeout=1)
        stack.callback(worker.close, 10)
        worker.start()
        queue.add(group_id="a", data={})
        wait_until(lambda: check.get_completed_count() == 1, 20)
        started.clear()
        queue.add(group_id="b", data={})
        assert started.wait(10)
        closes_in_time_while_held(proxy, f"GroupWorker.close(timeout={CLOSE_TIMEOUT})",
                                  lambda: worker.close(timeout=CLOSE_TIMEOUT))


def test_event_provider_stop_returns_in_time_while_redis_is_held(proxy, proxied_url,
                                                                 namespace):
    started = threading.Event()
    handler = slow_handler(started)
    provider = BullMQEventProvider(proxied_url, queue_prefix=f"{namespace}.event")
    with contextlib.ExitStack() as stack:
        stack.callback(provider.stop, 10)
        provider.start()
        provider.subscribe("fault.close", handler)
        assert provider.emit("fault.close", {}, timeout=10).result(timeout=10) == "done"
        started.clear()
        pending = provider.emit("fault.close", {}, timeout=30)
        assert started.wait(10)
        closes_in_time_while_held(proxy, f"BullMQEventProvider.stop(timeout={CLOSE_TIMEOUT})",
                                  lambda: provider.stop(timeout=CLOSE_TIMEOUT))
        # The pending emit is settled (its result, or an OrijsError such as ShutdownError).
        outcome = pending.exception(timeout=10)
        assert outcome is None or isinstance(outcome, errors.OrijsError), repr(outcome)


def test_workflow_provider_stop_returns_in_time_while_redis_is_held(proxy, proxied_url,
                                                                    namespace):
    started = threading.Event()
    handler = slow_handler(started)
    workflow = Workflow("CloseFlow").step("one", handler).step("two", lambda ctx: "two")
    provider = BullMQWorkflowProvider(proxied_url, queue_prefix=f"{namespace}.wf",
                                      concurrency=2)
    provider.register(workflow)
    with contextlib.ExitStack() as stack:
        stack.callback(provider.stop, 10)
        provider.start()
        assert provider.execute(workflow, {}, timeout=20).result(timeout=30)
        started.clear()
        pending = provider.execute(workflow, {}, timeout=30)
        assert started.wait(10)
        closes_in_time_while_held(proxy, f"BullMQWorkflowProvider.stop(timeout={CLOSE_TIMEOUT})",
                                  lambda: provider.stop(timeout=CLOSE_TIMEOUT))
        outcome = pending.exception(timeout=10)
        assert outcome is None or isinstance(outcome, errors.OrijsError), repr(outcome)
