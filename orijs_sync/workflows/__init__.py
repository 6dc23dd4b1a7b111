"""The OriJS workflow layer: multi-step workflows as flows of jobs.

``BullMQWorkflowProvider`` runs each workflow as a BullMQ flow (any process that
registered the workflow may run any of its steps; results travel up the job
tree; failures roll back completed steps in reverse order).
``InProcessWorkflowProvider`` has the same interface with threads and no Redis.
"""
from .bullmq_provider import BullMQWorkflowProvider
from .context import WorkflowContext
from .definition import StepDef, StepGroup, Workflow, validate_step_name
from .errors import (
                     RollbackFailedError,
                     StepFailedError,
                     StepNotFoundError,
                     StepTimeoutError,
                     WorkflowFailedError,
                     WorkflowNotFoundError,
                     WorkflowNotRegisteredError,
                     WorkflowTimeoutError,
)
from .flow_builder import JOB_DATA_VERSION, FlowBuilder
from .handle import FlowHandle
from .in_process import InProcessWorkflowProvider
from .results import (
                     WRAPPER_VERSION,
                     flatten_child_results,
                     is_parallel_result_wrapper,
                     is_step_result_wrapper,
                     sanitize,
)
from .step_registry import RegisteredStep, StepRegistry

__all__ = [
    "Workflow", "StepDef", "StepGroup", "WorkflowContext", "FlowHandle",
    "BullMQWorkflowProvider", "InProcessWorkflowProvider", "FlowBuilder", "StepRegistry",
    "RegisteredStep", "validate_step_name", "flatten_child_results", "is_step_result_wrapper",
    "is_parallel_result_wrapper", "sanitize", "WRAPPER_VERSION", "JOB_DATA_VERSION",
    "StepFailedError", "RollbackFailedError", "WorkflowFailedError", "WorkflowTimeoutError",
    "StepTimeoutError", "StepNotFoundError", "WorkflowNotFoundError",
    "WorkflowNotRegisteredError",
]
