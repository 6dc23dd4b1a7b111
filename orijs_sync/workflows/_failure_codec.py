"""A failed workflow's error as text, in @orijs/bullmq's formats (the value of the failure
record ``{queue_prefix}:workflow-failure:{hash}``, and of a step job's failedReason):

- a step failure: ``Step '<stepName>' failed: <original message>``;
- when rollbacks failed too: ``ORIJSError:`` then the JSON
  ``{"primary": {"name", "message", "stepName"?}, "rollbacks": [{"name", "message"}]}``
  (compact, as ``JSON.stringify`` writes it).

``decode_failure`` turns any such text (or BullMQ's ``child <key> failed``, or any
other message) back into our ``WorkflowFailedError``.
"""
from __future__ import annotations

import json
import re
from typing import Any, List, Mapping, Optional, Sequence

from ..base.util import dumps, well_formed
from .errors import RollbackFailedError, StepFailedError, WorkflowFailedError

__all__ = ["ORIJS_ERROR_PREFIX", "STEP_ERROR_NAME", "encode_failure", "decode_failure",
           "step_failure_message"]

ORIJS_ERROR_PREFIX = "ORIJSError:"
STEP_ERROR_NAME = "WorkflowStepError"      # the name OriJS gives a step's failure
_STEP_MESSAGE = re.compile(r"Step '([^']*)' failed: (.*)\Z", re.S)
_UNKNOWN_TYPE = "Error"                    # what the text does not tell


def step_failure_message(step_name: str, message: str) -> str:
    return f"Step '{step_name}' failed: {message}"


def encode_failure(step_name: Optional[str], error_type: str, message: str,
                   rollback_errors: Sequence[RollbackFailedError] = ()) -> str:
    """The text OriJS stores for this failure. ``step_name`` None: the workflow's
    completion failed (primary named after the error's type, without stepName)."""
    text = step_failure_message(step_name, message) if step_name else message
    if not rollback_errors:
        return well_formed(text)        # stored as it is: as Node's UTF-8 encoding does
    primary = {"name": STEP_ERROR_NAME if step_name else error_type, "message": text}
    if step_name:
        primary["stepName"] = step_name
    payload = {"primary": primary,
               "rollbacks": [{"name": e.error_type, "message": e.message}
                             for e in rollback_errors]}
    return ORIJS_ERROR_PREFIX + dumps(payload, "workflow failure")


def decode_failure(workflow_name: str, flow_id: str, text: str,
                   step_name: Optional[str] = None) -> WorkflowFailedError:
    """Our error for a failure text; ``step_name`` names the step when the text does not
    (a plain message read from that step's job)."""
    if text.startswith(ORIJS_ERROR_PREFIX):
        payload = _json_object(text[len(ORIJS_ERROR_PREFIX):])
        if payload is not None:
            primary = payload.get("primary")
            rollbacks = payload.get("rollbacks")
            return WorkflowFailedError(
                workflow_name, flow_id,
                _primary(primary if isinstance(primary, Mapping) else {}, step_name),
                _rollbacks(rollbacks if isinstance(rollbacks, list) else []))
    return WorkflowFailedError(workflow_name, flow_id, _plain(text, step_name))


def _json_object(text: str) -> Optional[Mapping[str, Any]]:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def _plain(text: str, step_name: Optional[str], error_type: str = _UNKNOWN_TYPE
           ) -> StepFailedError:
    """``Step 'x' failed: m`` -> step x, message m (the original type is not in the
    text); any other message is kept whole."""
    match = _STEP_MESSAGE.match(text)
    if match:
        return StepFailedError(match.group(1), _UNKNOWN_TYPE, match.group(2))
    return StepFailedError(step_name, error_type, text)


def _primary(primary: Mapping[str, Any], step_name: Optional[str]) -> StepFailedError:
    name = str(primary.get("name") or _UNKNOWN_TYPE)
    named = primary.get("stepName")
    return _plain(str(primary.get("message") or ""),
                  named if isinstance(named, str) else step_name,
                  _UNKNOWN_TYPE if name == STEP_ERROR_NAME else name)


def _rollbacks(items: List[Any]) -> List[RollbackFailedError]:
    return [RollbackFailedError(None, str(item.get("name") or _UNKNOWN_TYPE),
                                str(item.get("message") or ""))
            for item in items if isinstance(item, Mapping)]
