"""FlowProducer: trees of parent/child jobs, across queues, added atomically.

A node is a dict::

    {"name": "parent", "queue_name": "orders", "data": {...},
     "opts": {"job_id": "order-1", "priority": 3, ...},       # Queue.add keywords
     "children": [{"name": "c1", "queue_name": "steps", "data": {...},
                   "opts": {"fail_parent_on_failure": True}}]}

As BullMQ does, every node gets its id before anything is written (``opts["job_id"]``
or a random UUID), parents are added first, in ``waiting-children``, and each child
carries ``parent = {id, queue}`` and joins the parent's ``:dependencies`` set; the
whole tree (or every tree of ``add_bulk``) is one script call that checks every node
before it writes any: a refused node adds nothing of the flow.
Adding a tree whose ids exist already adds nothing new.

The root may itself be attached to an existing job with ``opts["parent"]``: a Job,
or ``{"id": ..., "queue": "{prefix}:{queue}"}`` (BullMQ's form). A handler uses this
to add children to its own job, then calls ``job.move_to_waiting_children()``.
"""
from __future__ import annotations

import contextlib
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from . import errors
from . import options as job_options
from ._flow_options import queue_defaults
from ._job_flow import PARENT_FLAGS, attach_to_parent, children_keys, parent_link
from .base import fork
from .base import validate as check
from .base.util import dumps
from .engine.local import Handing
from .job import Job
from .queue import AddCall, Queue, check_add_result
from .store.cluster import check_flow
from .store.connect import ConnectionOwner
from .store.connection import ConnectionLike, RedisConnection
from .store.scripts import Scripts
from .types import FlowJob

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

    def what(self) -> str:
        """The node as an error about its add names it."""
        what = f"flow job {self.call.name!r} ({self.queue.name}:{self.job_id})"
        return what + f" with parent {self.parent_key}" if self.parent_key else what


class FlowProducer(ConnectionOwner):
    """Adds and reads flows. Thread-safe; share one instance."""

    def __init__(self, connection: ConnectionLike = None, *, prefix: str = "bull",
                 queue_class: Type[Queue] = Queue) -> None:
        """``queue_class``: what ``queue`` makes (a ``Queue`` subclass)."""
        check.string(prefix, "prefix")
        self.prefix = prefix
        self._queue_class = queue_class
        self._use_connection(connection)
        self.scripts = Scripts(self.client)
        self._queues: Dict[Tuple[str, str], Queue] = {}
        self._lock = threading.Lock()
        self._local = threading.local()     # this thread's next write: side command, queue defaults
        fork.track(self)

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
                queue = self._queue_class(name, connection=self.connection, prefix=key[0])
                self._queues[key] = queue
            return queue

    # -- adding --------------------------------------------------------------
    def add(self, flow: FlowJob,
            queues_options: Optional[Mapping[str, Any]] = None) -> JobNode:
        """Add one tree atomically; returns it as added, ids filled in.

        ``queues_options`` (BullMQ's ``queuesOptions``): ``{queue name:
        {"default_job_options": {...}}}``, the options (``Queue.add`` keywords) of every
        job of the tree in that queue, each node's own ``opts`` laid over them."""
        self._local.defaults = queue_defaults(queues_options)
        try:
            return self.add_bulk([flow])[0]
        finally:
            self._local.defaults = None

    @contextlib.contextmanager
    def _side_command(self, command: Sequence[Any]) -> Iterator[None]:
        """Within the block, this thread's next write also sends ``command`` (a
        best-effort side key, in the same round trip: see
        ``RedisConnection.run_script``), whatever subclass wraps ``add``/``add_bulk``."""
        self._local.side = command
        try:
            yield
        finally:
            self._local.side = None

    def add_bulk(self, flows: Iterable[FlowJob]) -> List[JobNode]:
        """Add many trees in one transaction. Every node is checked before anything is
        written: a bad node raises ``ValueError``/``TypeError`` and adds nothing."""
        if isinstance(flows, (str, bytes, Mapping)) or not isinstance(flows, Iterable):
            check.bad_type("flows", flows, "a list of flow dicts")
        defaults, self._local.defaults = getattr(self._local, "defaults", None) or {}, None
        plans = [self._plan(flow, None, f"flow[{i}]", defaults) for i, flow in enumerate(flows)]
        if not plans:
            return []
        ordered: List[_Planned] = []
        for plan in plans:
            self._flatten(plan, ordered)
        if self.connection.is_cluster:
            check_flow([(p.queue.prefix, p.queue.name) for p in ordered])
        side, self._local.side = getattr(self._local, "side", None), None
        results = self._write(ordered, side)
        ids = {}
        for planned, result in zip(ordered, results):
            ids[id(planned)] = check_add_result(result, planned.what())[0]
        return [self._node(plan, ids) for plan in plans]

    def _write(self, ordered: List[_Planned], side: Optional[Sequence[Any]]) -> List[Any]:
        """Every node in one ``addFlow`` script call: all checked, then all written, so a
        refused node (a missing parent, an id held under another parent) adds nothing.
        The same call takes a job for each free Worker of this process serving a leaf's
        queue (see ``engine.local``)."""
        keys: List[str] = []
        args: List[Any] = [len(ordered)]
        for planned in ordered:
            k = planned.queue.keys
            keys += [k.meta, k.id, k.events]
            args += [k.base, *planned.call.args]
        handing = self._handing(ordered)
        if handing.takes:
            args.append(dumps(handing.takes))
        try:
            reply = self.connection.run_script(self.scripts, "addFlow", keys, args, side=side)
        except BaseException:
            handing.cancel()
            raise
        if reply and isinstance(reply[0], int):
            handing.cancel()
            code, index = reply
            check_add_result(code, ordered[index - 1].what() + "; nothing of the flow was added")
        if handing.takes:
            reply, taken = reply
            handing.hand(taken)
        return list(reply)

    def _handing(self, ordered: List[_Planned]) -> Handing:
        """A slot reserved on a free Worker of this process for each leaf (a node
        without children, not delayed: it will wait) whose queue one serves."""
        handing = Handing()
        for planned in ordered:
            if not planned.children and not planned.call.opts.get("delay"):
                k = planned.queue.keys
                handing.reserve(self.connection, k.marker, qk=k.base)
        return handing

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

    def _plan(self, node: Any, parent: Optional[Dict[str, str]], where: str,
              defaults: Mapping[str, Dict[str, Any]]) -> _Planned:
        check.mapping(node, where, allow_none=False)
        check.known_keys(node, NODE_KEYS, where)
        name = check.string(node.get("name"), f"{where}.name")
        queue_name = check.name(node.get("queue_name"), f"{where}.queue_name")
        prefix = check.optional_string(node.get("prefix"), f"{where}.prefix") \
            or self.prefix
        queue = self.queue(queue_name, prefix)
        raw_opts = check.mapping(node.get("opts"), f"{where}.opts")
        check.known_keys(raw_opts, job_options.KNOWN, f"{where}.opts")
        raw_opts = job_options.merge(defaults.get(queue_name), raw_opts)
        link = raw_opts.pop("parent", None)
        if link is not None:
            if parent is not None:
                raise errors.InvalidArgument(
                    f"{where} ({name!r}): only a flow's root may set opts['parent']")
            parent = parent_link(link)
        opts = job_options.encode(raw_opts, arg=f"{where}.opts")
        job_id = opts.get("jobId") or str(uuid.uuid4())
        opts["jobId"] = job_id
        stored_parent: Optional[Dict[str, Any]] = None
        parent_key = None
        if parent is not None:
            try:
                stored_parent = attach_to_parent(parent, opts)
            except ValueError as exc:
                raise errors.InvalidArgument(f"{where} ({name!r}): {exc}") from None
            parent_key = f"{parent['queue']}:{parent['id']}"
        else:
            flags = [flag for flag in PARENT_FLAGS if opts.get(flag)]
            if len(flags) > 1:
                raise errors.InvalidArgument(
                    f"{where} ({name!r}): these options cannot be used together: "
                    + ", ".join(PARENT_FLAGS[f] for f in flags))
        children = node.get("children") or []
        if not isinstance(children, (list, tuple)):
            check.bad_type(f"{where}.children", children, "a list of nodes")
        _check_flow_deduplication(opts.get("de"), bool(children), f"{where} ({name!r})")
        data = node.get("data")
        call = AddCall(queue.keys, name, {} if data is None else data, opts,
                       parent=stored_parent, wait_children=bool(children))
        me = {"id": job_id, "queue": queue.keys.queue_key}
        planned_children = [self._plan(child, me, f"{where}.children[{i}]", defaults)
                            for i, child in enumerate(children)]
        return _Planned(queue, call, job_id, planned_children, parent_key, stored_parent)

    # -- reading -------------------------------------------------------------
    def get_flow(self, job_id: str, queue_name: str, depth: int = 10,
                 max_children: int = 20, prefix: Optional[str] = None) -> Optional[JobNode]:
        """The tree under a job as it is now: its children (at most ``max_children`` of
        each outcome per node) down to ``depth`` levels (1 = the job alone).
        ``None`` when the job does not exist."""
        check.integer(depth, "depth", minimum=1)
        check.integer(max_children, "max_children", minimum=1)
        check.name(queue_name, "queue_name")
        prefix = check.optional_string(prefix, "prefix")
        return self._get_node(prefix or self.prefix, queue_name, check.job_id(job_id), depth,
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


def _check_flow_deduplication(de: Optional[Dict[str, Any]], has_children: bool,
                              where: str) -> None:
    """Refuses the deduplication modes a flow cannot run (BullMQ's flows leave out
    ``replace``; a job with children kept by ``keep_last_if_active`` would come back
    without them)."""
    if not de:
        return
    if de.get("replace"):
        raise errors.InvalidArgument(
            f"{where}: deduplication.replace is not available in a flow (BullMQ's flows "
            "leave it out)")
    if de.get("keepLastIfActive") and has_children:
        raise errors.InvalidArgument(
            f"{where}: deduplication.keep_last_if_active cannot be used on a job with "
            "children (the duplicate it keeps would be added without them)")


def _rebuild_producer(connection: RedisConnection, prefix: str) -> FlowProducer:
    producer = FlowProducer(connection, prefix=prefix)
    producer._owns_connection = True     # unpickled: a connection of its own
    return producer
