"""A subscriber in its own OS process, started by test_events_cross_process.py.

    python subscriber_process.py <redis_url> <queue_prefix>

Subscribes to ``greet`` (returns who handled it) and ``chain`` (emits ``greet`` from
inside the handler and returns that result: meta and causation cross the process
boundary twice). Prints READY once both workers are ready, then runs until stdin
closes, and stops the provider.
"""
from __future__ import annotations

import os
import sys

from orijs_sync.events import BullMQEventProvider, EventMessage


def main() -> int:
    url, queue_prefix = sys.argv[1], sys.argv[2]
    provider = BullMQEventProvider(url, queue_prefix=queue_prefix)
    with provider:
        def greet(message: EventMessage) -> dict:
            return {"hello": message.payload["name"], "pid": os.getpid(),
                    "meta": message.meta, "causationId": message.causation_id}

        def chain(message: EventMessage) -> dict:
            inner = provider.emit("greet.remote", {"name": message.payload["name"]})
            return {"inner": inner.result(timeout=10), "pid": os.getpid()}

        provider.subscribe("greet.remote", greet)
        provider.subscribe("chain", chain)
        print("READY", flush=True)
        sys.stdin.read()   # until the parent closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
