"""Done-callbacks of workflow handles run on the provider's callback thread, from
which ``stop()`` returns."""
from __future__ import annotations

import threading
from typing import Any, Dict

from orijs_sync.workflows import Workflow
from wf_helpers import GUARD, wait_until


def test_stop_from_a_handle_callback_returns(bullmq):
    wf = Workflow("StopFromCallback").step("a", lambda ctx: 1)
    provider = bullmq(wf)
    seen: Dict[str, Any] = {}

    def stop_here(handle: Any) -> None:
        seen["thread"] = threading.current_thread().name
        provider.stop()                      # no timeout: it must return by itself
        seen["stopped"] = True

    handle = provider.execute(wf, {})
    handle.add_done_callback(stop_here)
    handle.result(timeout=GUARD)
    wait_until(lambda: seen.get("stopped"), timeout=GUARD, what="stop() from the callback")
    assert not seen["thread"].startswith("orijs-worker")
