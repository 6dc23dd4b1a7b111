"""Job options: Python keywords in, BullMQ v5's stored ``opts`` JSON out (and back).

Durations are seconds in Python and milliseconds in Redis. A few options have
short stored names in BullMQ (``de``, ``fpof``, ``cpof``, ``idof``, ``rdof``, ``kl``).
Every check happens before anything is written.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ._util import to_ms

MAX_PRIORITY = 2 ** 21

# Python keyword -> stored name
_SHORT = {
    "deduplication": "de",
    "fail_parent_on_failure": "fpof",
    "continue_parent_on_failure": "cpof",
    "ignore_dependency_on_failure": "idof",
    "remove_dependency_on_failure": "rdof",
    "keep_logs": "kl",
}
_CAMEL = {
    "job_id": "jobId",
    "remove_on_complete": "removeOnComplete",
    "remove_on_fail": "removeOnFail",
    "stack_trace_limit": "stackTraceLimit",
    "size_limit": "sizeLimit",
}
BACKOFF_TYPES = {"fixed", "exponential"}

KNOWN = {"delay", "priority", "lifo", "attempts", "backoff", "job_id", "deduplication",
         "remove_on_complete", "remove_on_fail", "timestamp", "fail_parent_on_failure",
         "continue_parent_on_failure", "ignore_dependency_on_failure",
         "remove_dependency_on_failure", "keep_logs", "stack_trace_limit", "parent"}


def validate_job_id(job_id: Any, name: str = "job_id") -> Optional[str]:
    """BullMQ's rules for a custom id: a non-empty string, no ``:``, not integer-like.
    ``name`` is the option that becomes the id (for the error message)."""
    if job_id is None:
        return None
    if not isinstance(job_id, str):
        raise ValueError(f"{name} must be a string, not {type(job_id).__name__}")
    if job_id == "":
        raise ValueError(f"{name} must not be empty")
    if ":" in job_id:
        raise ValueError(f"{name} {job_id!r} must not contain ':' (it becomes a BullMQ job id, "
                         "where ':' is a separator)")
    if job_id.lstrip("-").isdigit():
        raise ValueError(f"{name} {job_id!r} must not be an integer: BullMQ keeps integer "
                         "job ids for the ids it generates")
    return job_id


def _keep(value: Any, name: str) -> Any:
    """remove_on_complete / remove_on_fail: bool, a count to keep, or {"age": s, "count": n}."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"age", "count", "limit"}
        if unknown or not value:
            raise ValueError(f"{name} takes {{'age': seconds, 'count': n}}, got {dict(value)!r}")
        out: Dict[str, Any] = {}
        if "age" in value:
            age = value["age"]
            if isinstance(age, bool) or not isinstance(age, (int, float)) or age < 0:
                raise ValueError(f"{name}['age'] must be a number of seconds >= 0, got {age!r}")
            out["age"] = age
        for key in ("count", "limit"):
            if key in value:
                n = value[key]
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise ValueError(f"{name}[{key!r}] must be an integer >= 0, got {n!r}")
                out[key] = n
        return out
    raise ValueError(f"{name} must be a bool, an int or a dict with age/count, not {value!r}")


def keep_jobs(value: Any) -> Dict[str, Any]:
    """The ``keepJobs`` a worker passes when finishing, from a stored removeOn* value."""
    if value is True:
        return {"count": 0}
    if value is False or value is None:
        return {"count": -1}
    if isinstance(value, int):
        return {"count": value}
    return dict(value)


def _backoff(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"backoff must be >= 0 seconds, got {value}")
        return {"type": "fixed", "delay": int(round(value * 1000))}
    if not isinstance(value, Mapping) or "type" not in value:
        raise ValueError(f"backoff must be {{'type': 'fixed'|'exponential'|<custom>, 'delay': s}}, "
                         f"got {value!r}")
    kind = value["type"]
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"backoff type must be a non-empty string, got {kind!r}")
    out: Dict[str, Any] = {"type": kind}
    if "delay" in value:
        out["delay"] = to_ms(value["delay"], "backoff delay")
    elif kind in BACKOFF_TYPES:
        raise ValueError(f"backoff of type {kind!r} needs a 'delay' in seconds")
    for extra in ("jitter",):
        if extra in value:
            out[extra] = value[extra]
    return out


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"priority must be an integer, got {value!r}")
    if not 0 <= value <= MAX_PRIORITY:
        raise ValueError(f"priority must be between 0 and {MAX_PRIORITY}, got {value}")
    return value


def _attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"attempts must be an integer >= 1, got {value!r}")
    return value


def _deduplication(value: Any) -> Dict[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("id"), str) or not value["id"]:
        raise ValueError(f"deduplication must be {{'id': str, 'ttl': seconds}}, got {value!r}")
    out: Dict[str, Any] = {"id": value["id"]}
    if value.get("ttl") is not None:
        out["ttl"] = to_ms(value["ttl"], "deduplication ttl")
    return out


def encode(options: Mapping[str, Any], *, known_backoffs: Optional[set] = None) -> Dict[str, Any]:
    """Validate Python job options and return BullMQ's stored opts dict."""
    unknown = set(options) - KNOWN
    if unknown:
        raise ValueError(f"unknown job option(s): {', '.join(sorted(unknown))}")
    opts: Dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        if name == "delay":
            ms = to_ms(value, "delay")
            if ms:
                opts["delay"] = ms
        elif name == "priority":
            if _priority(value):
                opts["priority"] = value
        elif name == "attempts":
            opts["attempts"] = _attempts(value)
        elif name == "backoff":
            opts["backoff"] = _backoff(value)
        elif name == "job_id":
            opts["jobId"] = validate_job_id(value)
        elif name == "deduplication":
            opts["de"] = _deduplication(value)
        elif name in ("remove_on_complete", "remove_on_fail"):
            # Stored even when False: a job's own setting wins over the worker's (BullMQ).
            opts[_CAMEL[name]] = _keep(value, name)
        elif name == "timestamp":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"timestamp must be a number of ms since the epoch, got {value!r}")
            opts["timestamp"] = int(value)
        elif name == "lifo":
            if value:
                opts["lifo"] = True
        elif name in _SHORT:
            if name == "keep_logs":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"keep_logs must be an integer >= 0, got {value!r}")
                opts["kl"] = value
            elif value:
                opts[_SHORT[name]] = True
        elif name == "stack_trace_limit":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"stack_trace_limit must be an integer >= 0, got {value!r}")
            opts["stackTraceLimit"] = value
        elif name == "parent":
            opts["parent"] = value
    opts.setdefault("attempts", 1)
    return opts


def merge(defaults: Optional[Mapping[str, Any]], options: Mapping[str, Any]) -> Dict[str, Any]:
    """Per-call options over defaults; ``None`` in the call means 'not given'."""
    merged = dict(defaults or {})
    merged.update({k: v for k, v in options.items() if v is not None})
    return merged
