"""BullMQWorkflowProvider: workflows as BullMQ flows, any process may run any step.

    provider = BullMQWorkflowProvider("redis://...", queue_prefix="workflow")
    provider.register(order)                 # this process runs the workflow's steps
    provider.register_emitter("Other")       # this one only starts "Other" workflows
    provider.start()
    handle = provider.execute(order, {"orderId": "1"}, idempotency_key="order-1")
    handle.result(timeout=35)
    provider.stop()

No per-flow state is needed to run a workflow: step results travel up the job
tree (see ``.results``), handlers come from the ``StepRegistry``. The
process that calls ``execute`` keeps a pending result and a local status per flow
(``FlowTracker``), settled by one ``QueueEvents`` thread over every
workflow queue it knows, by a local step failure, or by the timeout (base +
``stall_interval``; before rejecting, the job's state is read from Redis).

Threads, all owned and joined by ``stop``: two workers per registered workflow
(step jobs and workflow jobs), one events thread, one timer thread, a pool for
parallel members and timed steps, a small pool for Redis reads the events and
timer threads must not block on.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, Union, cast

from .. import errors
from ..base import fork
from ..base import validate as check
from ..base.lanes import Lanes
from ..base.pools import deadline_of, join_threads, remaining, shutdown_pools
from ..base.util import Seconds, run_logged
from ..flow_producer import FlowProducer
from ..queue import Queue
from ..queue_events import QueueEvent, QueueEvents
from ..store.connect import as_connection
from ..store.connection import ConnectionLike
from ..types import FlowJob
from ..worker import Worker
from ..worker_group import SharedGroup, WorkerGroup
from ._base import MIN_STALL_INTERVAL, ExecuteCall, ProviderBase
from ._bullmq_jobs import JobProcessor, read_failure
from ._registry import FlowRegistry
from .definition import Workflow
from .errors import WorkflowNotFoundError, WorkflowTimeoutError
from .flow_builder import FlowBuilder
from .handle import FlowHandle, Pending
from .step_registry import StepRegistry

__all__ = ["BullMQWorkflowProvider", "MIN_STALL_INTERVAL"]

SENDER_LANES = 4     # threads adding executed flows (each caller thread keeps to one)
_STATUS = {"completed": "completed", "failed": "failed", "unknown": "pending"}


class BullMQWorkflowProvider(ProviderBase):
    """Durations are seconds. ``stall_interval`` (>= 5) is the workers' stalled-check
    interval and lock duration: a step whose process dies runs again elsewhere after
    about one to two intervals, and every timeout is extended by it. ``concurrency``
    is per worker (each registered workflow has a step worker and a workflow worker);
    ``parallel_workers`` bounds the threads running parallel members and timed steps.
    ``logger`` and the ``*_class`` options are OriJS's injectables (the classes must be
    subclasses of ours). ``default_step_options`` are the step jobs' options (OriJS's defaults: 3 attempts,
    exponential back-off from 1 s), under each workflow's and each step's own. All
    the workflows' workers share one engine: ``worker_group`` (e.g. shared with an
    event provider), else one made here."""

    def __init__(self, connection: ConnectionLike = None, queue_prefix: str = "workflow",
                 default_timeout: Seconds = 30.0, stall_interval: Seconds = 5.0,
                 step_timeout: Seconds = 0.0, max_flow_states: int = 10_000,
                 provider_id: Optional[str] = None, *,
                 flow_state_cleanup_delay: Seconds = 300.0, prefix: str = "bull",
                 concurrency: int = 10, parallel_workers: int = 16,
                 step_registry: Optional[StepRegistry] = None,
                 default_step_options: Optional[Mapping[str, Any]] = None,
                 logger: Optional[logging.Logger] = None,
                 queue_class: Type[Queue] = Queue, worker_class: Type[Worker] = Worker,
                 queue_events_class: Type[QueueEvents] = QueueEvents,
                 flow_producer_class: Type[FlowProducer] = FlowProducer,
                 worker_group: Optional[WorkerGroup] = None) -> None:
        self.flow_builder = FlowBuilder(queue_prefix)
        self._worker_class, self._queue_events_class = worker_class, queue_events_class
        super().__init__(name=queue_prefix, default_timeout=default_timeout,
                         stall_interval=stall_interval, step_timeout=step_timeout,
                         max_flow_states=max_flow_states, provider_id=provider_id,
                         flow_state_cleanup_delay=flow_state_cleanup_delay,
                         concurrency=concurrency, parallel_workers=parallel_workers,
                         step_registry=step_registry,
                         default_step_options=default_step_options, logger=logger)
        self.queue_prefix = queue_prefix
        self.prefix = check.string(prefix, "prefix")
        self._connection = as_connection(connection)
        self._owns_connection = self._connection is not connection
        self._group = SharedGroup(worker_group, self._connection, "workflows")
        self._producer = flow_producer_class(self._connection, prefix=prefix,
                                             queue_class=queue_class)
        self.flow_registry = FlowRegistry(self._connection.client, queue_prefix, logger)
        self._aux = ThreadPoolExecutor(4, thread_name_prefix="orijs-workflow-aux")
        # the handles' done-callbacks run here, in order (see CheckedFuture)
        self._callbacks = Lanes("orijs-workflow-callbacks")
        self._sender = Lanes("orijs-workflow-sender", SENDER_LANES)   # execute's adds
        self._processor = JobProcessor(self)
        self._by_queue: Dict[str, str] = {}    # workflow queue name -> workflow name
        self._workers: Dict[str, Tuple[Worker, Worker]] = {}
        self._events: Optional[QueueEvents] = None
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's workers stay the parent's (inert copies here, forgotten); this
        process executes workflows and follows their results with its own threads (the
        events thread restarts on the next ``execute``). Its parts reset themselves."""
        self._lock = threading.RLock()
        self._workers = {}
        self._aux = ThreadPoolExecutor(4, thread_name_prefix="orijs-workflow-aux")

    # -- registration ------------------------------------------------------
    def _registered(self, workflow_name: str, consumer: bool) -> None:
        self._watch(workflow_name)
        if consumer and self._state == "started" and workflow_name not in self._workers:
            self._start_workers(workflow_name)

    def _watch(self, workflow_name: str) -> None:
        """The events thread settles this workflow's flows from now on."""
        with self._lock:
            queue_name = self.flow_builder.workflow_queue(workflow_name)
            self._by_queue[queue_name] = workflow_name
            if self._events is not None:
                self._events.add_queue(queue_name)

    def _start_workers(self, workflow_name: str) -> None:
        options: Dict[str, Any] = dict(**self._group.options(self._worker_class),
                                       prefix=self.prefix,
                                       concurrency=self._workflow_concurrency.get(
                                           workflow_name, self.concurrency),
                                       stalled_interval=self.stall_interval,
                                       lock_duration=self.stall_interval,
                                       worker_name=self.provider_id)
        p = self._processor
        steps = self._worker_class(self.flow_builder.steps_queue(workflow_name),
                       lambda job: p.process_step(workflow_name, job), **options)
        flows = self._worker_class(self.flow_builder.workflow_queue(workflow_name),
                       lambda job: p.process_workflow(workflow_name, job), **options)
        steps._fetch_children = flows._fetch_children = True   # read with each job
        self._workers[workflow_name] = (steps, flows)
        steps.start()
        flows.start()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "BullMQWorkflowProvider":
        """Start the events thread, the timer, and the workers of registered workflows."""
        with self._lock:
            self._refuse_if_stopped()
            if self._state == "started":
                return self
            self._connection.ping()
            self._timer.start()
            events = self._queue_events_class(list(self._by_queue), connection=self._connection,
                                              prefix=self.prefix, autorun=False)
            events._follow(self._on_event, ("completed", "failed"))   # see _expect
            events.on_written(self._on_event)   # outcomes written here: no events-thread wake
            self._tracker.on_settled = events._unexpect
            self._events = events
            events.start()
            self._state = "started"
            for name in self._definitions:
                self._start_workers(name)
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Workers first (running steps finish), then the events thread, the timer and the
        pools, all within ``timeout`` seconds (past it a warning names what still runs);
        pending handles fail with ``ShutdownError``; last the callback thread (the
        callbacks queued run first). Idempotent. From a handle's done-callback, it
        returns once the rest is stopped; the callback thread ends as it returns."""
        deadline = deadline_of(timeout)
        with self._lock:
            if self._state == "stopped":
                return
            workers = list(self._workers.values())
            for steps, flows in workers:      # no new job from here on, before anything
                steps.pause(wait=False)       # is seen as stopped (a job finishing now
                flows.pause(wait=False)       # takes no next one in the same call)
            self._state = "stopped"
            self._workers.clear()
            events, self._events = self._events, None
        busy = ["flow adds"] if self._sender.close(deadline) else []   # not begun: fail
        busy += _close_all([steps for steps, _ in workers], deadline)   # step workers first
        busy += _close_all([flows for _, flows in workers], deadline)
        self._group.close(timeout=remaining(deadline))
        if events is not None:
            events.close()
        busy += shutdown_pools({"redis reads": self._aux}, deadline)   # they settle handles
        self._timer.stop()                  # (a timeout firing now finds the pool shut)
        if not self._executor.shutdown(deadline):
            busy.append("step handlers")
        if busy:
            self._log.warning("workflow provider stopped after %ss with work still running: %s",
                        timeout, ", ".join(busy))
        shutdown = errors.ShutdownError("the workflow provider stopped")
        for pending in self._tracker.close():
            pending.handle._settle(exc=shutdown)
        self._producer.close()
        if self._owns_connection:
            self._connection.close()
        if self._callbacks.close(deadline, drain=True):
            self._log.warning("workflow provider stopped after %ss with a handle callback "
                              "still running", timeout)

    # -- execute -----------------------------------------------------------
    def execute(self, workflow: Union[Workflow, str], data: Any = None, *,
                meta: Optional[Mapping[str, Any]] = None, timeout: Optional[Seconds] = None,
                idempotency_key: Optional[str] = None) -> FlowHandle:
        """Return the workflow's handle at once; the flow is added on one of the
        provider's sender threads (a thread's executes in the order it made them), so no
        network trouble holds the caller. ``timeout`` seconds (default
        ``default_timeout``; 0 = none) plus ``stall_interval``. With an
        ``idempotency_key`` (the flow id; no ':'), executing again adds nothing and
        the handle settles with the first run's outcome. A flow whose handle has failed
        before its add began is never added; an add that lands after (Redis answered
        late) runs as any other, its result going nowhere (a warning is logged)."""
        call = self._prepare(workflow, data, meta, timeout, idempotency_key)
        events = self._events
        if events is not None:
            events.resume_after_fork()
        key, flow_id = call.key, call.flow_id
        tree = self.flow_builder.build(call.definition, flow_id, call.data, call.meta,
                                       self.default_step_options)
        handle = FlowHandle(flow_id, key[0], self.get_status, self._callbacks)
        self._tracker.track(key)      # duplicates are Redis's to decide
        pending = self._tracker.add_pending(key, handle, call.timeout, self._on_timeout)  # FIRST
        if not self._sender.submit(lambda: self._add_flow(call, tree, pending, events),
                                   on_drop=lambda: self._add_dropped(pending)):
            self._add_dropped(pending)
        return handle

    def _add_flow(self, call: ExecuteCall, tree: Mapping[str, Any], pending: Pending,
                  events: Optional[QueueEvents]) -> None:
        """On a sender thread: THEN add the flow (and its registry key), unless its handle
        has settled already (timed out, or the provider stopped)."""
        if pending.settled:
            return
        key, flow_id = call.key, call.flow_id
        queue = self._producer.queue(self.flow_builder.workflow_queue(key[0]))
        try:
            exists = call.idempotency_key is not None and \
                queue.get_job_state(flow_id) != "unknown"
            if not exists:      # the flow registry's SET in the same round trip
                with self._producer._side_command(
                        self.flow_registry.register_command(flow_id, key[0])):
                    self._producer.add(cast(FlowJob, tree))
        except Exception as exc:  # noqa: BLE001 - the handle carries it
            if self._tracker.claim(pending):
                self._tracker.set_status(key, "failed")
                pending.handle._settle(exc=exc)
            return
        if not exists and _gave_up(pending):
            self._log.warning("workflow %r (flow %s) was added after its handle had failed: "
                              "it runs; its result goes nowhere", key[0], flow_id)
        self._tracker.set_status(key, "running", only_from="pending")
        if events is not None:     # the events thread may rest while a job of it runs here
            jobs = _jobs_of(tree)
            self._tracker.while_pending(pending, lambda: events._expect(pending, jobs))
        if exists:
            self.flow_registry.register(flow_id, key[0])
            self._settle_from_redis(key, [pending])

    def _add_dropped(self, pending: Pending) -> None:
        if self._tracker.claim(pending):
            pending.handle._settle(exc=errors.ShutdownError(
                f"the workflow provider stopped before workflow {pending.key[0]!r} "
                f"(flow {pending.key[1]}) was added"))

    # -- settling ----------------------------------------------------------
    def _on_event(self, ev: QueueEvent) -> None:
        """Events thread (or the handler thread whose write it is, first: a second
        delivery finds nothing pending): settle the flows waiting here; Redis reads go
        to the aux pool."""
        if ev.event not in ("completed", "failed") or ev.job_id is None:
            return
        name = self._by_queue.get(ev.queue)
        if name is None:
            return
        key = (name, ev.job_id)
        if not self._tracker.has_pending(key):
            if ev.event == "completed":   # finished after its timeout: say so from now on
                self._tracker.set_status(key, "completed", only_from="failed")
            return
        claimed = self._tracker.claim_all(key)
        if not claimed:
            return
        if ev.event == "completed":
            self._settle(key, claimed, True, ev.value)
        else:
            if not self._submit(self._settle_read_failure, key, claimed,
                                ev.fields.get("failedReason", "")):
                self._settle(key, claimed, False,
                             errors.ShutdownError("the workflow provider stopped"))

    def _settle(self, key: Tuple[str, str], claimed: List[Pending], ok: bool,
                value: Any) -> None:
        self._tracker.set_status(key, "completed" if ok else "failed")
        for pending in claimed:
            if ok:
                pending.handle._settle(result=value)
            else:
                pending.handle._settle(exc=value)

    def _settle_read_failure(self, key: Tuple[str, str], claimed: List[Pending],
                             reason: str) -> None:
        err = read_failure(self._producer, self.flow_registry, key[0], key[1],
                           self.flow_builder.workflow_queue(key[0]), reason)
        self._settle(key, claimed, False, err)

    def _settle_failed_locally(self, workflow_name: str, flow_id: str,
                               err: BaseException) -> None:
        """A step failed for good in this process: settle the handle without waiting for
        the failure to climb the tree."""
        key = (workflow_name, flow_id)
        claimed = self._tracker.claim_all(key)
        if claimed:
            self._settle(key, claimed, False, err)

    def _settle_from_redis(self, key: Tuple[str, str], candidates: List[Pending],
                           timeout_error: Optional[BaseException] = None) -> None:
        """Settle from the workflow job's state in Redis: completed or failed; else
        reject with ``timeout_error`` if given, or leave pending."""
        queue = self._producer.queue(self.flow_builder.workflow_queue(key[0]))
        try:
            state = queue.get_job_state(key[1])
            job = queue.get_job(key[1]) if state in ("completed", "failed") else None
        except Exception:  # noqa: BLE001 - Redis unreachable: judge by what we have
            self._log.warning("workflow %s (%s): could not read its state", key[0], key[1],
                        exc_info=True)
            state, job = "unknown", None
        claimed = [p for p in candidates if not p.settled]
        if job is not None and state == "completed":
            self._settle(key, [p for p in claimed if self._tracker.claim(p)], True,
                         job.returnvalue)
        elif job is not None and state == "failed":
            err = read_failure(self._producer, self.flow_registry, key[0], key[1], queue.name,
                               job.failed_reason or "")
            self._settle(key, [p for p in claimed if self._tracker.claim(p)], False, err)
        elif timeout_error is not None:
            for pending in claimed:
                if self._tracker.claim(pending):
                    pending.handle._settle(exc=timeout_error)
            if not self._tracker.has_pending(key):
                self._tracker.set_status(key, "failed")     # as OriJS: timed out = failed

    def _on_timeout(self, pending: Pending) -> None:
        """Timer thread: check Redis (on the aux pool) before rejecting."""
        key = pending.key
        self._submit(self._settle_from_redis, key, [pending],
                     WorkflowTimeoutError(key[0], key[1], pending.timeout))

    def _submit(self, fn: Any, *args: Any) -> bool:
        """Run on the aux pool; False once it is shut down (stop() then fails every
        handle still pending with ShutdownError)."""
        try:
            self._aux.submit(run_logged, self._log, fn, *args)
            return True
        except RuntimeError:
            return False

    # -- status ------------------------------------------------------------
    def _job_state(self, workflow_name: str, flow_id: str) -> str:
        return self._producer.queue(self.flow_builder.workflow_queue(workflow_name)) \
            .get_job_state(flow_id)

    def lookup_flow(self, flow_id: str) -> Optional[str]:
        """The workflow name of a flow: the registry key, else a search of the known
        workflow queues (None if not found)."""
        check.string(flow_id, "flow_id")
        return self.flow_registry.lookup(flow_id, self._known_names(),
                                         lambda n, f: self._job_state(n, f) != "unknown")

    def get_status(self, flow_id: str, workflow_name: Optional[str] = None) -> str:
        """pending, running, completed or failed: the local state when this process
        started the flow, else the workflow job's state in Redis (a flow found nowhere
        is pending, as in OriJS: it may not be added yet, or was cleaned up)."""
        local = self._local_status(flow_id, workflow_name)
        if local is not None:
            return local
        found = workflow_name or self.lookup_flow(flow_id)
        if found is None:
            return "pending"
        return _STATUS.get(self._job_state(found, flow_id), "running")

    def get_handle(self, flow_id: str, workflow_name: Optional[str] = None, *,
                   timeout: Optional[Seconds] = None) -> FlowHandle:
        """A handle on a flow started by any process (one executed here and still being
        added, else found through the registry key, then the known workflow queues); it
        settles as ``execute``'s does, within ``timeout`` (default ``default_timeout``)
        plus ``stall_interval``. Raises
        ``WorkflowNotFoundError`` when no workflow job has this id."""
        effective = self._effective_timeout(timeout)
        self._check_started()
        local = self._local_flow(flow_id, workflow_name)
        adding = local is not None and local.status == "pending"   # executed here, being added
        name = local.workflow_name if local is not None and adding else \
            workflow_name or self.lookup_flow(flow_id)
        if name is None or (not adding and self._job_state(name, flow_id) == "unknown"):
            raise WorkflowNotFoundError(flow_id)
        self._watch(name)                                  # FIRST: events from now on
        key = (name, flow_id)
        handle = FlowHandle(flow_id, name, self.get_status, self._callbacks)
        pending = self._tracker.add_pending(key, handle, effective, self._on_timeout)
        self._settle_from_redis(key, [pending])            # THEN: already finished?
        return handle


def _close_all(workers: List[Worker], deadline: Optional[float]) -> List[str]:
    """Close workers side by side (each close waits for its running jobs until the
    deadline); returns the names of the workers that still had running jobs, or were
    still closing at the deadline."""
    busy: List[str] = []
    lock = threading.Lock()    # guards busy

    def close(worker: Worker) -> None:
        if not worker.close(remaining(deadline)):
            with lock:
                busy.append(worker.name)

    threads = [threading.Thread(target=close, args=(w,), name=f"orijs-close-{w.name}", daemon=True)
               for w in workers]
    for thread in threads:
        thread.start()
    late = join_threads(threads, deadline)
    with lock:
        closing = {f"{name[len('orijs-close-'):]} (closing)" for name in late}
        return sorted(set(busy) | closing)


def _gave_up(pending: Pending) -> bool:
    """The handle failed without the flow's outcome: timed out, or the provider stopped."""
    handle = pending.handle
    return handle.done() and isinstance(handle.exception(0),
                                        (WorkflowTimeoutError, errors.ShutdownError))


def _jobs_of(node: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(queue name, job id) of every job of a flow's tree."""
    jobs = [(node["queue_name"], str(node["opts"]["job_id"]))]
    for child in node.get("children", ()):
        jobs += _jobs_of(child)
    return jobs
