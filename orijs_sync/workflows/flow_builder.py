"""FlowBuilder: a workflow's step groups -> one FlowProducer tree.

Children run before their parent, so execution order A -> B -> C is the tree
``parent <- C <- B <- A`` (A the deepest child). A parallel group is one synthetic
step job named ``__parallel__:a,b`` whose handler runs the members concurrently;
it takes the previous group as its child. Every step job has
``fail_parent_on_failure``: a failure climbs to the workflow job.

Job ids are predictable, so the pending result can be registered before the tree
is added, and adding the same tree twice adds nothing new: the workflow job's id is
the flow id (the idempotency key when one is given), a step's is
``{flow id}-step-{step name}``. BullMQ refuses ':' in custom ids, so a parallel
group's id is ``{flow id}-step-__parallel__-a,b`` (its step name keeps the colon).

Queues: ``{queue_prefix}.{workflow}`` for workflow jobs, ``{queue_prefix}.{workflow}.steps``
for step jobs. Job data as @orijs/bullmq writes it (``type``, ``version``, ``flowId``...).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..base import validate as check
from .definition import PARALLEL_PREFIX, StepGroup, Workflow

__all__ = ["FlowBuilder", "JOB_DATA_VERSION", "workflow_job_data", "step_job_data"]

JOB_DATA_VERSION = "1"


def workflow_job_data(flow_id: str, workflow_data: Any,
                      meta: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    data: Dict[str, Any] = {"type": "workflow", "version": JOB_DATA_VERSION, "flowId": flow_id,
                            "workflowData": workflow_data, "stepResults": {}}
    if meta:
        data["meta"] = dict(meta)
    return data


def step_job_data(flow_id: str, step_name: str, workflow_data: Any,
                  meta: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    data: Dict[str, Any] = {"type": "step", "version": JOB_DATA_VERSION, "flowId": flow_id,
                            "stepName": step_name, "workflowData": workflow_data}
    if meta:
        data["meta"] = dict(meta)
    return data


def parallel_members(step_name: str) -> List[str]:
    """``__parallel__:a,b`` -> ``["a", "b"]``."""
    return [n for n in step_name[len(PARALLEL_PREFIX):].split(",") if n]


class FlowBuilder:
    def __init__(self, queue_prefix: str = "workflow") -> None:
        self.queue_prefix = check.name(queue_prefix, "queue_prefix")

    def workflow_queue(self, workflow_name: str) -> str:
        return f"{self.queue_prefix}.{workflow_name}"

    def steps_queue(self, workflow_name: str) -> str:
        return f"{self.queue_prefix}.{workflow_name}.steps"

    @staticmethod
    def parent_job_id(flow_id: str) -> str:
        return flow_id

    @staticmethod
    def step_job_id(flow_id: str, step_name: str) -> str:
        return f"{flow_id}-step-{step_name.replace(':', '-')}"

    def build(self, workflow: Workflow, flow_id: str, data: Any,
              meta: Optional[Mapping[str, Any]] = None,
              step_options: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The FlowProducer node of a whole workflow. ``step_options`` are the default
        job options of step jobs (attempts, backoff...), under the workflow's and each
        step's own."""
        children = self._children(workflow, workflow.groups, flow_id, data, meta,
                                  dict(step_options or {}))
        node: Dict[str, Any] = {"name": workflow.name,
                                "queue_name": self.workflow_queue(workflow.name),
                                "data": workflow_job_data(flow_id, data, meta),
                                "opts": {"job_id": self.parent_job_id(flow_id), "attempts": 1}}
        if children:
            node["children"] = children
        return node

    def _children(self, workflow: Workflow, groups: Sequence[StepGroup], flow_id: str,
                  data: Any, meta: Optional[Mapping[str, Any]],
                  defaults: Dict[str, Any]) -> List[Dict[str, Any]]:
        queue = self.steps_queue(workflow.name)
        base = dict(defaults)
        for key, value in (("attempts", workflow.attempts), ("backoff", workflow.backoff)):
            if value is not None:
                base[key] = value
        previous: List[Dict[str, Any]] = []
        for group in groups:
            if group.kind == "parallel":
                name = group.job_step_name or ""
                previous = [self._step_node(queue, flow_id, name, data, meta, base, previous)]
                continue
            for step in group.steps:
                opts = dict(base)
                if step.attempts is not None:
                    opts["attempts"] = step.attempts
                if step.backoff is not None:
                    opts["backoff"] = step.backoff
                previous = [self._step_node(queue, flow_id, step.name, data, meta, opts,
                                            previous)]
        return previous

    def _step_node(self, queue: str, flow_id: str, step_name: str, data: Any,
                   meta: Optional[Mapping[str, Any]], opts: Dict[str, Any],
                   children: List[Dict[str, Any]]) -> Dict[str, Any]:
        node: Dict[str, Any] = {
            "name": step_name, "queue_name": queue,
            "data": step_job_data(flow_id, step_name, data, meta),
            "opts": dict(opts, job_id=self.step_job_id(flow_id, step_name),
                         fail_parent_on_failure=True)}
        if children:
            node["children"] = children
        return node
