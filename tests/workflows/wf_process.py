"""A process that runs workflow steps, started by test_wf_processes.py.

    python wf_process.py <redis_url> <queue_prefix> <concurrency>

Registers the workflows of wf_definitions.py, prints READY once its workers run,
then runs until stdin closes (or it is killed), and stops the provider.
"""
from __future__ import annotations

import logging
import sys

from orijs_sync.workflows import BullMQWorkflowProvider
from wf_definitions import make_workflows


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    url, queue_prefix, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    provider = BullMQWorkflowProvider(url, queue_prefix=queue_prefix, stall_interval=5,
                                      concurrency=concurrency)
    for workflow in make_workflows(url, queue_prefix).values():
        provider.register(workflow)
    with provider:
        print("READY", flush=True)
        sys.stdin.read()          # until the test closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
