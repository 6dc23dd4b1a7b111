"""The flow registry: ``{queue_prefix}:fr:{hash(flow id)}`` -> workflow name, 15 minutes.

Lets any process find which workflow a flow id belongs to in one GET (for status
lookups). Non-fatal both ways: a failed SET is logged, a missing key falls back
to asking each known workflow queue for a job with that id.

The hash is 64 bits of BLAKE2b in base 36. @orijs/bullmq uses ``Bun.hash`` (wyhash),
which Python does not have: a TypeScript service computes other keys, and each side
then finds the other's flows by the search fallback.
"""
from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, Iterable, Optional

log = logging.getLogger(__name__)

REGISTRY_TTL = 900          # seconds
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def flow_hash(flow_id: str) -> str:
    n = int.from_bytes(hashlib.blake2b(flow_id.encode(), digest_size=8).digest(), "big")
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if not n:
            return out


class FlowRegistry:
    def __init__(self, client: Any, queue_prefix: str) -> None:
        self.client = client
        self.queue_prefix = queue_prefix

    def key(self, flow_id: str) -> str:
        return f"{self.queue_prefix}:fr:{flow_hash(flow_id)}"

    def register(self, flow_id: str, workflow_name: str) -> None:
        try:
            self.client.set(self.key(flow_id), workflow_name, ex=REGISTRY_TTL)
        except Exception:  # noqa: BLE001 - non-fatal: lookups fall back to searching
            log.warning("could not register flow %s in the flow registry", flow_id,
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
