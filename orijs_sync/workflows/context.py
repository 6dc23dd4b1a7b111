"""WorkflowContext: what a step, a rollback and ``on_complete`` receive.

Propagation meta comes from ``orijs_sync.events.context``: ``execute`` takes
the caller's current meta when none is given, and handlers run inside
``propagation_context(meta)``, so an event emitted from a step carries the
workflow's meta.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ..events.context import current_meta, propagation_context

__all__ = ["WorkflowContext", "current_meta", "propagation_context", "step_logger"]

_step_log = logging.getLogger("orijs_sync.workflows.steps")


def step_logger(workflow_name: str, flow_id: str,
                step_name: Optional[str]) -> "logging.LoggerAdapter[logging.Logger]":
    extra = {"workflow": workflow_name, "flow_id": flow_id, "step": step_name}
    return logging.LoggerAdapter(_step_log, extra)


@dataclass(frozen=True)
class WorkflowContext:
    """``results`` holds the results of the steps that completed before this one, by
    step name (in a rollback: every completed step's, its own included)."""

    flow_id: str
    workflow_name: str
    data: Any
    results: Dict[str, Any] = field(default_factory=dict)
    meta: Dict[str, Any] = field(default_factory=dict)
    step_name: Optional[str] = None
    provider_id: Optional[str] = None
    attempt: int = 1

    @property
    def log(self) -> "logging.LoggerAdapter[logging.Logger]":
        return step_logger(self.workflow_name, self.flow_id, self.step_name)

    def get_result(self, step_name: str, default: Any = None) -> Any:
        from .results import result_key
        return self.results.get(result_key(step_name), default)

    def for_step(self, step_name: Optional[str],
                 results: Optional[Mapping[str, Any]] = None) -> "WorkflowContext":
        return WorkflowContext(self.flow_id, self.workflow_name, self.data,
                               dict(self.results if results is None else results),
                               self.meta, step_name, self.provider_id, self.attempt)
