"""Running steps, parallel groups and rollbacks: shared by both providers.

A ``StepExecutor`` owns one thread pool (threads made on demand, up to
``max_workers``), used for the members of parallel groups and for steps run under
a ``step_timeout``. Handlers run inside ``propagation_context(ctx.meta)``. Threads
never wait on this pool from inside it, so it cannot deadlock; a step that outlives
its ``step_timeout`` keeps its pool thread until it returns (Python cannot stop a
thread), and ``shutdown`` waits for it.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..base import fork
from ..base.pools import shutdown_pools
from ..base.util import dumps
from .context import WorkflowContext, propagation_context
from .errors import (
    RollbackFailedError,
    StepFailedError,
    StepTimeoutError,
    WorkflowFailedError,
)
from .results import result_key
from .step_registry import RegisteredStep

log = logging.getLogger(__name__)

__all__ = ["StepExecutor", "GroupFailed", "failure_summary", "error_from_summary",
           "FAILURE_LOG_TAG"]

# A failing step writes one job log line "<tag><json summary>": how another process
# learns the error type and the rollback errors (failedReason keeps the plain message).
FAILURE_LOG_TAG = "orijs.workflow.failure "

Resolver = Callable[[str], RegisteredStep]


def error_message(exc: BaseException) -> str:
    """What BullMQ stores as ``failedReason`` for this exception."""
    return str(exc) or type(exc).__name__


class GroupFailed(Exception):
    """A step (or a member of a parallel group) failed; ``succeeded`` holds the results
    of the group's members that completed."""

    def __init__(self, step_name: str, error: BaseException,
                 succeeded: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(f"step {step_name!r} failed: {error_message(error)}")
        self.step_name = step_name
        self.error = error
        self.succeeded = dict(succeeded or {})


def _invoke(fn: Callable[[WorkflowContext], Any], ctx: WorkflowContext) -> Any:
    with propagation_context(ctx.meta):
        result = fn(ctx)
    dumps(result, f"result of step {ctx.step_name!r}", argument=False)   # a step failure
    return result


class StepExecutor:
    def __init__(self, name: str, *, step_timeout: float = 0.0, max_workers: int = 16,
                 logger: Optional[logging.Logger] = None) -> None:
        self.step_timeout = step_timeout
        self._name = name
        self._max_workers = max_workers
        self.log = logger or log
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix=f"{name}-steps")
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The pool's threads did not survive the fork (and it counts them): a new one."""
        self._pool = ThreadPoolExecutor(self._max_workers,
                                        thread_name_prefix=f"{self._name}-steps")

    def shutdown(self, deadline: Optional[float] = None) -> bool:
        """Cancel queued members and join the pool's threads (until ``deadline``, a
        monotonic time); False if some are still running then."""
        return not shutdown_pools({"steps": self._pool}, deadline)

    def call(self, fn: Callable[[WorkflowContext], Any], ctx: WorkflowContext) -> Any:
        """Run one handler, under ``step_timeout`` when it is set."""
        if self.step_timeout <= 0:
            return _invoke(fn, ctx)
        future = self._pool.submit(_invoke, fn, ctx)
        return self._result(future, ctx.step_name, time.monotonic() + self.step_timeout)

    def _result(self, future: "Future[Any]", step_name: Optional[str],
                deadline: Optional[float]) -> Any:
        try:
            if deadline is None:
                return future.result()
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            raise StepTimeoutError(f"step {step_name!r} did not finish within "
                                   f"{self.step_timeout:g}s (step_timeout)") from None

    def run_group(self, names: Sequence[str], resolve: Resolver, ctx: WorkflowContext,
                  parallel: bool) -> Dict[str, Any]:
        """Run one step (``parallel=False``, one name) or a parallel group; returns results
        by step name, or raises ``GroupFailed``."""
        if not parallel:
            name = names[0]
            try:
                return {name: self.call(resolve(name).handler, ctx.for_step(name))}
            except Exception as exc:  # noqa: BLE001 - the step's failure
                raise GroupFailed(name, exc) from exc
        deadline = time.monotonic() + self.step_timeout if self.step_timeout > 0 else None
        futures: List[Tuple[str, Optional["Future[Any]"], Optional[BaseException]]] = []
        for name in names:
            try:
                handler = resolve(name).handler
            except Exception as exc:  # noqa: BLE001 - StepNotFoundError
                futures.append((name, None, exc))
                continue
            futures.append((name, self._pool.submit(_invoke, handler, ctx.for_step(name)), None))
        succeeded: Dict[str, Any] = {}
        failures: List[Tuple[str, BaseException]] = []
        for name, future, error in futures:
            if future is not None:
                try:
                    succeeded[name] = self._result(future, name, deadline)
                    continue
                except Exception as exc:  # noqa: BLE001
                    error = exc
            assert error is not None
            failures.append((name, error))
        if failures:
            for name, error in failures[1:]:
                self.log.warning("workflow %s (%s): parallel step %r also failed: %s",
                            ctx.workflow_name, ctx.flow_id, name, error_message(error))
            name, error = failures[0]
            raise GroupFailed(name, error, succeeded) from error
        return succeeded

    def on_error(self, fn: Optional[Callable[[WorkflowContext, BaseException], Any]],
                 ctx: WorkflowContext, error: BaseException) -> None:
        """Run a workflow's ``on_error`` hook; its own failure is logged, never raised."""
        if fn is None:
            return
        try:
            with propagation_context(ctx.meta):
                fn(ctx, error)
        except Exception as exc:  # noqa: BLE001 - must not mask the workflow's error
            self.log.error("workflow %s (%s): on_error failed: %s (the workflow's error: %s)",
                      ctx.workflow_name, ctx.flow_id, error_message(exc), error,
                      exc_info=exc)

    def rollback(self, order: Sequence[str], completed: Mapping[str, Any],
                 get_rollback: Callable[[str], Optional[Callable[[WorkflowContext], Any]]],
                 ctx: WorkflowContext) -> Tuple[List[str], List[RollbackFailedError]]:
        """Run the rollbacks of the completed steps of ``order`` in reverse order. Each
        rollback sees every completed result; its errors are logged and collected."""
        rolled_back: List[str] = []
        failures: List[RollbackFailedError] = []
        for name in reversed(list(order)):
            if result_key(name) not in completed:
                continue
            try:
                fn = get_rollback(name)
            except Exception:  # noqa: BLE001 - no such step here: nothing to roll back
                fn = None
            if fn is None:
                continue
            try:
                self.call(fn, ctx.for_step(name, completed))
                rolled_back.append(name)
            except Exception as exc:  # noqa: BLE001 - logged, the other rollbacks still run
                self.log.error("workflow %s (%s): rollback of step %r failed: %s",
                          ctx.workflow_name, ctx.flow_id, name, error_message(exc),
                          exc_info=exc)
                failure = RollbackFailedError(name, type(exc).__name__, error_message(exc))
                failure.__cause__ = exc
                failures.append(failure)
        if rolled_back or failures:
            self.log.info("workflow %s (%s): rollbacks done: %d ran (%s), %d failed%s",
                     ctx.workflow_name, ctx.flow_id, len(rolled_back) + len(failures),
                     ", ".join(rolled_back + [str(f.step_name) for f in failures]), len(failures),
                     "".join(f"; {f}" for f in failures))
        return rolled_back, failures


def completed_order(step_names: Sequence[str], completed: Mapping[str, Any]) -> List[str]:
    """The completed steps in execution order (the definition's when known)."""
    known = [n for n in step_names if result_key(n) in completed]
    extra = [k for k in completed if k not in {result_key(n) for n in known}]
    return extra + known


def failure_summary(step_name: Optional[str], exc: BaseException, rolled_back: Sequence[str],
                    rollback_errors: Sequence[RollbackFailedError]) -> Dict[str, Any]:
    return {"step": step_name, "errorType": type(exc).__name__, "message": error_message(exc),
            "rolledBack": list(rolled_back),
            "rollbackErrors": [e.to_dict() for e in rollback_errors]}


def error_from_summary(workflow_name: str, flow_id: str, summary: Mapping[str, Any],
                       cause: Optional[BaseException] = None,
                       rollback_errors: Optional[Sequence[RollbackFailedError]] = None
                       ) -> WorkflowFailedError:
    """The handle's error; ``cause``/``rollback_errors`` carry the live exceptions when
    the failure happened in this process."""
    primary = StepFailedError(summary.get("step"), str(summary.get("errorType") or "Error"),
                              str(summary.get("message") or ""))
    if cause is not None:
        primary.__cause__ = cause
    if rollback_errors is None:
        rollback_errors = [RollbackFailedError(str(e.get("step")), str(e.get("errorType")),
                                               str(e.get("message")))
                           for e in summary.get("rollbackErrors") or ()
                           if isinstance(e, Mapping)]
    return WorkflowFailedError(workflow_name, flow_id, primary, rollback_errors,
                               summary.get("rolledBack") or ())
