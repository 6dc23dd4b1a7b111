"""A GroupWorker built before ``fork()`` and started in child processes: each child's
copy is a worker of its own (its id, and so its runs' lock tokens, renewed), so no
child can finish (or heartbeat) a run of another's."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from forking import run_in_child

from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.testing import wait_until

FORKS = ("os.fork", "fork")


def token_of_run(job: GroupJob) -> Any:
    return job.token


def run_one_job(worker: GroupWorker) -> Dict[str, Any]:
    """Start the parent's (never started) worker here; the token of the run it took."""
    results: List[Any] = []
    worker.on("completed", lambda job, result: results.append(result))
    worker.start()
    try:
        wait_until(lambda: bool(results), 20, "a job run in the child")
    finally:
        worker.close(timeout=10)
    return {"id": worker.id, "token": results[0]}


@pytest.mark.parametrize("mode", FORKS)
def test_children_of_one_worker_hold_their_runs_under_tokens_of_their_own(
        mode: str, redis_url: str, namespace: str) -> None:
    gq = GroupQueue(f"gq-{namespace}", connection=redis_url)
    worker = GroupWorker(gq, token_of_run, concurrency=1)
    try:
        gq.add(group_id="a", data={})
        first = run_in_child(mode, run_one_job, worker)
        gq.add(group_id="b", data={})
        second = run_in_child(mode, run_one_job, worker)
        assert first["token"] != second["token"]
        assert len({worker.id, first["id"], second["id"]}) == 3
        assert not first["token"].startswith(worker.id)
        assert not second["token"].startswith(worker.id)
    finally:
        worker.close()
        gq.close()
