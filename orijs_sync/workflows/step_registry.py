"""StepRegistry: workflow name -> step name -> handler and rollback.

Step processing looks handlers up here, not in per-flow state, so any process that
registered the workflow can run any of its steps and their rollbacks.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, List, Optional

from .. import errors
from .definition import RollbackHandler, StepHandler, validate_step_name
from .errors import StepNotFoundError

__all__ = ["StepRegistry", "RegisteredStep"]


@dataclass(frozen=True)
class RegisteredStep:
    handler: StepHandler
    rollback: Optional[RollbackHandler] = None


class StepRegistry:
    """Thread-safe two-level map; step names are validated at registration."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: Dict[str, Dict[str, RegisteredStep]] = {}

    def register(self, workflow_name: str, step_name: str, handler: StepHandler,
                 rollback: Optional[RollbackHandler] = None) -> None:
        validate_step_name(step_name)
        if not callable(handler):
            raise errors.InvalidArgumentType(f"handler of step {step_name!r} must be callable")
        if rollback is not None and not callable(rollback):
            raise errors.InvalidArgumentType(f"rollback of step {step_name!r} must be callable")
        with self._lock:
            self._steps.setdefault(workflow_name, {})[step_name] = RegisteredStep(handler,
                                                                                   rollback)

    def get(self, workflow_name: str, step_name: str) -> StepHandler:
        return self.get_step(workflow_name, step_name).handler

    def get_step(self, workflow_name: str, step_name: str) -> RegisteredStep:
        with self._lock:
            step = self._steps.get(workflow_name, {}).get(step_name)
        if step is None:
            raise StepNotFoundError(workflow_name, step_name)
        return step

    def get_rollback(self, workflow_name: str, step_name: str) -> Optional[RollbackHandler]:
        with self._lock:
            step = self._steps.get(workflow_name, {}).get(step_name)
        return step.rollback if step is not None else None

    def has(self, workflow_name: str, step_name: str) -> bool:
        with self._lock:
            return step_name in self._steps.get(workflow_name, {})

    def get_workflow_steps(self, workflow_name: str) -> List[str]:
        with self._lock:
            return list(self._steps.get(workflow_name, {}))

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()
