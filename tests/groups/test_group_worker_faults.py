"""GroupWorker through faults, on real Redis: a run of a job recovered and taken again
by the same worker (each run's own token), outcome writes through a Redis outage,
and writes given up. Waits are generous guards; nothing asserts on timing."""
from __future__ import annotations

import logging
import threading
from typing import Any, Dict, List

from orijs_sync._util import now_ms
from orijs_sync.groups import GroupJob, GroupWorker
from orijs_sync.testing import wait_until


class Runs:
    """A handler whose runs each wait for their own release; records every run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: List[str] = []             # job ids, one per run, in order
        self.release: Dict[int, threading.Event] = {}

    def __call__(self, job: GroupJob) -> Any:
        with self.lock:
            self.started.append(job.id)
            run = len(self.started)
            gate = self.release.setdefault(run, threading.Event())
        gate.wait(30)
        return {"run": run}

    def let_go(self, run: int) -> None:
        with self.lock:
            self.release.setdefault(run, threading.Event()).set()

    def runs(self) -> List[str]:
        with self.lock:
            return list(self.started)


def test_late_finish_of_an_earlier_run_on_the_same_worker_is_refused(gq, caplog):
    """Run 1 of J is recovered (as if its deadline had passed) and the same worker takes
    J again (run 2): run 1's late completion must be refused (each run has its own
    token), not complete J under run 2 and hand out the group's next job."""
    caplog.set_level(logging.WARNING, logger="orijs_sync.groups")
    gq.add(group_id="g", data={}, job_id="J")
    gq.add(group_id="g", data={}, job_id="K")
    handler = Runs()
    completed: List[str] = []
    with GroupWorker(gq, handler, concurrency=2, stalled_interval=60) as w:
        w.on("completed", lambda job, result: completed.append(job.id))
        wait_until(lambda: handler.runs() == ["J"], 30, "run 1 of J")
        far = now_ms() + 10 ** 9           # every deadline has passed by then
        assert gq.run_script("stalled", far, 0, 5, 100) == ["J", "g", "recovered"]
        wait_until(lambda: handler.runs() == ["J", "J"], 30, "run 2 of J")
        handler.let_go(1)                  # run 1 returns late
        wait_until(lambda: completed or "stopped being ours" in caplog.text, 30,
                   "run 1's completion written or refused")
        assert completed == [], "run 1's late completion was accepted"
        assert gq.get_job("J").status == "active" and gq.get_job("K").status == "waiting"
        assert handler.runs() == ["J", "J"]
        handler.let_go(2)
        handler.let_go(3)
        assert gq.wait_for_empty(30)
    assert completed == ["J", "K"] and handler.runs() == ["J", "J", "K"]
