"""Errors of the workflow layer, all under ``orijs_sync.errors``' tree.

A failed workflow fails its handle with ``WorkflowFailedError`` (a
``orijs_sync.errors.RolledBackError``): ``primary`` is a ``StepFailedError``
naming the step and its error, ``rollback_errors`` holds one
``RollbackFailedError`` per rollback handler that raised. The same shapes
come back whichever process ran the step: across processes they are rebuilt
from what the failing step wrote to Redis (a summary line in its job logs, else
the OriJS failure record or ``failedReason``, decoded from OriJS's formats:
``Step '<name>' failed: <message>`` and ``ORIJSError:{json}``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .. import errors

__all__ = ["StepNotFoundError", "WorkflowNotFoundError", "WorkflowNotRegisteredError", "StepFailedError",
           "RollbackFailedError", "WorkflowFailedError", "WorkflowTimeoutError",
           "StepTimeoutError"]


class StepNotFoundError(errors.OrijsError, LookupError):
    """No handler is registered for this workflow step (in this process)."""

    def __init__(self, workflow_name: str, step_name: str) -> None:
        super().__init__(f"no step {step_name!r} registered for workflow {workflow_name!r}")
        self.workflow_name = workflow_name
        self.step_name = step_name


class WorkflowNotFoundError(errors.OrijsError, LookupError):
    """No workflow job has this flow id (never started, or already removed)."""

    def __init__(self, flow_id: str) -> None:
        super().__init__(f"workflow {flow_id!r} not found: it may not exist or has been "
                         "cleaned up")
        self.flow_id = flow_id


class WorkflowNotRegisteredError(errors.InvalidStateError, LookupError):
    """``execute`` of a workflow this provider has neither registered nor declared as
    emitter."""


class StepTimeoutError(errors.TimeoutError):
    """A step ran longer than the provider's ``step_timeout`` (its thread is left to
    finish on its own: Python cannot stop a thread)."""


class StepFailedError(errors.OrijsError):
    """The primary error of a failed workflow: which step failed, and how.

    ``error_type`` is the class name of what the step raised, ``message`` its text
    (the step job's ``failedReason``). In the process that ran the step the original
    exception is also ``__cause__``.
    """

    def __init__(self, step_name: Optional[str], error_type: str, message: str) -> None:
        where = f"step {step_name!r}" if step_name else "workflow completion"
        super().__init__(f"{where} failed: {error_type}: {message}")
        self.step_name = step_name
        self.error_type = error_type
        self.message = message

    def to_dict(self) -> Dict[str, Any]:
        return {"step": self.step_name, "errorType": self.error_type, "message": self.message}


class RollbackFailedError(errors.OrijsError):
    """A rollback handler raised; the other rollbacks still ran. ``step_name`` is None
    when the failure was decoded from an OriJS ``ORIJSError:`` record (which does not
    name the step)."""

    def __init__(self, step_name: Optional[str], error_type: str, message: str) -> None:
        where = f"rollback of step {step_name!r}" if step_name else "a rollback"
        super().__init__(f"{where} failed: {error_type}: {message}")
        self.step_name = step_name
        self.error_type = error_type
        self.message = message

    def to_dict(self) -> Dict[str, Any]:
        return {"step": self.step_name, "errorType": self.error_type, "message": self.message}


class WorkflowFailedError(errors.RolledBackError):
    """A workflow failed: ``primary`` (a ``StepFailedError``), the rollback errors,
    and ``rolled_back``: the steps whose rollback ran, in the order they ran."""

    def __init__(self, workflow_name: str, flow_id: str, primary: StepFailedError,
                 rollback_errors: Sequence[RollbackFailedError] = (),
                 rolled_back: Sequence[str] = ()) -> None:
        message = f"workflow {workflow_name!r} ({flow_id}) failed: {primary}"
        if rollback_errors:
            message += f"; {len(rollback_errors)} rollback(s) failed"
        super().__init__(message, primary, rollback_errors)
        self.workflow_name = workflow_name
        self.flow_id = flow_id
        self.step_name = primary.step_name
        self.rolled_back: List[str] = list(rolled_back)


class WorkflowTimeoutError(errors.TimeoutError):
    """No outcome within the effective timeout (base + stall interval). The flow may
    still finish in Redis; ``provider.get_status(flow_id)`` tells."""

    def __init__(self, workflow_name: str, flow_id: str, timeout: float) -> None:
        super().__init__(f"workflow {workflow_name!r} ({flow_id}) did not finish within "
                         f"{timeout:g}s")
        self.workflow_name = workflow_name
        self.flow_id = flow_id
        self.timeout = timeout
