"""The side keys @orijs/bullmq keeps beside each flow, byte for byte as it does:

- the flow registry ``{queue_prefix}:fr:{hash(flow id)}`` -> workflow name, 15 minutes:
  lets any process (of either language) find which workflow a flow id belongs to in
  one GET. Non-fatal both ways: a failed SET is logged, a missing key falls back to
  asking each known workflow queue for a job with that id;
- the failure record ``{queue_prefix}:workflow-failure:{hash(flow id)}`` -> the failed
  workflow's error message (see ``._failure_codec``), 15 minutes: written by the
  process whose step failed for the last time, read by the one waiting for the flow.

The hash is ``Bun.hash(flowId).toString(36)``: wyhash, seed 0, in base 36.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional, Tuple, cast

from ._wyhash import bun_hash

log = logging.getLogger(__name__)

REGISTRY_TTL = 900          # seconds, for both keys


def flow_hash(flow_id: str) -> str:
    return bun_hash(flow_id)


class FlowRegistry:
    def __init__(self, client: Any, queue_prefix: str,
                 logger: Optional[logging.Logger] = None) -> None:
        self.client = client
        self.log = logger or log
        self.queue_prefix = queue_prefix

    def key(self, flow_id: str) -> str:
        return f"{self.queue_prefix}:fr:{flow_hash(flow_id)}"

    def failure_key(self, flow_id: str) -> str:
        return f"{self.queue_prefix}:workflow-failure:{flow_hash(flow_id)}"

    def record_failure(self, flow_id: str, text: str) -> None:
        """Store a failed flow's error message (logged, not raised, when Redis refuses:
        the waiting side then falls back to the failedReason)."""
        try:
            self.client.set(self.failure_key(flow_id), text, ex=REGISTRY_TTL)
        except Exception:  # noqa: BLE001 - non-fatal
            self.log.warning("could not store the failure record of flow %s", flow_id,
                        exc_info=True)

    def read_failure(self, flow_id: str) -> Optional[str]:
        """The failure record of a flow, or None (missing, or Redis unreachable)."""
        try:
            text = self.client.get(self.failure_key(flow_id))
        except Exception:  # noqa: BLE001 - non-fatal: the caller falls back
            self.log.warning("could not read the failure record of flow %s", flow_id,
                        exc_info=True)
            return None
        if isinstance(text, bytes):
            return text.decode("utf-8", "replace")
        return cast("Optional[str]", text)

    def register_command(self, flow_id: str, workflow_name: str) -> Tuple[Any, ...]:
        """The ``SET`` that registers a flow, to send with the flow's add."""
        return ("SET", self.key(flow_id), workflow_name, "EX", REGISTRY_TTL)

    def register(self, flow_id: str, workflow_name: str) -> None:
        try:
            self.client.execute_command(*self.register_command(flow_id, workflow_name))
        except Exception:  # noqa: BLE001 - non-fatal: lookups fall back to searching
            self.log.warning("could not register flow %s in the flow registry", flow_id,
                        exc_info=True)

    def lookup(self, flow_id: str, candidates: Iterable[str],
               has_job: Callable[[str, str], bool]) -> Optional[str]:
        """The registry's answer, else the first candidate workflow whose queue holds
        a job with this id (``has_job(workflow_name, flow_id)``)."""
        try:
            name = self.client.get(self.key(flow_id))
        except Exception:  # noqa: BLE001
            name = None
        if name:
            return str(name)
        for candidate in candidates:
            if has_job(candidate, flow_id):
                return candidate
        return None
