"""InProcessWorkflowProvider: the BullMQ provider's interface and behaviour, no Redis.

For unit tests and single-process use. Each workflow runs on a pool of
``concurrency`` threads, its parallel groups on the step pool; results go
through JSON and the same sanitizing as on Redis, failures roll back in the same
order and fail the handle with the same error shapes, timeouts are base +
``stall_interval`` on one timer thread, local states are bounded the same way.
Idempotency keys deduplicate while the flow's local state lives (until evicted
or cleaned up ``flow_state_cleanup_delay`` seconds after it settles).
"""
from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .. import errors
from ..base.pools import deadline_of, shutdown_pools
from ..base.util import Seconds, dumps, run_logged
from ._base import ProviderBase
from ._execution import (
    GroupFailed,
    completed_order,
    error_from_summary,
    failure_summary,
)
from .context import WorkflowContext
from .definition import StepGroup, Workflow, backoff_seconds
from .errors import WorkflowNotFoundError, WorkflowTimeoutError
from .handle import FlowHandle, Pending
from .results import result_key, sanitize
from .step_registry import RegisteredStep, StepRegistry

__all__ = ["InProcessWorkflowProvider"]

FlowKey = Tuple[str, str]


class _Aborted(Exception):
    """The provider stopped while a step waited to be retried."""


class InProcessWorkflowProvider(ProviderBase):
    """Same options as ``BullMQWorkflowProvider`` but the Redis ones; ``concurrency``
    workflows run at once."""

    _prefer_registered = True

    def __init__(self, default_timeout: Seconds = 30.0, stall_interval: Seconds = 5.0,
                 step_timeout: Seconds = 0.0, max_flow_states: int = 10_000,
                 provider_id: Optional[str] = None, *,
                 flow_state_cleanup_delay: Seconds = 300.0, concurrency: int = 10,
                 parallel_workers: int = 16, step_registry: Optional[StepRegistry] = None,
                 default_step_options: Optional[Mapping[str, Any]] = None,
                 logger: Optional[logging.Logger] = None) -> None:
        super().__init__(name="inprocess", default_timeout=default_timeout,
                         stall_interval=stall_interval, step_timeout=step_timeout,
                         max_flow_states=max_flow_states, provider_id=provider_id,
                         flow_state_cleanup_delay=flow_state_cleanup_delay,
                         concurrency=concurrency, parallel_workers=parallel_workers,
                         step_registry=step_registry,
                         default_step_options=default_step_options, logger=logger)
        self._runner: Optional[ThreadPoolExecutor] = None
        self._runners: Dict[str, ThreadPoolExecutor] = {}   # workflows with own concurrency
        self._stopping = threading.Event()

    def start(self) -> "InProcessWorkflowProvider":
        with self._lock:
            self._refuse_if_stopped()
            if self._state == "new":
                self._timer.start()
                self._runner = ThreadPoolExecutor(self.concurrency,
                                                  thread_name_prefix="orijs-workflow-run")
                self._state = "started"
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Running workflows finish, waited for up to ``timeout`` seconds (past it a warning
        says how many still run: Python cannot stop a thread); queued ones are dropped;
        pending handles fail with ShutdownError."""
        deadline = deadline_of(timeout)
        with self._lock:
            if self._state == "stopped":
                return
            self._state = "stopped"
            self._stopping.set()          # a run that has not started yet will not
            pools = {"workflow runs": self._runner,
                     **{f"{name} runs": pool for name, pool in self._runners.items()}}
            self._runner = None
            self._runners.clear()
        busy = shutdown_pools({k: p for k, p in pools.items() if p is not None}, deadline)
        if not self._executor.shutdown(deadline):
            busy.append("step handlers")
        if busy:
            self._log.warning("InProcessWorkflowProvider stopped after %ss with %s still "
                              "running", timeout, " and ".join(busy))
        self._timer.stop()
        shutdown = errors.ShutdownError("the workflow provider stopped")
        for pending in self._tracker.close():
            pending.handle._settle(exc=shutdown)

    # -- execute ---------------------------------------------------------------
    def execute(self, workflow: Union[Workflow, str], data: Any = None, *,
                meta: Optional[Mapping[str, Any]] = None, timeout: Optional[Seconds] = None,
                idempotency_key: Optional[str] = None) -> FlowHandle:
        call = self._prepare(workflow, data, meta, timeout, idempotency_key)
        key = call.key
        runner = self._runner_for(key[0])
        if runner is None:
            raise errors.ShutdownError("the workflow provider is stopped")
        handle = FlowHandle(call.flow_id, key[0], self.get_status)
        state, created = self._tracker.track(key)
        pending = self._tracker.add_pending(key, handle, call.timeout, self._on_timeout)
        if not created:
            outcome = state.outcome       # a duplicate: the first run settles it
            if outcome is not None and self._tracker.claim(pending):
                ok, value = outcome
                handle._settle(result=value) if ok else handle._settle(exc=value)
            return handle
        try:
            runner.submit(run_logged, self._log, self._run, key, call.definition,
                          json.loads(call.data_text), call.meta)
        except RuntimeError:   # stopped meanwhile
            if self._tracker.claim(pending):
                handle._settle(exc=errors.ShutdownError("the workflow provider stopped"))
            return handle
        self._tracker.set_status(key, "running", only_from="pending")
        return handle

    def _runner_for(self, workflow_name: str) -> Optional[ThreadPoolExecutor]:
        """The pool running this workflow: its own when registered with a concurrency."""
        with self._lock:
            limit = self._workflow_concurrency.get(workflow_name)
            if self._runner is None or limit is None:
                return self._runner
            runner = self._runners.get(workflow_name)
            if runner is None:
                runner = ThreadPoolExecutor(limit, thread_name_prefix=f"orijs-workflow-run-"
                                                                       f"{workflow_name}")
                self._runners[workflow_name] = runner
            return runner

    def _on_timeout(self, pending: Pending) -> None:
        if self._tracker.claim(pending):
            if not self._tracker.has_pending(pending.key):
                self._tracker.set_status(pending.key, "failed")   # as OriJS
            pending.handle._settle(exc=WorkflowTimeoutError(pending.key[0], pending.key[1],
                                                            pending.timeout))

    def _finish(self, key: FlowKey, ok: bool, value: Any) -> None:
        # Outcome first, then claim: a duplicate execute racing with us either finds
        # the outcome or is claimed here.
        self._tracker.set_status(key, "completed" if ok else "failed", (ok, value))
        for pending in self._tracker.claim_all(key):
            pending.handle._settle(result=value) if ok else pending.handle._settle(exc=value)

    # -- running a workflow ------------------------------------------------------
    def _resolver(self, definition: Workflow) -> Any:
        name = definition.name
        registered = name in self._definitions

        def resolve(step: str) -> RegisteredStep:
            if registered:
                return self.step_registry.get_step(name, step)
            found = definition.steps.get(step)
            if found is None or found.handler is None:
                return self.step_registry.get_step(name, step)   # raises StepNotFoundError
            return RegisteredStep(found.handler, found.rollback)

        return resolve

    def _run(self, key: FlowKey, definition: Workflow, data: Any,
             meta: Dict[str, Any]) -> None:
        if self._stopping.is_set():
            return      # stop(): the handle fails with ShutdownError
        resolve = self._resolver(definition)
        ctx = WorkflowContext(key[1], key[0], data, {}, meta, None, self.provider_id)
        completed: Dict[str, Any] = {}
        try:
            for group in definition.groups:
                if group.kind == "parallel":
                    self._run_group(definition, group, list(group.names), True, resolve, ctx,
                                    completed)
                else:
                    for step in group.steps:
                        self._run_group(definition, group, [step.name], False, resolve, ctx,
                                        completed)
            if definition.on_complete is None:
                result: Any = dict(completed)
            else:
                try:
                    result = self._executor.call(definition.on_complete,
                                                 ctx.for_step(None, completed))
                    result = json.loads(dumps(result, "result of on_complete"))
                except Exception as exc:  # noqa: BLE001
                    raise GroupFailed("", exc) from exc
        except _Aborted:
            return      # stop(): the handle fails with ShutdownError
        except GroupFailed as failure:
            self._finish(key, False, self._fail(definition, resolve, ctx, completed, failure))
            return
        except Exception as exc:  # noqa: BLE001 - a bug here must still settle the handle
            self._log.exception("workflow %s (%s): unexpected error", key[0], key[1])
            self._finish(key, False, exc)
            return
        self._finish(key, True, result)

    def _attempts(self, definition: Workflow, group: StepGroup,
                  names: Any) -> Tuple[int, Any]:
        step = definition.steps.get(names[0]) if group.kind == "sequential" else None
        attempts = ((step.attempts if step else None) or definition.attempts
                    or self.default_step_options.get("attempts") or 1)
        backoff = ((step.backoff if step else None) or definition.backoff
                   or self.default_step_options.get("backoff"))
        return int(attempts), backoff

    def _run_group(self, definition: Workflow, group: StepGroup, names: Any, parallel: bool,
                   resolve: Any, ctx: WorkflowContext, completed: Dict[str, Any]) -> None:
        attempts, backoff = self._attempts(definition, group, names)
        for attempt in range(1, attempts + 1):
            step_ctx = WorkflowContext(ctx.flow_id, ctx.workflow_name, ctx.data,
                                       dict(completed), ctx.meta, None, ctx.provider_id,
                                       attempt)
            try:
                results = self._executor.run_group(names, resolve, step_ctx, parallel)
            except GroupFailed as failure:
                final = (attempt >= attempts
                         or isinstance(failure.error, errors.UnrecoverableError))
                if final:
                    failure.succeeded = {k: sanitize(json.loads(dumps(v)))
                                         for k, v in failure.succeeded.items()}
                    raise
                if failure.succeeded:   # the retry runs them again
                    done = dict(completed)
                    done.update({result_key(k): v for k, v in failure.succeeded.items()})
                    self._executor.rollback(list(failure.succeeded), done,
                                            lambda n: resolve(n).rollback, step_ctx)
                if self._stopping.wait(backoff_seconds(backoff, attempt)):
                    raise _Aborted() from None
                continue
            for name, value in results.items():   # as on Redis: JSON, sanitized
                completed[result_key(name)] = sanitize(json.loads(dumps(value)))
            return

    def _fail(self, definition: Workflow, resolve: Any, ctx: WorkflowContext,
              completed: Dict[str, Any], failure: GroupFailed) -> BaseException:
        done = dict(completed)
        done.update({result_key(k): v for k, v in failure.succeeded.items()})
        order = completed_order(definition.step_names, done)

        def get_rollback(name: str) -> Any:
            try:
                return resolve(name).rollback
            except Exception:  # noqa: BLE001
                return None

        rolled_back, rollback_errors = self._executor.rollback(
            order, done, get_rollback, ctx.for_step(None, done))
        step_name = failure.step_name or None
        summary = failure_summary(step_name, failure.error, rolled_back, rollback_errors)
        err = error_from_summary(ctx.workflow_name, ctx.flow_id, summary, cause=failure.error,
                                 rollback_errors=rollback_errors)
        self._executor.on_error(definition.on_error, ctx.for_step(step_name, done), err)
        return err

    # -- status --------------------------------------------------------------------
    def get_status(self, flow_id: str, workflow_name: Optional[str] = None) -> str:
        """pending, running, completed or failed while the flow's local state lives;
        else pending (as OriJS answers for a flow it cannot find)."""
        return self._local_status(flow_id, workflow_name) or "pending"

    def get_handle(self, flow_id: str, workflow_name: Optional[str] = None, *,
                   timeout: Optional[Seconds] = None) -> FlowHandle:
        """A handle on a flow of this provider whose local state still lives.
        Raises ``WorkflowNotFoundError`` otherwise."""
        effective = self._effective_timeout(timeout)
        self._check_started()
        for name in [workflow_name] if workflow_name else self._known_names():
            key = (name, flow_id)
            state = self._tracker.get_state(key)
            if state is None:
                continue
            handle = FlowHandle(flow_id, name, self.get_status)
            pending = self._tracker.add_pending(key, handle, effective, self._on_timeout)
            outcome = state.outcome         # finished already: settle now
            if outcome is not None and self._tracker.claim(pending):
                ok, value = outcome
                handle._settle(result=value) if ok else handle._settle(exc=value)
            return handle
        raise WorkflowNotFoundError(flow_id)
