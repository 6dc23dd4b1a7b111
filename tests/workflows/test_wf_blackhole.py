"""execute() in a network black hole (Redis holds traffic: connections stay open,
nothing answers) returns its handle at once; the flow runs once Redis answers."""
from __future__ import annotations

import time

from fault_proxy import FaultProxy
from wf_helpers import GUARD

from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

MARGIN = 1.5     # seconds an "at once" call may take (a correctness bound)


def test_execute_returns_its_handle_at_once_in_a_black_hole(redis_url, namespace):
    wf = Workflow("HeldFlow").step("a", lambda ctx: ctx.data["n"])
    with FaultProxy.before(redis_url) as hole:
        provider = BullMQWorkflowProvider(hole.url, queue_prefix=f"{namespace}.workflow",
                                          default_step_options={"attempts": 1})
        provider.register(wf)
        provider.start()
        try:
            provider.execute(wf, {"n": 0}).result(timeout=GUARD)
            hole.hold()
            started = time.monotonic()
            handle = provider.execute(wf, {"n": 1}, timeout=GUARD)
            assert time.monotonic() - started < MARGIN
            assert not handle.done()
            hole.release()
            handle.result(timeout=GUARD)      # added once Redis answered, then run
            assert handle.status() == "completed"
        finally:
            hole.release()
            provider.stop(timeout=20)
