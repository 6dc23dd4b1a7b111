"""Workflow definitions: a name, step groups (sequential or parallel), ``on_complete``.

    order = (Workflow("OrderWorkflow")
             .step("validate", validate)
             .step("charge", charge, rollback=refund)
             .parallel(("email", send_email), ("sms", send_sms))
             .step("fulfill", fulfill))

A step handler is ``fn(ctx) -> result`` (JSON); a rollback is ``fn(ctx)``, run when a
later step fails. The same definition object may be imported by the process that
starts workflows (it needs only the names and the shape) and by the processes
that run the steps (they need the handlers). A process that only starts workflows
may declare the shape alone, as OriJS's definitions do (steps without handlers)::

    order_shape = Workflow("OrderWorkflow").step("validate").step("charge") \
        .parallel("email", "sms").step("fulfill")
    provider.register_emitter(order_shape)
    provider.execute("OrderWorkflow", {"orderId": "1"})
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .. import errors
from .. import options as job_options
from ..base.util import to_seconds

if TYPE_CHECKING:  # pragma: no cover
    from .context import WorkflowContext

__all__ = ["Workflow", "StepDef", "StepGroup", "validate_step_name", "validate_workflow_name",
           "PARALLEL_PREFIX", "StepHandler", "RollbackHandler"]

StepHandler = Callable[["WorkflowContext"], Any]
RollbackHandler = Callable[["WorkflowContext"], Any]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$")
PARALLEL_PREFIX = "__parallel__:"


def validate_step_name(name: Any) -> str:
    """``^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$``; names starting with ``__`` are reserved."""
    if not isinstance(name, str):
        raise errors.InvalidArgumentType(f"step name must be a string, not {type(name).__name__}")
    if name.startswith("__"):
        raise errors.InvalidArgument(
            f"step name {name!r} is reserved: names starting with '__' are "
            "used by the workflow layer")
    if not NAME_PATTERN.match(name):
        raise errors.InvalidArgument(
            f"invalid step name {name!r}: 1-128 characters, letters, digits, "
            "'_' or '-', starting with a letter or digit")
    return name


def validate_workflow_name(name: Any) -> str:
    """Same rule as step names: the name goes into queue names (no ':' or '.')."""
    if not isinstance(name, str):
        raise errors.InvalidArgumentType(
            f"workflow name must be a string, not {type(name).__name__}")
    if not NAME_PATTERN.match(name):
        raise errors.InvalidArgument(
            f"invalid workflow name {name!r}: 1-128 characters, letters, digits, "
            "'_' or '-', starting with a letter or digit")
    return name


@dataclass(frozen=True)
class StepDef:
    """One step: its handler, optional rollback, optional retry options (attempts,
    backoff in seconds or ``{"type", "delay"}``) overriding the workflow's."""

    name: str
    handler: Optional[StepHandler] = None
    rollback: Optional[RollbackHandler] = None
    attempts: Optional[int] = None
    backoff: Any = None


@dataclass(frozen=True)
class StepGroup:
    kind: str                      # "sequential" | "parallel"
    steps: Tuple[StepDef, ...]

    @property
    def names(self) -> List[str]:
        return [s.name for s in self.steps]

    @property
    def job_step_name(self) -> Optional[str]:
        """The synthetic job's step name of a parallel group (``__parallel__:a,b``)."""
        return PARALLEL_PREFIX + ",".join(self.names) if self.kind == "parallel" else None


ParallelItem = Union[str, Tuple[str, StepHandler],
                     Tuple[str, StepHandler, Optional[RollbackHandler]], StepDef]


@dataclass
class Workflow:
    """A workflow definition, built with ``step`` and ``parallel`` (chainable).

    ``on_complete(ctx)``, if given, makes the workflow's result; without it the result
    is the dict of every step's result by step name. ``attempts``/``backoff`` are the
    default retry options of its step jobs. ``on_error(ctx, error)`` (OriJS's onError)
    runs once when the workflow fails, where the failure is decided (the process whose
    step failed for the last time), after the rollbacks: ``ctx.results`` holds the
    results so far, ``ctx.step_name`` the failed step, ``error`` is the
    ``WorkflowFailedError`` the caller gets; if it raises, that is logged.
    """

    name: str
    on_complete: Optional[Callable[["WorkflowContext"], Any]] = None
    attempts: Optional[int] = None
    backoff: Any = None
    groups: List[StepGroup] = field(default_factory=list)
    on_error: Optional[Callable[["WorkflowContext", BaseException], Any]] = None

    def __post_init__(self) -> None:
        validate_workflow_name(self.name)
        if self.on_complete is not None and not callable(self.on_complete):
            raise errors.InvalidArgumentType(
                "on_complete must be callable: on_complete(ctx) -> result")
        if self.on_error is not None and not callable(self.on_error):
            raise errors.InvalidArgumentType("on_error must be callable: on_error(ctx, error)")
        _check_retry(self.attempts, self.backoff, f"workflow {self.name!r}")

    # -- building ----------------------------------------------------------
    def step(self, name: str, handler: Optional[StepHandler] = None,
             rollback: Optional[RollbackHandler] = None, *, attempts: Optional[int] = None,
             backoff: Any = None) -> "Workflow":
        """Append a step run after everything before it (without a handler: declared
        only, for a process that starts the workflow and does not run it)."""
        step = self._make(name, handler, rollback, attempts, backoff)
        if self.groups and self.groups[-1].kind == "sequential":
            last = self.groups[-1]
            self.groups[-1] = StepGroup("sequential", last.steps + (step,))
        else:
            self.groups.append(StepGroup("sequential", (step,)))
        return self

    def parallel(self, *items: ParallelItem) -> "Workflow":
        """Append a group of two or more steps run concurrently: ``(name, handler)``,
        ``(name, handler, rollback)``, ``StepDef`` or, declared only, ``name``
        items. One step alone is ``step``."""
        steps: List[StepDef] = []
        for i, item in enumerate(items):
            steps.append(self._parallel_step(item, f"items[{i}]", steps))
        if len(steps) < 2:
            raise errors.InvalidArgument(
                f"parallel() runs two or more steps side by side (items), got {len(steps)}"
                f"{': ' + repr(items[0]) if items else ''}; one step alone is .step()",
                "items", items)
        self.groups.append(StepGroup("parallel", tuple(steps)))
        return self

    def _parallel_step(self, item: Any, arg: str, pending: Sequence[StepDef]) -> StepDef:
        if isinstance(item, str):
            return self._make(item, None, None, None, None, pending=pending)
        if isinstance(item, StepDef):
            return self._make(item.name, item.handler, item.rollback, item.attempts,
                              item.backoff, pending=pending)
        if not (isinstance(item, tuple) and len(item) in (2, 3)):
            raise errors.InvalidArgumentType(
                f"parallel() {arg} must be (name, handler), (name, handler, rollback), a "
                f"StepDef or a step name, not {item!r}", arg, item)
        if not callable(item[1]):     # None too: a step without handler is its name alone
            raise errors.InvalidArgumentType(
                f"parallel() {arg} {item!r}: the handler must be callable: handler(ctx) -> "
                "result (a step declared without a handler is given by its name alone)",
                arg, item)
        rollback = item[2] if len(item) == 3 else None
        return self._make(item[0], item[1], rollback, None, None, pending=pending)

    def _make(self, name: str, handler: Optional[StepHandler],
              rollback: Optional[RollbackHandler], attempts: Optional[int], backoff: Any,
              pending: Sequence[StepDef] = ()) -> StepDef:
        validate_step_name(name)
        if name in self.step_names or name in [s.name for s in pending]:
            raise errors.InvalidArgument(
                f"workflow {self.name!r} already has a step named {name!r}")
        if handler is not None and not callable(handler):
            raise errors.InvalidArgumentType(
                f"handler of step {name!r} must be callable: handler(ctx) -> result")
        if rollback is not None and handler is None:
            raise errors.InvalidArgumentType(f"step {name!r} has a rollback but no handler")
        if rollback is not None and not callable(rollback):
            raise errors.InvalidArgumentType(
                f"rollback of step {name!r} must be callable: rollback(ctx)")
        _check_retry(attempts, backoff, f"step {name!r}")
        return StepDef(name, handler, rollback, attempts, backoff)

    # -- reading -----------------------------------------------------------
    @property
    def step_names(self) -> List[str]:
        """Every step name, in execution order (parallel members in declared order)."""
        return [s.name for g in self.groups for s in g.steps]

    @property
    def declared_only(self) -> List[str]:
        """The steps declared without a handler (the shape is all this definition has)."""
        return [s.name for g in self.groups for s in g.steps if s.handler is None]

    @property
    def steps(self) -> Dict[str, StepDef]:
        return {s.name: s for g in self.groups for s in g.steps}

    def shape(self) -> List[Tuple[str, List[str]]]:
        """The groups as ``[(kind, [names])]``: what must match across processes."""
        return [(g.kind, g.names) for g in self.groups]


def _check_retry(attempts: Optional[int], backoff: Any, what: str) -> None:
    """The job options' own checks (a step job carries them), with the step named."""
    try:
        job_options.encode({"attempts": attempts, "backoff": backoff})
    except errors.ValidationError as exc:
        raise type(exc)(f"{what}: {exc}", exc.argument, exc.value) from None


def backoff_seconds(backoff: Any, attempt: int) -> float:
    """Delay before retry number ``attempt`` (1-based), for the in-process provider."""
    if backoff is None:
        return 0.0
    if isinstance(backoff, (int, float)):
        return float(backoff)
    seconds = to_seconds(backoff.get("delay") or 0, "backoff delay") or 0.0
    if backoff.get("type") == "exponential":
        return float(seconds * 2 ** (attempt - 1))
    return seconds
