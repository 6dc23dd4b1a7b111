"""Step result wrappers, and flattening ``get_children_values()`` into step results.

A step job returns a wrapper, not its bare result, so that the next job up the
tree learns every result before it (BullMQ hands a parent only its direct
children's values)::

    {"__version": "1", "__stepName": "charge", "__stepResult": {...},
     "__priorResults": {"validate": {...}}}                      # a step
    {"__version": "1", "__parallelResults": {"email": ..., "sms": ...},
     "__priorResults": {...}}                                    # a parallel group

``flatten_child_results`` turns ``{"bull:q:id": wrapper, ...}`` into
``{"validate": ..., "charge": ..., "email": ..., "sms": ...}``. Every merged value
is sanitized (the keys ``__proto__``, ``constructor`` and ``prototype`` are dropped
at any depth, as OriJS's ``Json.sanitize`` does, since a TypeScript service may read
the same values), and a step named after one of them is stored as
``_sanitized_{name}``.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

__all__ = ["WRAPPER_VERSION", "DANGEROUS_KEYS", "sanitize", "result_key",
           "step_result_wrapper", "parallel_result_wrapper", "is_step_result_wrapper",
           "is_parallel_result_wrapper", "flatten_child_results"]

WRAPPER_VERSION = "1"
DANGEROUS_KEYS = frozenset({"__proto__", "constructor", "prototype"})


def sanitize(value: Any) -> Any:
    """A copy of a JSON value without dangerous keys at any depth."""
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items() if k not in DANGEROUS_KEYS}
    if isinstance(value, list):
        return [sanitize(v) for v in value]
    return value


def result_key(step_name: str) -> str:
    """The key a step's result is stored under in flattened results."""
    return f"_sanitized_{step_name}" if step_name in DANGEROUS_KEYS else step_name


def _sanitized_results(results: Any) -> Dict[str, Any]:
    """A step-name -> result mapping, keys renamed (not dropped), values sanitized."""
    if not isinstance(results, dict):
        return {}
    return {result_key(str(k)): sanitize(v) for k, v in results.items()}


def step_result_wrapper(step_name: str, result: Any,
                        prior: Mapping[str, Any]) -> Dict[str, Any]:
    return {"__version": WRAPPER_VERSION, "__stepName": step_name, "__stepResult": result,
            "__priorResults": dict(prior)}


def parallel_result_wrapper(results: Mapping[str, Any],
                            prior: Mapping[str, Any]) -> Dict[str, Any]:
    return {"__version": WRAPPER_VERSION, "__parallelResults": dict(results),
            "__priorResults": dict(prior)}


def is_step_result_wrapper(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("__stepName"), str)
            and "__stepResult" in value)


def is_parallel_result_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("__parallelResults"), dict)


def flatten_child_results(child_values: Mapping[str, Any]) -> Dict[str, Any]:
    """``{"queue:jobId": wrapper}`` -> ``{step name: result}``; values that are not
    wrappers (a child added by other code) are ignored."""
    flat: Dict[str, Any] = {}
    for value in child_values.values():
        if is_step_result_wrapper(value):
            flat.update(_sanitized_results(value.get("__priorResults")))
            flat[result_key(value["__stepName"])] = sanitize(value["__stepResult"])
        elif is_parallel_result_wrapper(value):
            flat.update(_sanitized_results(value.get("__priorResults")))
            flat.update(_sanitized_results(value["__parallelResults"]))
    return flat
