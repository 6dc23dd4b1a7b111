"""What the dashboard shows of the OriJS layer: pure reads, bounded.

Events: each event type is a BullMQ queue ``{queue_prefix}.{event}`` (``event.order.created``);
its subscribers are the worker connections on that queue (``CLIENT LIST``), its recent
failures the newest ids of its ``failed`` zset.

Workflows: an execution is a flow: the workflow job (id = flow id) in
``{queue_prefix}.{workflow}`` and a chain of step jobs in ``{queue_prefix}.{workflow}.steps``,
the first step deepest. Its steps are read by walking the chain down from the workflow job
(each job's children: its ``dependencies``, ``processed``, ``failed`` and ``unsuccessful``
keys). The failing step's logs hold the failure summary line our workers write (error type,
the steps rolled back, the rollbacks that failed); an OriJS (TypeScript) worker's failure
record (``{queue_prefix}:workflow-failure:{hash}``) is shown when present.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..base.util import loads, stored_int
from ..keys import QueueKeys
from ..workflows._execution import FAILURE_LOG_TAG
from ..workflows._registry import FlowRegistry
from .data import workers_by_queue
from .data_scan import bullmq_queues

MAX_STEPS = 200
STATE_SETS = ("completed", "failed", "delayed", "waiting-children")


@dataclass
class JobRow:
    """One BullMQ job as the OriJS pages show it (times in ms)."""

    queue: str
    id: str
    name: str
    state: str
    data: Any = None
    returnvalue: Any = None
    failed_reason: Optional[str] = None
    attempts_made: int = 0
    timestamp: Optional[int] = None
    processed_on: Optional[int] = None
    finished_on: Optional[int] = None

    @property
    def duration_ms(self) -> Optional[int]:
        if self.processed_on is None or self.finished_on is None:
            return None
        return max(self.finished_on - self.processed_on, 0)


@dataclass
class EventType:
    name: str
    queue: str
    counts: Dict[str, int]
    subscribers: List[Dict[str, str]] = field(default_factory=list)
    failures: List[JobRow] = field(default_factory=list)


@dataclass
class WorkflowStep:
    name: str
    job: JobRow
    failure: Optional[Dict[str, Any]] = None    # the summary line of a failing step

    @property
    def result(self) -> Any:
        """The step's own result (a parallel group's: its members'), out of its wrapper."""
        value = self.job.returnvalue
        if isinstance(value, dict):
            for key in ("__stepResult", "__parallelResults"):
                if key in value:
                    return value[key]
        return value


@dataclass
class Execution:
    workflow: str
    flow_id: str
    job: JobRow
    steps: List[WorkflowStep] = field(default_factory=list)
    failure_record: Optional[str] = None

    @property
    def failing_step(self) -> Optional[WorkflowStep]:
        return next((s for s in self.steps if s.job.state == "failed"), None)

    @property
    def rolled_back(self) -> List[str]:
        step = self.failing_step
        return list((step.failure or {}).get("rolledBack") or []) if step else []

    @property
    def rollback_errors(self) -> List[Dict[str, Any]]:
        step = self.failing_step
        errors = (step.failure or {}).get("rollbackErrors") if step else None
        return [e for e in errors or [] if isinstance(e, dict)]


def _state(client: Any, keys: QueueKeys, job_id: str) -> str:
    pipe = client.pipeline(transaction=False)
    for name in STATE_SETS:
        pipe.zscore(keys.key(name), job_id)
    pipe.exists(keys.lock(job_id))
    *scores, locked = pipe.execute()
    for name, score in zip(STATE_SETS, scores):
        if score is not None:
            return name
    return "active" if locked else "waiting"


def read_job(client: Any, prefix: str, queue: str, job_id: str) -> Optional[JobRow]:
    keys = QueueKeys(prefix, queue)
    raw = client.hgetall(keys.job(job_id))
    if not raw:
        return None
    state = _state(client, keys, job_id)
    if state == "waiting" and raw.get("defa"):   # a child failed: it fails when next taken
        state = "failing"
    return JobRow(queue=queue, id=job_id, name=raw.get("name", ""), state=state, data=loads(raw.get("data")),
                  returnvalue=loads(raw.get("returnvalue")),
                  failed_reason=raw.get("failedReason") or raw.get("defa") or None,
                  attempts_made=stored_int(raw.get("attemptsMade") or raw.get("atm"), 0),
                  timestamp=stored_int(raw.get("timestamp")),
                  processed_on=stored_int(raw.get("processedOn")),
                  finished_on=stored_int(raw.get("finishedOn")))


def _newest(client: Any, prefix: str, queue: str, state: str, limit: int) -> List[JobRow]:
    ids = client.zrange(QueueKeys(prefix, queue).key(state), 0, limit - 1, desc=True)
    rows = [read_job(client, prefix, queue, str(jid)) for jid in ids]
    return [row for row in rows if row is not None]


def _counts(client: Any, keys: QueueKeys) -> Dict[str, int]:
    pipe = client.pipeline(transaction=False)
    pipe.llen(keys.wait)
    pipe.llen(keys.active)
    for name in ("delayed", "completed", "failed"):
        pipe.zcard(keys.key(name))
    wait, active, delayed, completed, failed = pipe.execute()
    return {"waiting": wait, "active": active, "delayed": delayed, "completed": completed,
            "failed": failed}


# -- events --------------------------------------------------------------------------

def read_event_types(client: Any, prefix: str = "bull", queue_prefix: str = "event", *,
                     failures: int = 5) -> Tuple[List[EventType], bool]:
    """Every event type found (bounded scan), with its counts, subscribers and newest
    ``failures`` failed jobs; and whether the scan was cut short."""
    queues, truncated = bullmq_queues(client, prefix, queue_prefix + ".")
    workers = workers_by_queue(client, prefix, queues)      # one CLIENT LIST
    types = []
    for queue in queues:
        keys = QueueKeys(prefix, queue)
        types.append(EventType(name=queue[len(queue_prefix) + 1:], queue=queue,
                               counts=_counts(client, keys), subscribers=workers[queue],
                               failures=_newest(client, prefix, queue, "failed", failures)))
    return types, truncated


# -- workflows -----------------------------------------------------------------------

def read_workflows(client: Any, prefix: str = "bull",
                   queue_prefix: str = "workflow") -> Tuple[List[str], bool]:
    """The workflow names found: queues ``{queue_prefix}.{name}`` (not their ``.steps``)."""
    queues, truncated = bullmq_queues(client, prefix, queue_prefix + ".")
    head = len(queue_prefix) + 1
    return [q[head:] for q in queues if not q.endswith(".steps")], truncated


def read_executions(client: Any, workflow: str, prefix: str = "bull",
                    queue_prefix: str = "workflow", *, limit: int = 20) -> List[JobRow]:
    """The newest executions of a workflow: its jobs waiting for steps, then finished."""
    queue = f"{queue_prefix}.{workflow}"
    keys = QueueKeys(prefix, queue)
    rows: List[JobRow] = []
    for state in ("waiting-children", "failed", "completed"):
        rows.extend(_newest(client, prefix, queue, state, limit))
    for name in ("active", "wait"):    # a flow failing its workflow job is back in wait
        for jid in client.lrange(keys.key(name), 0, limit - 1):
            row = read_job(client, prefix, queue, str(jid))
            if row is not None:
                rows.append(row)
    rows.sort(key=lambda r: r.timestamp or 0, reverse=True)
    return rows[:limit]


def _children(client: Any, job_key: str) -> List[str]:
    pipe = client.pipeline(transaction=False)
    pipe.smembers(f"{job_key}:dependencies")
    pipe.hkeys(f"{job_key}:processed")
    pipe.hkeys(f"{job_key}:failed")
    pipe.zrange(f"{job_key}:unsuccessful", 0, -1)
    found: List[str] = []
    for reply in pipe.execute():
        found.extend(k for k in reply if k not in found)
    return found


def _failure_summary(client: Any, keys: QueueKeys, job_id: str) -> Optional[Dict[str, Any]]:
    for line in reversed(client.lrange(keys.logs(job_id), -50, -1)):
        if line.startswith(FAILURE_LOG_TAG):
            try:
                summary = json.loads(line[len(FAILURE_LOG_TAG):])
            except ValueError:
                return None
            return summary if isinstance(summary, dict) else None
    return None


def read_execution(client: Any, workflow: str, flow_id: str, prefix: str = "bull",
                   queue_prefix: str = "workflow") -> Optional[Execution]:
    """One execution with its steps in execution order, or ``None`` when its workflow job
    is gone."""
    queue = f"{queue_prefix}.{workflow}"
    parent = read_job(client, prefix, queue, flow_id)
    if parent is None:
        return None
    steps: List[WorkflowStep] = []
    key = QueueKeys(prefix, queue).job(flow_id)
    for _ in range(MAX_STEPS):
        children = _children(client, key)
        if not children:
            break
        key = children[0]      # a step job has one child: the step before it
        child_queue, _, child_id = key[len(prefix) + 1:].rpartition(":")
        row = read_job(client, prefix, child_queue, child_id)
        if row is None:
            break
        summary = _failure_summary(client, QueueKeys(prefix, child_queue), child_id) \
            if row.state == "failed" else None
        step_name = row.data.get("stepName") if isinstance(row.data, dict) else None
        steps.append(WorkflowStep(name=str(step_name or row.name), job=row, failure=summary))
    steps.reverse()
    record = FlowRegistry(client, queue_prefix).read_failure(flow_id)
    return Execution(workflow=workflow, flow_id=flow_id, job=parent, steps=steps,
                     failure_record=record)
