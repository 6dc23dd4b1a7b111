"""Job options: Python keywords in, BullMQ v5's stored ``opts`` JSON out (and back).

Durations are seconds in Python and milliseconds in Redis; ``run_at`` (a point in
time) becomes the ``delay`` from the job's ``timestamp``. A few options have
short stored names in BullMQ (``de``, ``fpof``, ``cpof``, ``idof``, ``rdof``, ``kl``).
Every check happens before anything is written.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Optional, cast

from .base import validate as check
from .base.util import now_ms, to_ms

MAX_PRIORITY = check.MAX_PRIORITY

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
    "remove_on_complete": "removeOnComplete",
    "remove_on_fail": "removeOnFail",
}
BACKOFF_TYPES = {"fixed", "exponential"}
BACKOFF_KEYS = {"type", "delay", "jitter"}
KEEP_KEYS = {"age", "count", "limit"}
DEDUPLICATION_KEYS = {"id", "ttl", "extend", "replace", "keep_last_if_active"}
# Python key -> BullMQ's name in the stored ``de`` object
_DEDUPLICATION_FLAGS = {"extend": "extend", "replace": "replace",
                        "keep_last_if_active": "keepLastIfActive"}

KNOWN = {"delay", "run_at", "priority", "lifo", "attempts", "backoff", "job_id", "deduplication", "debounce",
         "remove_on_complete", "remove_on_fail", "timestamp", "fail_parent_on_failure",
         "continue_parent_on_failure", "ignore_dependency_on_failure",
         "remove_dependency_on_failure", "keep_logs", "stack_trace_limit", "parent",
         "telemetry", "size_limit"}
TELEMETRY_KEYS = {"metadata", "omit_context"}
# BullMQ options refused here, with what to use instead.
REFUSED = {
    "repeat": "is BullMQ's legacy repeatable-job option, deprecated in BullMQ 5 for job "
              "schedulers: use queue.upsert_job_scheduler(scheduler_id, every=... or "
              "pattern=..., template={'name', 'data', 'opts'}), which Node and Python "
              "workers both run (repeatable jobs a Node service added are listed by "
              "get_repeatable_jobs() and removed by remove_repeatable())",
}


def refuse_unsupported(options: Mapping[str, Any], arg: str = "job options") -> None:
    """Refuse the BullMQ options this library does not take, saying what to use instead."""
    for key, why in REFUSED.items():
        if key in options:
            check.bad_value(f"{arg}.{key}", options[key], why)


def check_size(opts: Mapping[str, Any], data_text: str, what: str) -> None:
    """BullMQ's ``sizeLimit``: refuse data whose JSON text is longer, in UTF-8 bytes."""
    limit = opts.get("sizeLimit")
    if limit:
        size = len(data_text.encode("utf-8", check.DECODING_ERRORS))
        if size > limit:
            check.bad_value("data", data_text, f"of {what} is {size} bytes as JSON, over its "
                                               f"size_limit of {limit} bytes")


def validate_job_id(job_id: Any, name: str = "job_id") -> Optional[str]:
    """BullMQ's rules for a custom id: a non-empty string, no ``:``, not integer-like.
    ``name`` is the option that becomes the id (for the error message)."""
    if job_id is None:
        return None
    check.string(job_id, name)
    if ":" in job_id:
        check.bad_value(name, job_id, "must not contain ':' (it becomes a BullMQ job id, "
                                      "where ':' is a separator)")
    if job_id.lstrip("-").isdigit():
        check.bad_value(name, job_id, "must not be an integer: BullMQ keeps integer job ids "
                                      "for the ids it generates")
    return cast("Optional[str]", job_id)


def _keep(value: Any, name: str) -> Any:
    """remove_on_complete / remove_on_fail: bool, a count to keep, or {"age": s, "count": n}."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return check.integer(value, name, minimum=0)
    if not isinstance(value, Mapping):
        check.bad_type(name, value, "a bool, an int or a dict with age/count")
    check.known_keys(value, KEEP_KEYS, name)
    if not value:
        check.bad_value(name, value, "takes {'age': seconds, 'count': n}")
    out: Dict[str, Any] = {}
    if "age" in value:
        out["age"] = check.number(value["age"], f"{name}.age", minimum=0,
                                  maximum=check.MAX_SECONDS)
    for key in ("count", "limit"):
        if key in value:
            out[key] = check.integer(value[key], f"{name}.{key}", minimum=0)
    return out


def keep_jobs(value: Any) -> Dict[str, Any]:
    """The ``keepJobs`` a worker passes when finishing, from a stored removeOn* value."""
    if value is True:
        return {"count": 0}
    if value is False or value is None:
        return {"count": -1}
    if _is_int(value):           # 3.0 too: a JSON number another program wrote so
        return {"count": int(value)}
    return dict(value)


def _backoff(value: Any, name: str = "backoff") -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"type": "fixed", "delay": to_ms(value, name)}
    if not isinstance(value, Mapping):
        check.bad_type(name, value, "seconds or {'type': 'fixed'|'exponential'|<custom>, "
                                    "'delay': seconds}")
    check.known_keys(value, BACKOFF_KEYS, name)
    if "type" not in value:
        check.bad_value(name, dict(value), "needs a 'type' ('fixed', 'exponential' or custom)")
    kind = check.string(value["type"], f"{name}.type")
    out: Dict[str, Any] = {"type": kind}
    if value.get("delay") is not None:
        out["delay"] = to_ms(value["delay"], f"{name}.delay")
    elif kind in BACKOFF_TYPES:
        check.bad_value(name, dict(value), f"of type {kind!r} needs a 'delay' in seconds")
    if value.get("jitter") is not None:
        out["jitter"] = check.number(value["jitter"], f"{name}.jitter", minimum=0, maximum=1)
    return out


def _priority(value: Any) -> int:
    return check.integer(value, "priority", minimum=0, maximum=MAX_PRIORITY)


def _attempts(value: Any) -> int:
    return check.integer(value, "attempts", minimum=1)


def _deduplication(value: Any, name: str = "deduplication") -> Dict[str, Any]:
    """BullMQ's ``de``: ``ttl`` in seconds, ``extend`` (a duplicate add resets the
    ttl), ``replace`` (a duplicate replaces the job while it is delayed) and
    ``keep_last_if_active`` (a duplicate of an active job runs once that one ends)."""
    if not isinstance(value, Mapping):
        check.bad_type(name, value, "a dict {'id': str, 'ttl': seconds, ...}")
    check.known_keys(value, DEDUPLICATION_KEYS, name)
    out: Dict[str, Any] = {"id": check.string(value.get("id"), f"{name}.id")}
    if value.get("ttl") is not None:
        out["ttl"] = to_ms(value["ttl"], f"{name}.ttl")
    for flag, stored in _DEDUPLICATION_FLAGS.items():
        if value.get(flag) is not None:
            out[stored] = check.boolean(value[flag], f"{name}.{flag}")
    if out.get("extend") and not out.get("ttl"):
        check.bad_value(f"{name}.extend", True, "resets the ttl: it needs a ttl > 0")
    if out.get("keepLastIfActive") and out.get("ttl"):
        check.bad_value(f"{name}.ttl", value["ttl"], "is not used with keep_last_if_active "
                        "(the id is held until its job finishes, as in BullMQ)")
    return out


def _telemetry(value: Any) -> Dict[str, Any]:
    """BullMQ's telemetry option: ``metadata`` (the trace context, serialized as the
    propagator's carrier in JSON) stored as ``tm``, ``omit_context`` as ``omc``."""
    value = check.mapping(value, "telemetry", allow_none=False)
    check.known_keys(value, TELEMETRY_KEYS, "telemetry")
    out: Dict[str, Any] = {}
    if value.get("metadata") is not None:
        out["tm"] = check.string(value["metadata"], "telemetry.metadata")
    if value.get("omit_context") is not None:
        out["omc"] = check.boolean(value["omit_context"], "telemetry.omit_context")
    return out


def _flag(value: Any, name: str) -> bool:
    return check.boolean(value, name)


def _encode_one(name: str, value: Any, opts: Dict[str, Any]) -> None:
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
    elif name in ("deduplication", "debounce"):      # debounce: BullMQ's older name
        opts["de"] = _deduplication(value, name)
    elif name in _CAMEL:
        # Stored even when False: a job's own setting wins over the worker's (BullMQ).
        opts[_CAMEL[name]] = _keep(value, name)
    elif name == "timestamp":
        opts["timestamp"] = int(check.number(value, "timestamp", minimum=0,
                                             maximum=check.MAX_INT))
    elif name == "keep_logs":
        opts["kl"] = check.integer(value, "keep_logs", minimum=0)
    elif name == "size_limit":
        opts["sizeLimit"] = check.integer(value, "size_limit", minimum=1)
    elif name == "stack_trace_limit":
        opts["stackTraceLimit"] = check.integer(value, "stack_trace_limit", minimum=0)
    elif name == "parent":
        opts["parent"] = value
    elif name == "telemetry":
        opts.update(_telemetry(value))
    elif _flag(value, name):       # lifo and the parent flags
        opts[_SHORT.get(name, name)] = True


def encode(options: Mapping[str, Any], *, arg: str = "job options") -> Dict[str, Any]:
    """Validate Python job options and return BullMQ's stored opts dict. ``arg`` names
    the options in error messages (``default_job_options``, ``jobs[2].opts``...)."""
    options = check.mapping(options, arg)
    refuse_unsupported(options, arg)
    check.known_keys(options, KNOWN, arg)
    if options.get("deduplication") is not None and options.get("debounce") is not None:
        check.bad_value(f"{arg}.debounce", options["debounce"],
                        "is the older name of deduplication: give one of them")
    opts: Dict[str, Any] = {}
    for name, value in options.items():
        if value is not None and name != "run_at":
            _encode_one(name, value, opts)
    if options.get("run_at") is not None:
        _run_at(options, opts, arg)
    opts.setdefault("attempts", 1)
    return opts


def _run_at(options: Mapping[str, Any], opts: Dict[str, Any], arg: str) -> None:
    """``run_at`` as BullMQ's ``delay`` from the job's ``timestamp`` (stored, so the
    job's delayed score is ``run_at``'s milliseconds); a past one is no delay."""
    if options.get("delay") is not None:
        check.bad_value(f"{arg}.run_at", options["run_at"], "is given with delay: give one")
    run_ms = check.moment_ms(options["run_at"], "run_at")
    opts.setdefault("timestamp", now_ms())
    opts.pop("delay", None)
    if run_ms > opts["timestamp"]:
        opts["delay"] = run_ms - opts["timestamp"]


def encode_defaults(options: Mapping[str, Any], arg: str) -> Dict[str, Any]:
    """``encode`` for default options (every job's): ``run_at``, one point in time, is
    refused there."""
    if check.mapping(options, arg).get("run_at") is not None:
        check.bad_value(f"{arg}.run_at", options["run_at"], "is one point in time, not a "
                                                            "default for every job: use delay")
    return encode(options, arg=arg)


_WHEN = ("delay", "run_at")


def merge(defaults: Optional[Mapping[str, Any]], options: Mapping[str, Any]) -> Dict[str, Any]:
    """Per-call options over defaults; ``None`` in the call means 'not given'. A call's
    ``delay`` or ``run_at`` replaces both of the defaults'."""
    given = {k: v for k, v in options.items() if v is not None}
    merged = {k: v for k, v in (defaults or {}).items()
              if not (k in _WHEN and any(w in given for w in _WHEN))}
    merged.update(given)
    return merged


def _is_int(value: Any) -> bool:
    """An integer JSON number (3.0 too) that a double keeps exactly: a larger one (a
    corrupted field) reaches a script as a number Redis refuses as an integer."""
    if isinstance(value, float):
        return value.is_integer() and abs(value) <= check.MAX_INT
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= check.MAX_INT


def _is_number(value: Any) -> bool:
    """A finite JSON number within the same range (a delay in ms, a keep age)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and abs(value) <= check.MAX_INT       # nan and inf fail the bound


def _stored_keep(value: Any) -> bool:
    if isinstance(value, bool) or _is_int(value):
        return True
    return isinstance(value, dict) and all(
        (_is_int if key in ("count", "limit") else _is_number)(v) for key, v in value.items())


def _stored_backoff(value: Any) -> bool:
    if _is_number(value):
        return True
    return isinstance(value, dict) and isinstance(value.get("type"), str) and all(
        _is_number(value[k]) for k in ("delay", "jitter") if value.get(k) is not None)


# What a worker reads from a stored opts object: field -> (check, what it must be).
_INT = f"an integer within ±{check.MAX_INT}"
_STORED = {
    "attempts": (_is_int, _INT), "delay": (_is_number, f"a number within ±{check.MAX_INT}"),
    "priority": (_is_int, _INT), "stackTraceLimit": (_is_int, _INT),
    "kl": (_is_int, _INT), "lifo": (lambda v: isinstance(v, bool), "a boolean"),
    "backoff": (_stored_backoff, "a number or {type, delay}"),
    "removeOnComplete": (_stored_keep, "a bool, an integer or {age, count}"),
    "removeOnFail": (_stored_keep, "a bool, an integer or {age, count}"),
}


def stored_problem(opts: Any) -> Optional[str]:
    """Why a job's stored ``opts`` (decoded JSON, written by anyone) cannot be used by a
    worker, naming the field; None when it can."""
    if not isinstance(opts, dict):
        return f"opts is not a JSON object: {opts!r:.80}"
    for key, (ok, what) in _STORED.items():
        if opts.get(key) is not None and not ok(opts[key]):
            return f"opts.{key} is not {what}: {opts[key]!r:.80}"
    return None
