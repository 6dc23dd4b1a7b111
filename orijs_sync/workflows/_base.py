"""What both workflow providers share: options, registration, argument checks, state."""
from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Union

from .. import errors
from .. import options as job_options
from ..base import validate as check
from ..base.timer import Timer
from ..base.util import Seconds, dumps, to_seconds
from ..options import validate_job_id
from ._execution import StepExecutor
from .context import current_meta
from .definition import Workflow, validate_workflow_name
from .errors import WorkflowNotRegisteredError
from .handle import FlowHandle, FlowTracker, LocalFlowState
from .step_registry import StepRegistry

MIN_STALL_INTERVAL = 5.0
# Step jobs' retry options unless the provider, the workflow or the step says otherwise:
# OriJS's (3 attempts, exponential back-off from 1 s).
DEFAULT_STEP_OPTIONS: Mapping[str, Any] = {"attempts": 3,
                                           "backoff": {"type": "exponential", "delay": 1.0}}


@dataclass
class ExecuteCall:
    """An ``execute`` call, checked: nothing is added when building it raises."""

    definition: Workflow
    flow_id: str
    data: Any
    data_text: str
    meta: Dict[str, Any]
    timeout: float              # effective: base + stall interval (0 = none)
    idempotency_key: Optional[str]

    @property
    def key(self) -> "tuple[str, str]":
        return (self.definition.name, self.flow_id)


def _check_concurrency(concurrency: Any) -> int:
    return check.integer(concurrency, "concurrency", minimum=1, maximum=10_000)


class ProviderBase:
    """Durations are seconds. ``stall_interval`` must be >= 5: shorter intervals mistake
    GC pauses and network hiccups for dead workers; every timeout is extended by it."""

    _prefer_registered = False     # execute(Workflow) runs the registered definition

    def __init__(self, *, name: str, default_timeout: Seconds, stall_interval: Seconds,
                 step_timeout: Seconds, max_flow_states: int, provider_id: Optional[str],
                 flow_state_cleanup_delay: Seconds, concurrency: int, parallel_workers: int,
                 step_registry: Optional[StepRegistry],
                 default_step_options: Optional[Mapping[str, Any]],
                 logger: Optional[logging.Logger] = None) -> None:
        # The library's own loggers unless one is given (OriJS's ``logger`` option).
        self._log = logger or logging.getLogger(type(self).__module__)
        self.stall_interval = float(to_seconds(stall_interval, "stall_interval",
                                               allow_none=False) or 0.0)
        if self.stall_interval < MIN_STALL_INTERVAL:
            raise errors.InvalidArgument(
                f"stall_interval must be at least {MIN_STALL_INTERVAL:g}s (got "
                f"{self.stall_interval:g}): shorter intervals mistake GC pauses "
                "and network hiccups for dead workers")
        self.default_timeout = float(to_seconds(default_timeout, "default_timeout",
                                                allow_none=False) or 0.0)
        self.step_timeout = float(to_seconds(step_timeout, "step_timeout") or 0.0)
        self.cleanup_delay = float(to_seconds(flow_state_cleanup_delay,
                                              "flow_state_cleanup_delay", allow_none=False) or 0.0)
        self.concurrency = _check_concurrency(concurrency)
        check.integer(parallel_workers, "parallel_workers", minimum=1, maximum=10_000)
        check.integer(max_flow_states, "max_flow_states", minimum=0)
        self.provider_id = check.optional_string(provider_id, "provider_id") \
            or f"{socket.gethostname()}-{os.getpid()}"
        if step_registry is not None and not isinstance(step_registry, StepRegistry):
            check.bad_type("step_registry", step_registry, "a StepRegistry")
        self.step_registry = step_registry or StepRegistry()
        step_options = check.mapping(default_step_options, "default_step_options")
        check.known_keys(step_options, job_options.KNOWN, "default_step_options")
        self.default_step_options = {**DEFAULT_STEP_OPTIONS, **step_options}
        job_options.encode(self.default_step_options, arg="default_step_options")
        self._timer = Timer(f"orijs-workflow-timer-{name}")
        self._tracker = FlowTracker(self._timer, max_flow_states=max_flow_states,
                                    cleanup_delay=self.cleanup_delay)
        self._executor = StepExecutor(f"orijs-workflow-{name}", step_timeout=self.step_timeout,
                                      max_workers=parallel_workers, logger=logger)
        self._lock = threading.RLock()          # guards the fields below (and subclasses')
        self._definitions: Dict[str, Workflow] = {}
        self._emitters: Set[str] = set()
        self._workflow_concurrency: Dict[str, int] = {}   # register(..., concurrency=)
        self._shapes: Dict[str, Workflow] = {}            # register_emitter(definition)
        self._state = "new"                     # new -> started -> stopped

    # -- registration ------------------------------------------------------
    def register(self, workflow: Workflow, *, concurrency: Optional[int] = None) -> None:
        """Run this workflow's steps (and its completion) in this process; ``concurrency``
        (default: the provider's) bounds how many of its jobs (in-process: its runs) this
        process runs at once, as OriJS's per-workflow ``concurrency``."""
        if not isinstance(workflow, Workflow):
            raise errors.InvalidArgumentType(f"register() takes a Workflow, not {type(workflow).__name__}")
        if concurrency is not None:
            _check_concurrency(concurrency)
        if workflow.declared_only:
            raise errors.InvalidArgumentType(f"workflow {workflow.name!r} declares steps without handlers "
                            f"({', '.join(workflow.declared_only)}): a process that only "
                            "starts it calls register_emitter(workflow)")
        with self._lock:
            self._refuse_if_stopped()
            for step in workflow.steps.values():
                assert step.handler is not None   # declared_only is empty
                self.step_registry.register(workflow.name, step.name, step.handler,
                                            step.rollback)
            self._definitions[workflow.name] = workflow
            if concurrency is not None:
                self._workflow_concurrency[workflow.name] = concurrency
            self._registered(workflow.name, consumer=True)

    def register_emitter(self, workflow: Union[str, Workflow]) -> None:
        """Start this workflow from here; another process runs its steps. Given its
        definition (the shape is enough: steps need no handlers), ``execute`` takes the
        workflow's name too."""
        if isinstance(workflow, Workflow):
            workflow_name = workflow.name
        else:
            workflow_name = validate_workflow_name(workflow)
        with self._lock:
            self._refuse_if_stopped()
            self._emitters.add(workflow_name)
            if isinstance(workflow, Workflow):
                self._shapes[workflow_name] = workflow
            self._registered(workflow_name, consumer=False)

    def _registered(self, workflow_name: str, consumer: bool) -> None:
        """Hook, under the lock."""

    # -- state ---------------------------------------------------------------
    @property
    def state(self) -> str:
        """new, started or stopped (set as soon as stop() begins)."""
        return self._state

    def _refuse_if_stopped(self) -> None:
        if self._state == "stopped":
            raise errors.ShutdownError("the workflow provider is stopped")

    def _check_started(self) -> None:
        with self._lock:
            if self._state != "started":
                self._refuse_if_stopped()
                raise errors.InvalidStateError("the workflow provider is not started: "
                                               "call start()")

    def stop(self, timeout: Optional[float] = None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _known_names(self) -> List[str]:
        with self._lock:
            return sorted(set(self._definitions) | self._emitters)

    # -- execute -----------------------------------------------------------
    def _prepare(self, workflow: Union[Workflow, str], data: Any,
                 meta: Optional[Mapping[str, Any]], timeout: Optional[Seconds],
                 idempotency_key: Optional[str]) -> ExecuteCall:
        definition = self._definition(workflow)
        if idempotency_key is not None:
            validate_job_id(idempotency_key, "idempotency_key")
        text = dumps(data, f"data of workflow {definition.name!r}")
        resolved_meta = check.mapping(meta, "meta") if meta is not None else current_meta()
        dumps(resolved_meta, "meta")
        effective = self._effective_timeout(timeout)
        self._check_started()
        return ExecuteCall(definition, idempotency_key or str(uuid.uuid4()), data, text,
                           resolved_meta, effective, idempotency_key)

    def _effective_timeout(self, timeout: Optional[Seconds]) -> float:
        """``timeout`` seconds (default ``default_timeout``; 0 = none) + stall interval."""
        base = self.default_timeout if timeout is None \
            else float(to_seconds(timeout, "timeout") or 0.0)
        return base + self.stall_interval if base > 0 else 0.0

    def get_handle(self, flow_id: str, workflow_name: Optional[str] = None, *,
                   timeout: Optional[Seconds] = None) -> FlowHandle:  # pragma: no cover
        raise NotImplementedError

    def get_result(self, flow_id: str, workflow_name: Optional[str] = None, *,
                   timeout: Optional[Seconds] = None) -> Any:
        """Wait for a flow's result (OriJS's getResult): ``get_handle(...).result()``.
        Raises the workflow's error, ``WorkflowNotFoundError``, or
        ``WorkflowTimeoutError`` after ``timeout`` (default ``default_timeout``)
        plus ``stall_interval``."""
        return self.get_handle(flow_id, workflow_name, timeout=timeout).result()

    def _definition(self, workflow: Union[Workflow, str]) -> Workflow:
        with self._lock:
            if isinstance(workflow, Workflow):
                name = workflow.name
                known = name in self._definitions or name in self._emitters
                found: Optional[Workflow] = workflow
                if self._prefer_registered:
                    found = self._definitions.get(name, workflow)
            elif isinstance(workflow, str):
                name = workflow
                found = self._definitions.get(name) or self._shapes.get(name)
                known = found is not None
            else:
                raise errors.InvalidArgumentType(f"execute() takes a Workflow or its name, not "
                                                 f"{type(workflow).__name__}")
        if not known or found is None:
            raise WorkflowNotRegisteredError(
                f"workflow {name!r} is not registered here: call register(workflow) (this "
                f"process runs it) or register_emitter(workflow) (its definition: the "
                f"shape is enough)")
        return found

    # -- status --------------------------------------------------------------
    def _local_status(self, flow_id: str, workflow_name: Optional[str]) -> Optional[str]:
        state = self._local_flow(flow_id, workflow_name)
        return state.status if state is not None else None

    def _local_flow(self, flow_id: str, workflow_name: Optional[str]) -> Optional[LocalFlowState]:
        """The state of a flow this provider executed (while it is kept), else None."""
        check.string(flow_id, "flow_id")
        if workflow_name is not None:
            validate_workflow_name(workflow_name)
        for name in [workflow_name] if workflow_name else self._known_names():
            state = self._tracker.get_state((name, flow_id))
            if state is not None:
                return state
        return None

    def stats(self) -> Dict[str, int]:
        """Sizes of the local maps and timer entries (all 0 once nothing is pending and
        every flow state is cleaned up)."""
        return self._tracker.sizes()
