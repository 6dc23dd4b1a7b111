"""FlowProducer: trees of parent/child jobs, across queues, added atomically.

A node is a dict::

    {"name": "parent", "queue_name": "orders", "data": {...},
     "opts": {"job_id": "order-1", "priority": 3, ...},       # Queue.add keywords
     "children": [{"name": "c1", "queue_name": "steps", "data": {...},
                   "opts": {"fail_parent_on_failure": True}}]}

As BullMQ does, every node gets its id before anything is written (``opts["job_id"]``
or a random UUID), parents are added first, in ``waiting-children``, and each child
carries ``parent = {id, queue}`` and joins the parent's ``:dependencies`` set; the
whole tree (or every tree of ``add_bulk``) is one MULTI/EXEC transaction. Adding a
tree whose ids exist already adds nothing new.

The root may itself be attached to an existing job with ``opts["parent"]``: a Job,
or ``{"id": ..., "queue": "{prefix}:{queue}"}`` (BullMQ's form). A handler uses this
to add children to its own job, then calls ``job.move_to_waiting_children()``.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from . import _fork
from . import options as job_options
from ._cluster import check_flow
from ._job_flow import PARENT_FLAGS, attach_to_parent, children_keys, parent_link
from .connection import ConnectionLike, ConnectionOwner, RedisConnection
from .job import Job
from .queue import AddCall, Queue, check_add_result

NODE_KEYS = {"name", "queue_name", "data", "opts", "children", "prefix"}


@dataclass
class JobNode:
    """One job of a flow and its children (a tree)."""

    job: Job
    children: List["JobNode"] = field(default_factory=list)

    def walk(self) -> Iterable["JobNode"]:
        """This node, then every descendant (depth first)."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class _Planned:
    """A node whose addJob call is ready, with where its job will live."""

    queue: Queue
    call: AddCall
    job_id: str
    children: List["_Planned"]
    parent_key: Optional[str]
    stored_parent: Optional[Dict[str, Any]]


class FlowProducer(ConnectionOwner):
    """Adds and reads flows. Thread-safe; share one instance."""

    def __init__(self, connection: ConnectionLike = None, *, prefix: str = "bull") -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        self.prefix = prefix
        self._use_connection(connection)
        self._queues: Dict[Tuple[str, str], Queue] = {}
        self._lock = threading.Lock()
        _fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()   # the connection and the queues reset themselves

    def __reduce__(self) -> Any:
        """Pickled as its options (``multiprocessing`` spawn)."""
        return (_rebuild_producer, (self.connection, self.prefix))

    def queue(self, name: str, prefix: Optional[str] = None) -> Queue:
        """The Queue (sharing this producer's connection) that jobs of ``name`` belong to."""
        key = (prefix or self.prefix, name)
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                queue = Queue(name, connection=self.connection, prefix=key[0])
                self._queues[key] = queue
            return queue

    # -- adding --------------------------------------------------------------
    def add(self, flow: Mapping[str, Any]) -> JobNode:
        """Add one tree atomically; returns it as added, ids filled in."""
        return self.add_bulk([flow])[0]

    def add_bulk(self, flows: Iterable[Mapping[str, Any]]) -> List[JobNode]:
        """Add many trees in one transaction. Every node is checked before anything is
        written: a bad node raises ``ValueError``/``TypeError`` and adds nothing."""
        plans = [self._plan(flow, None, f"flow[{i}]") for i, flow in enumerate(flows)]
        if not plans:
            return []
        ordered: List[_Planned] = []
        for plan in plans:
            self._flatten(plan, ordered)
        if self.connection.is_cluster:
            check_flow([(p.queue.prefix, p.queue.name) for p in ordered])
        pipe = self.client.pipeline(transaction=True)
        for planned in ordered:
            planned.call.run(planned.queue.scripts, client=pipe)
        results = [reply[0] for reply in pipe.execute()]   # addJob answers a list per call
        ids = {}
        for planned, result in zip(ordered, results):
            what = f"flow job {planned.call.name!r} ({planned.queue.name}:{planned.job_id})"
            if planned.parent_key:
                what += f" with parent {planned.parent_key}"
            ids[id(planned)] = check_add_result(result, what)[0]
        return [self._node(plan, ids) for plan in plans]

    def _flatten(self, plan: _Planned, out: List[_Planned]) -> None:
        out.append(plan)  # parents before their children
        for child in plan.children:
            self._flatten(child, out)

    def _node(self, plan: _Planned, ids: Dict[int, str]) -> JobNode:
        job = plan.call.job(plan.queue, ids[id(plan)])
        if plan.parent_key:
            job.parent_key = plan.parent_key
            job.parent = plan.stored_parent
        return JobNode(job, [self._node(child, ids) for child in plan.children])

    def _plan(self, node: Any, parent: Optional[Dict[str, str]], where: str) -> _Planned:
        if not isinstance(node, Mapping):
            raise ValueError(f"{where} must be a dict with name, queue_name, data, opts, children")
        unknown = set(node) - NODE_KEYS
        if unknown:
            raise ValueError(f"{where} has unknown key(s) {', '.join(sorted(unknown))}; "
                             f"a node takes {', '.join(sorted(NODE_KEYS))}")
        name, queue_name = node.get("name"), node.get("queue_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where} needs a 'name' (non-empty string)")
        if not isinstance(queue_name, str) or not queue_name:
            raise ValueError(f"{where} ({name!r}) needs a 'queue_name' (non-empty string)")
        if ":" in queue_name:
            raise ValueError(f"{where}: queue_name {queue_name!r} must not contain ':'")
        prefix = node.get("prefix") or self.prefix
        queue = self.queue(queue_name, prefix)
        raw_opts = dict(node.get("opts") or {})
        link = raw_opts.pop("parent", None)
        if link is not None:
            if parent is not None:
                raise ValueError(f"{where} ({name!r}): only a flow's root may set opts['parent']")
            parent = parent_link(link)
        opts = job_options.encode(raw_opts)
        job_id = opts.get("jobId") or str(uuid.uuid4())
        opts["jobId"] = job_id
        stored_parent: Optional[Dict[str, Any]] = None
        parent_key = None
        if parent is not None:
            try:
                stored_parent = attach_to_parent(parent, opts)
            except ValueError as exc:
                raise ValueError(f"{where} ({name!r}): {exc}") from None
            parent_key = f"{parent['queue']}:{parent['id']}"
        else:
            flags = [flag for flag in PARENT_FLAGS if opts.get(flag)]
            if len(flags) > 1:
                raise ValueError(f"{where} ({name!r}): these options cannot be used together: "
                                 + ", ".join(PARENT_FLAGS[f] for f in flags))
        children = node.get("children") or []
        if not isinstance(children, (list, tuple)):
            raise ValueError(f"{where} ({name!r}): children must be a list of nodes")
        data = node.get("data")
        call = AddCall(queue.keys, name, {} if data is None else data, opts,
                       parent=stored_parent, wait_children=bool(children))
        me = {"id": job_id, "queue": queue.keys.queue_key}
        planned_children = [self._plan(child, me, f"{where}.children[{i}]")
                            for i, child in enumerate(children)]
        return _Planned(queue, call, job_id, planned_children, parent_key, stored_parent)

    # -- reading -------------------------------------------------------------
    def get_flow(self, job_id: str, queue_name: str, depth: int = 10,
                 max_children: int = 20, prefix: Optional[str] = None) -> Optional[JobNode]:
        """The tree under a job as it is now: its children (at most ``max_children`` of
        each outcome per node) down to ``depth`` levels (1 = the job alone).
        ``None`` when the job does not exist."""
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, not {depth!r}")
        if isinstance(max_children, bool) or not isinstance(max_children, int) \
                or max_children < 1:
            raise ValueError(f"max_children must be an integer >= 1, not {max_children!r}")
        return self._get_node(prefix or self.prefix, queue_name, str(job_id), depth,
                              max_children)

    def _get_node(self, prefix: str, queue_name: str, job_id: str, depth: int,
                  max_children: int) -> Optional[JobNode]:
        job = self.queue(queue_name, prefix).get_job(job_id)
        if job is None:
            return None
        node = JobNode(job)
        if depth > 1:
            for key in children_keys(job.get_dependencies(count=max_children)):
                child_prefix, child_queue, child_id = key.split(":", 2)
                child = self._get_node(child_prefix, child_queue, child_id, depth - 1,
                                       max_children)
                if child is not None:
                    node.children.append(child)
        return node


def _rebuild_producer(connection: RedisConnection, prefix: str) -> FlowProducer:
    producer = FlowProducer(connection, prefix=prefix)
    producer._owns_connection = True     # unpickled: a connection of its own
    return producer
