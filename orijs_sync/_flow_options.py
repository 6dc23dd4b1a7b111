"""FlowProducer.add's ``queues_options``: per-queue options of a flow's jobs (BullMQ's
``FlowOpts.queuesOptions``, keyed by queue name). Of BullMQ's queue options a flow's add
uses only ``defaultJobOptions`` (here ``default_job_options``): a node's own ``opts``
are laid over them, key by key. The others are refused, never ignored."""
from __future__ import annotations

from typing import Any, Dict, Mapping

from . import options as job_options
from .base import validate as check

QUEUE_OPTIONS = ("default_job_options",)

# BullMQ's queue options that a flow's add does not use, and why.
NOT_FOR_FLOWS = {
    "streams": "the events stream's length is a setting of the queue, not of a flow",
    "skip_metas_update": "a flow's add writes no queue metadata",
    "settings": "repeat settings: a flow's jobs do not repeat",
    "telemetry": "give jobs the 'telemetry' job option, or trace with orijs_sync.otel",
    "prefix": "a node's 'prefix' key sets its queue's prefix",
    "connection": "a flow's jobs are added on the FlowProducer's connection",
    "skip_version_check": "orijs_sync checks no server version",
    "skip_waiting_for_ready": "a flow's add waits for no connection",
    "blocking_connection": "a flow's add blocks on nothing",
}

# Job options that make no sense as a default for every job of a queue in a flow.
NOT_DEFAULTS = {
    "job_id": "each job needs its own id: set it in the node's opts",
    "parent": "only a flow's root may name a parent, in its own opts",
    "run_at": "it is one point in time: set it in a node's opts",
    "deduplication": "deduplication is per job: set it in the root's opts",
}


def queue_defaults(queues_options: Any) -> Dict[str, Dict[str, Any]]:
    """``{queue name: default job options}`` from checked ``queues_options`` (Queue.add
    keywords, checked now: a bad one writes nothing)."""
    given = check.mapping(queues_options, "queues_options")
    out: Dict[str, Dict[str, Any]] = {}
    for name, opts in given.items():
        check.name(name, "queues_options key")
        where = f"queues_options[{name!r}]"
        opts = check.mapping(opts, where, allow_none=False)
        _refuse(opts, NOT_FOR_FLOWS, where, "is not a flow's option")
        check.known_keys(opts, QUEUE_OPTIONS, where)
        arg = f"{where}.default_job_options"
        defaults = check.mapping(opts.get("default_job_options"), arg)
        _refuse(defaults, NOT_DEFAULTS, arg, "cannot be a default")
        job_options.encode(defaults, arg=arg)
        out[name] = defaults
    return out


def _refuse(given: Mapping[str, Any], refused: Mapping[str, str], where: str,
            what: str) -> None:
    for key, why in refused.items():
        if key in given:
            check.bad_value(f"{where}.{key}", given[key], f"{what} ({why})")
