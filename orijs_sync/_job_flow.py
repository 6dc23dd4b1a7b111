"""Flow (parent/child) methods of Job: children values, dependencies, waiting for children.

A parent's companions, as BullMQ keeps them: ``:dependencies`` (set of pending
child keys), ``:processed`` (child key -> return value JSON), ``:failed`` (child
key -> failed reason, for children with ignore_dependency_on_failure or
continue_parent_on_failure) and ``:unsuccessful`` (zset of children that failed
with fail_parent_on_failure). Child keys are ``"{prefix}:{queue}:{id}"``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

from . import errors
from .base.util import loads, now_ms
from .store.connection import as_fields

DEPENDENCY_TYPES = ("processed", "unprocessed", "ignored", "failed")
PARENT_FLAGS = {"fpof": "fail_parent_on_failure", "cpof": "continue_parent_on_failure",
                "idof": "ignore_dependency_on_failure", "rdof": "remove_dependency_on_failure"}


def parent_link(parent: Any) -> Dict[str, str]:
    """BullMQ's ``opts.parent`` (``{"id", "queue": "{prefix}:{queue}"}``) from a Job or that dict."""
    queue = getattr(parent, "queue", None)
    keys = getattr(queue, "keys", None)
    if isinstance(getattr(parent, "id", None), str) and keys is not None:
        return {"id": parent.id, "queue": keys.queue_key}
    if isinstance(parent, Mapping) and isinstance(parent.get("id"), str) \
            and isinstance(parent.get("queue"), str) and parent["id"] and parent["queue"]:
        return {"id": parent["id"], "queue": parent["queue"]}
    raise errors.InvalidArgument("parent must be a Job or {'id': job id, 'queue': "
                                 f"'{{prefix}}:{{queue name}}'}}, not {parent!r}")


def attach_to_parent(parent: Any, opts: Dict[str, Any]) -> Dict[str, Any]:
    """For a job added as a child: sets ``opts["parent"]`` (encoded opts, BullMQ's form)
    and returns the job hash's ``parent`` field ``{id, queueKey, fpof...}`` (what
    ``AddCall(parent=...)`` takes). Refuses what BullMQ refuses for children."""
    link = parent_link(parent)
    flags = [flag for flag in PARENT_FLAGS if opts.get(flag)]
    if len(flags) > 1:
        raise errors.InvalidArgument("these options cannot be used together: "
                         + ", ".join(PARENT_FLAGS[f] for f in flags))
    if "de" in opts:
        raise errors.InvalidArgument("deduplication and a parent cannot be used together")
    opts["parent"] = dict(link)
    stored: Dict[str, Any] = {"id": link["id"], "queueKey": link["queue"]}
    stored.update({flag: True for flag in flags})
    return stored


def child_key(child: Any) -> str:
    """``"{prefix}:{queue}:{id}"`` of a Job, or the string itself."""
    if isinstance(child, str):
        if not child:
            raise errors.InvalidArgument("child key must not be empty")
        return child
    key = getattr(child, "key", None)
    if isinstance(key, str):
        return key
    raise errors.InvalidArgumentType(
        f"expected a child job or its key, not {type(child).__name__}")


class FlowJobMixin:
    """Mixed into ``orijs_sync.job.Job``."""

    # Provided by Job.
    id: str
    queue: Any
    token: Optional[str]
    parent_key: Optional[str]
    parent: Optional[Dict[str, Any]]
    _moved: bool
    _fetched_children: Optional[Dict[str, str]]

    def _flow_key(self, suffix: str) -> str:
        return f"{self.queue.keys.job(self.id)}:{suffix}"

    # -- reads -------------------------------------------------------------
    def get_children_values(self) -> Dict[str, Any]:
        """Return values of the completed children, keyed ``"{prefix}:{queue}:{id}"``."""
        raw = self.queue.client.hgetall(self._flow_key("processed"))
        return {key: loads(value) for key, value in raw.items()}

    def _children_values(self) -> Dict[str, Any]:
        """As ``get_children_values``, from the copy read in the same script call
        that took the job when its worker asked for one (no round trip; the children
        were all done then, and a job's children cannot change once it waits), else
        from Redis. For handlers that read the values once, as workflow steps do."""
        raw = self._fetched_children
        if raw is None:
            return self.get_children_values()
        return {key: loads(value) for key, value in raw.items()}

    def get_ignored_children_failures(self) -> Dict[str, str]:
        """Failed reasons of children whose failure was ignored (ignore_dependency_on_failure,
        continue_parent_on_failure), keyed like ``get_children_values``."""
        return dict(self.queue.client.hgetall(self._flow_key("failed")))

    def get_dependencies(self, count: Optional[int] = None) -> Dict[str, Any]:
        """The children by outcome: ``processed`` (key -> value), ``unprocessed`` (pending
        keys), ``ignored`` (key -> failed reason) and ``failed`` (keys of children that
        failed the parent). ``count`` caps each group (for large flows); the default
        reads everything."""
        client = self.queue.client
        pipe = client.pipeline(transaction=True)
        if count is None:
            pipe.hgetall(self._flow_key("processed"))
            pipe.smembers(self._flow_key("dependencies"))
            pipe.hgetall(self._flow_key("failed"))
            pipe.zrange(self._flow_key("unsuccessful"), 0, -1)
            processed, unprocessed, ignored, failed = pipe.execute()
        else:
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise errors.InvalidArgument(f"count must be an integer >= 1, not {count!r}")
            pipe.hscan(self._flow_key("processed"), 0, count=count)
            pipe.sscan(self._flow_key("dependencies"), 0, count=count)
            pipe.hscan(self._flow_key("failed"), 0, count=count)
            pipe.zrange(self._flow_key("unsuccessful"), 0, count - 1)
            (_, processed), (_, unprocessed), (_, ignored), failed = pipe.execute()
            processed = dict(list(as_fields(processed).items())[:count])
            unprocessed = list(unprocessed)[:count]
            ignored = dict(list(as_fields(ignored).items())[:count])
        return {"processed": {key: loads(value) for key, value in processed.items()},
                "unprocessed": sorted(unprocessed),
                "ignored": dict(ignored),
                "failed": list(failed)}

    def get_dependencies_count(self, *types: str) -> Dict[str, int]:
        """How many children are processed, unprocessed, ignored and failed (or only ``types``)."""
        wanted = types or DEPENDENCY_TYPES
        unknown = set(wanted) - set(DEPENDENCY_TYPES)
        if unknown:
            raise errors.InvalidArgument(
                f"unknown dependency type(s) {', '.join(sorted(unknown))}; "
                f"one of {', '.join(DEPENDENCY_TYPES)}")
        pipe = self.queue.client.pipeline(transaction=True)
        for kind in wanted:
            if kind == "processed":
                pipe.hlen(self._flow_key("processed"))
            elif kind == "unprocessed":
                pipe.scard(self._flow_key("dependencies"))
            elif kind == "ignored":
                pipe.hlen(self._flow_key("failed"))
            else:
                pipe.zcard(self._flow_key("unsuccessful"))
        return dict(zip(wanted, (int(n) for n in pipe.execute())))

    # -- writes --------------------------------------------------------------
    def remove_child_dependency(self) -> bool:
        """Detach this (unfinished) child from its parent: the parent stops waiting for it,
        and moves on if it was the last. False when there was no such dependency."""
        code = self.queue.scripts.run("removeChildDependency", [self.queue.keys.job(self.id)],
                                      [self.parent_key or "", now_ms()])
        if code == -1:
            raise errors.JobNotFound(f"job {self.id} of queue {self.queue.name} not found")
        if code == -5:
            raise errors.JobNotFound(f"parent {self.parent_key} of job {self.id} not found")
        if code == 0:
            self.parent_key = None
            self.parent = None
            return True
        return False

    def move_to_waiting_children(self, child: Union[str, Any, None] = None) -> bool:
        """From a handler: wait for the children this job has added itself.

        Returns True when the job moved to waiting-children (it has pending children,
        or ``child`` -- a Job or its key -- is still pending): the worker then leaves it
        there, and the handler runs again once the children are done. Returns False
        when nothing is pending: the job stays active and the handler goes on.
        """
        if not self.token:
            raise errors.InvalidStateError(
                "move_to_waiting_children() is for a job being processed by a worker")
        k = self.queue.keys
        code = self.queue.scripts.run(
            "moveToWaitingChildren",
            [k.job(self.id), k.active, k.key("waiting-children"), k.stalled, k.events],
            [self.id, self.token, "" if child is None else child_key(child), now_ms()])
        if code == 0:
            self._moved = True
            return True
        if code == 1:
            return False
        if code == -9:
            raise errors.InvalidStateError(
                f"job {self.id} has a child that failed with fail_parent_on_failure")
        if code == -1:
            raise errors.JobNotFound(f"job {self.id} of queue {self.queue.name} not found")
        raise errors.LockLost(f"job {self.id} could not move to waiting-children: "
                              f"{'it is no longer active' if code == -3 else 'its lock is lost'}")


def children_keys(dependencies: Dict[str, Any]) -> List[str]:
    """Every child key of a ``FlowJobMixin.get_dependencies`` reply."""
    return (list(dependencies["processed"]) + list(dependencies["unprocessed"])
            + list(dependencies["failed"]) + list(dependencies["ignored"]))
