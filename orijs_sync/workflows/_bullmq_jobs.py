"""What the BullMQ provider's workers do with step jobs and workflow jobs, and how a
failed workflow's error is read back from Redis by whichever process waits for it.

Step job: results so far = ``flatten_child_results(job._children_values())`` (read
with the job as it was taken: the workers ask for them); run
the step (or the members of a ``__parallel__:a,b`` group); return a result wrapper.
On a failure that will not be retried: run the rollbacks of every completed step in
reverse order (a parallel group's successful members first), store the OriJS failure
record (``{queue_prefix}:workflow-failure:{hash}``, see ``._failure_codec``), write
a summary line to the job's logs (error types and rolled-back steps, for Python
readers), settle the handle at once if it is waiting in this process, and fail the
job with the record's text as its ``failedReason`` (the step's own exception is the
cause, in the stacktrace). ``fail_parent_on_failure`` then fails each job above it
with ``child <key> failed``, up to the workflow job.

Whoever waits for the flow reads, in this order: the summary line of the job that
failed first; the failure record (what a TypeScript OriJS step worker leaves); that
job's ``failedReason``; the workflow job's. OriJS texts are decoded into our errors.

When a group member fails and the group will be retried, only the members that
succeeded are rolled back (the retry runs them again); earlier steps are kept.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from .. import errors
from ..base.util import dumps
from ..job import Job
from ._execution import (
    FAILURE_LOG_TAG,
    GroupFailed,
    completed_order,
    error_from_summary,
    error_message,
    failure_summary,
)
from ._failure_codec import decode_failure, encode_failure
from ._registry import FlowRegistry
from .context import WorkflowContext
from .definition import PARALLEL_PREFIX
from .errors import WorkflowFailedError
from .flow_builder import parallel_members
from .results import (
    flatten_child_results,
    parallel_result_wrapper,
    result_key,
    step_result_wrapper,
)

if TYPE_CHECKING:  # pragma: no cover
    from .bullmq_provider import BullMQWorkflowProvider

CHILD_FAILED = re.compile(r"^child (.+) failed$")
MAX_DEPTH = 10_000


class JobProcessor:
    """The handlers of one provider's step workers and workflow workers."""

    def __init__(self, provider: "BullMQWorkflowProvider") -> None:
        self.p = provider

    # -- step jobs -----------------------------------------------------------
    def process_step(self, workflow_name: str, job: Job) -> Any:
        data = job.data if isinstance(job.data, dict) else {}
        step_name, flow_id = data.get("stepName"), data.get("flowId")
        if data.get("type") != "step" or not isinstance(step_name, str) \
                or not isinstance(flow_id, str):
            raise errors.UnrecoverableError(f"job {job.id} is not a workflow step job")
        prior = flatten_child_results(job._children_values())
        ctx = self._context(workflow_name, flow_id, data, prior, step_name, job)
        parallel = step_name.startswith(PARALLEL_PREFIX)
        names = parallel_members(step_name) if parallel else [step_name]
        registry = self.p.step_registry
        try:
            results = self.p._executor.run_group(
                names, lambda n: registry.get_step(workflow_name, n), ctx, parallel)
        except GroupFailed as failure:
            text = self._fail(job, workflow_name, ctx, prior, failure.step_name,
                              failure.error, failure.succeeded)
            if text is None:
                raise failure.error from None           # retried
            raise errors.UnrecoverableError(text) from failure.error
        if parallel:
            return parallel_result_wrapper(results, prior)
        return step_result_wrapper(step_name, results[step_name], prior)

    # -- workflow jobs -------------------------------------------------------
    def process_workflow(self, workflow_name: str, job: Job) -> Any:
        data = job.data if isinstance(job.data, dict) else {}
        flow_id = data.get("flowId")
        if data.get("type") != "workflow" or not isinstance(flow_id, str):
            raise errors.UnrecoverableError(f"job {job.id} is not a workflow job")
        results = flatten_child_results(job._children_values())
        definition = self.p._definitions.get(workflow_name)
        if definition is None or definition.on_complete is None:
            return results
        ctx = self._context(workflow_name, flow_id, data, results, None, job)
        try:
            return self.p._executor.call(definition.on_complete, ctx)
        except Exception as exc:  # noqa: BLE001 - the workflow fails; steps roll back
            text = self._fail(job, workflow_name, ctx, results, None, exc, {})
            if text is None:
                raise
            raise errors.UnrecoverableError(text) from exc

    # -- helpers -------------------------------------------------------------
    def _context(self, workflow_name: str, flow_id: str, data: Mapping[str, Any],
                 results: Dict[str, Any], step_name: Optional[str], job: Job) -> WorkflowContext:
        meta = data.get("meta")
        return WorkflowContext(flow_id, workflow_name, data.get("workflowData"), results,
                               dict(meta) if isinstance(meta, dict) else {}, step_name,
                               self.p.provider_id, job.attempts_made + 1)

    def _fail(self, job: Job, workflow_name: str, ctx: WorkflowContext,
              prior: Mapping[str, Any], step_name: Optional[str], error: BaseException,
              succeeded: Mapping[str, Any]) -> Optional[str]:
        """Roll back; on the last attempt also record the failure everywhere it is read
        and return its OriJS text (None: the job will be retried)."""
        final = (isinstance(error, errors.UnrecoverableError)
                 or job.attempts_made + 1 >= job.attempts)
        completed = dict(prior)
        completed.update({result_key(k): v for k, v in succeeded.items()})
        registry = self.p.step_registry

        def get_rollback(name: str) -> Any:
            return registry.get_rollback(workflow_name, name)

        if not final:
            if succeeded:
                self.p._executor.rollback(list(succeeded), completed, get_rollback, ctx)
            return None
        definition = self.p._definitions.get(workflow_name)
        order = completed_order(definition.step_names if definition else [], completed)
        rolled_back, rollback_errors = self.p._executor.rollback(order, completed,
                                                                 get_rollback, ctx)
        summary = failure_summary(step_name, error, rolled_back, rollback_errors)
        err = error_from_summary(workflow_name, ctx.flow_id, summary, cause=error,
                                 rollback_errors=rollback_errors)
        self.p._executor.on_error(definition.on_error if definition else None,
                                  ctx.for_step(step_name, completed), err)
        text = encode_failure(step_name, type(error).__name__, error_message(error),
                              rollback_errors)
        self.p.flow_registry.record_failure(ctx.flow_id, text)   # before the job fails
        try:
            job.log(FAILURE_LOG_TAG + dumps(summary))
        except Exception:  # noqa: BLE001 - the waiting side falls back to failedReason
            self.p._log.warning("workflow %s (%s): could not log the failure summary on job %s",
                        workflow_name, ctx.flow_id, job.id, exc_info=True)
        self.p._settle_failed_locally(workflow_name, ctx.flow_id, err)
        return text


def read_failure(producer: Any, registry: FlowRegistry, workflow_name: str, flow_id: str,
                 queue_name: str, fallback_reason: str = "") -> WorkflowFailedError:
    """The error of a failed workflow job, rebuilt from Redis: follow ``child <key>
    failed`` down to the job that failed first and read its summary log line; else the
    failure record; else that job's failedReason (or ``fallback_reason``), decoded."""
    reason, step_name = fallback_reason, None
    try:
        queue = producer.queue(queue_name)
        job = queue.get_job(flow_id)
        if job is not None and isinstance(job.data, dict) \
                and isinstance(job.data.get("flowId"), str):
            flow_id = job.data["flowId"]           # the record's key (OriJS: data.flowId)
        for _ in range(MAX_DEPTH):
            if job is None:
                break
            reason = job.failed_reason or reason
            match = CHILD_FAILED.match(job.failed_reason or "")
            if match:
                prefix, child_queue, child_id = match.group(1).rsplit(":", 2)
                queue = producer.queue(child_queue, prefix)
                job = queue.get_job(child_id)
                continue
            summary = _summary_from_logs(queue.get_job_logs(job.id, -20, -1)["logs"])
            if summary is not None:
                return error_from_summary(workflow_name, flow_id, summary)
            data = job.data if isinstance(job.data, dict) else {}
            step_name = data.get("stepName") if data.get("type") == "step" else None
            break
    except Exception:  # noqa: BLE001 - Redis trouble: report what we have
        registry.log.warning("workflow %s (%s): could not read the failure from Redis",
                             workflow_name, flow_id, exc_info=True)
    record = registry.read_failure(flow_id)
    return decode_failure(workflow_name, flow_id,
                          record if record is not None else (reason or "workflow failed"),
                          None if record is not None else step_name)


def _summary_from_logs(lines: Any) -> Optional[Dict[str, Any]]:
    for line in reversed(list(lines or ())):
        if isinstance(line, str) and line.startswith(FAILURE_LOG_TAG):
            try:
                summary = json.loads(line[len(FAILURE_LOG_TAG):])
            except ValueError:
                continue
            if isinstance(summary, dict):
                return summary
    return None
