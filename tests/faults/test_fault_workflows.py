"""Workflows (BullMQWorkflowProvider, a 3-step workflow) through a seeded schedule of
network faults: every handle settles within its timeout plus the stall interval (plus a
margin), with a result or an OrijsError; every workflow whose add succeeded completes;
no step of a flow runs twice at once; nothing is stuck once the network heals
(stop(timeout) while Redis is held: test_fault_close.py)."""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import List, Optional

import redis
from fault_helpers import MARGIN, RECOVERY, Raised, Runs, ScheduleRun, make_schedule

from orijs_sync import Queue, errors
from orijs_sync.testing import wait_until
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow
from orijs_sync.workflows.handle import FlowHandle

SEED = 33_003
FLOW_TIMEOUT = 8.0
STALL = 7.0               # the provider's stall interval: lock and stalled check; a 3 s hold
#                           never outlasts a lock renewed every 3.5 s
STEPS = ("validate", "charge", "ship")


@dataclass
class Execution:
    n: int
    began: float
    handle: Optional[FlowHandle] = None
    failed_at_once: bool = False      # the add failed: the handle was failed before return
    settled_after: Optional[float] = None


def add_failed(handle: FlowHandle) -> bool:
    """The handle failed because its flow could not be added (Redis did not answer)."""
    return handle.done() and isinstance(handle.exception(), errors.ConnectionError)


def test_workflows_through_network_faults(proxy, proxied_url, redis_url, namespace):
    runs, raised = Runs(), Raised()
    executions: List[Execution] = []
    settle_lock = threading.Lock()

    def step(name):
        def run(ctx):
            key = f"{ctx.flow_id}:{name}"
            runs.start(key)
            try:
                time.sleep(0.01)
                return {"step": name, "n": ctx.data["n"]}
            finally:
                runs.end(key)
        return run

    workflow = Workflow("FaultFlow")
    for name in STEPS:
        workflow = workflow.step(name, step(name))
    prefix = f"{namespace}.wf"
    provider = BullMQWorkflowProvider(proxied_url, queue_prefix=prefix, stall_interval=STALL,
                                      concurrency=4)
    provider.register(workflow)
    schedule = ScheduleRun(proxy, make_schedule(SEED))
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    flows_q = Queue(provider.flow_builder.workflow_queue("FaultFlow"), connection=redis_url)
    steps_q = Queue(provider.flow_builder.steps_queue("FaultFlow"), connection=redis_url)

    def on_settled(record: Execution):
        def done(_):
            with settle_lock:
                record.settled_after = time.monotonic() - record.began
        return done

    with contextlib.ExitStack() as stack:
        stack.callback(r.close)
        stack.callback(flows_q.close)
        stack.callback(steps_q.close)
        stack.callback(provider.stop, 10)
        provider.start()
        stack.callback(schedule.stop)
        schedule.start()
        n = 0
        while not schedule.done():
            record = Execution(n, time.monotonic())
            executions.append(record)
            try:
                handle = provider.execute(workflow, {"n": n}, idempotency_key=f"flow-{n}",
                                          timeout=FLOW_TIMEOUT)
                record.handle = handle
                record.failed_at_once = handle.done() and handle.exception() is not None
                handle.add_done_callback(on_settled(record))
            except Exception as exc:  # noqa: BLE001 - looked at below
                raised.add(f"execute #{n}", exc)
            n += 1
            time.sleep(0.15)
        schedule.join()
        timeline = schedule.describe()

        # Every handle settles within its timeout + the stall interval (+ margin).
        bound = FLOW_TIMEOUT + STALL + MARGIN

        def where(n: int) -> dict:
            """A late handle's flow: the handle, and its jobs' states in Redis."""
            flow_id, handle = f"flow-{n}", executions[n].handle
            out = {"done": handle is not None and handle.done(),
                   flow_id: flows_q.get_job_state(flow_id)}
            for name in STEPS:
                out[name] = steps_q.get_job_state(f"{flow_id}-step-{name}")
            return out
        for record in executions:
            if record.handle is None:
                continue
            try:
                value = record.handle.result(timeout=max(record.began + bound
                                                         - time.monotonic(), 0.01))
                assert value == {name: {"step": name, "n": record.n} for name in STEPS}, value
            except AssertionError:
                raise
            except Exception as exc:  # noqa: BLE001
                raised.add(f"handle #{record.n}.result()", exc)
        # A done-callback runs on the provider's callback thread, a moment after result()
        # returned: those of the settled handles run before the times are read.
        wait_until(lambda: all(r_.settled_after is not None for r_ in executions
                               if r_.handle is not None and r_.handle.done()), 10,
                   "the done-callbacks of the settled handles")
        late = [(r_.n, r_.settled_after and round(r_.settled_after, 1)) for r_ in executions
                if r_.handle is not None and (r_.settled_after is None
                                              or r_.settled_after > bound)]
        assert late == [], f"{len(late)} of {len(executions)} handles (timeout " \
                           f"{FLOW_TIMEOUT}s + stall {STALL}s) not settled within {bound}s " \
                           f"(n, seconds; None: not yet): {late[:8]}; " \
                           f"{[where(n) for n, _ in late[:3]]}; faults: {timeline}"

        # Every workflow whose add succeeded completes; nothing is left in the queues.
        # (execute() adds the flow after it returns: an add that failed fails the handle
        # with the ConnectionError; such a workflow was never acknowledged.)
        acked = [f"flow-{e.n}" for e in executions if e.handle is not None
                 and not e.failed_at_once and not add_failed(e.handle)]
        print(f"faults: {timeline}\nworkflows acknowledged: {len(acked)} of {n}; "
              f"raised: {raised.kinds()}")

        def missing() -> List[str]:
            done = set(r.zrange(flows_q.keys.completed, 0, -1))
            return [f for f in acked if f not in done]
        deadline = time.monotonic() + RECOVERY
        while missing() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = missing()
        assert left == [], f"{len(left)} of {len(acked)} acknowledged workflows not " \
                           f"completed {RECOVERY}s after the faults ended: " \
                           f"{[(f, flows_q.get_job_state(f)) for f in left[:8]]}; " \
                           f"faults: {timeline}"

        def busy() -> dict:
            out = {}
            for q in (flows_q, steps_q):
                k = q.keys
                for name, size in (("wait", r.llen(k.wait)), ("active", r.llen(k.active)),
                                   ("delayed", r.zcard(k.delayed)),
                                   ("waiting-children", r.zcard(k.waiting_children))):
                    if size:
                        out[f"{q.name} {name}"] = size
            return out
        deadline = time.monotonic() + RECOVERY
        while busy() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert busy() == {}, f"jobs left behind: {busy()}; faults: {timeline}"
        assert r.zcard(flows_q.keys.failed) + r.zcard(steps_q.keys.failed) == 0
        assert runs.overlaps == [], f"{runs.overlaps[:10]}; faults: {timeline}"

    assert len(acked) >= 30, f"too few workflows acknowledged: {len(acked)} of {n}"
    assert raised.foreign() == [], raised.foreign()[:10]
    assert all(isinstance(exc, errors.OrijsError) for _, exc in raised.seen)
