"""A cluster connection used in a child process (``os.fork()``, multiprocessing
``fork`` and ``spawn``): the child gets its own connections; the parent carries on."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy"))

import fork_cases  # noqa: E402
from forking import MODES, run_in_child  # noqa: E402
from orijs_sync import Queue  # noqa: E402


@pytest.mark.parametrize("mode", MODES)
def test_cluster_queue_and_worker_in_a_child(mode, cluster_conn, spread_names):
    name = spread_names(1)[0]
    queue = Queue(name, cluster_conn)
    before = queue.add("from-parent", {})
    out = run_in_child(mode, fork_cases.queue_child, queue)
    assert out["state"] == "waiting"
    assert queue.get_job(out["id"]).data["pid"] != os.getpid()
    after = queue.add("from-parent-again", {})        # the parent's connections still work
    assert {before.id, after.id, out["id"]} <= set(queue.client.lrange(queue.keys.wait, 0, -1))
    own = run_in_child(mode, fork_cases.worker_child, None, queue, name.replace("}q", "}own"))
    assert own["own"]["name"] == "own" and own["own"]["pid"] != os.getpid()
    queue.close()


@pytest.fixture(scope="module")
def sentinel_set():
    from orijs_sync.testing import SentinelServers
    with SentinelServers(replicas=1, sentinels=3) as servers:
        yield servers


@pytest.mark.parametrize("mode", MODES)
def test_sentinel_queue_and_worker_in_a_child(mode, sentinel_set, namespace):
    name = f"{{{namespace}}}q"
    queue = Queue(name, sentinel_set.connection)
    queue.add("from-parent", {})
    out = run_in_child(mode, fork_cases.queue_child, queue)
    assert out["state"] == "waiting"
    assert queue.get_job(out["id"]).data["pid"] != os.getpid()
    own = run_in_child(mode, fork_cases.worker_child, None, queue, f"{{{namespace}}}own")
    assert own["own"]["name"] == "own" and own["own"]["pid"] != os.getpid()
    queue.add("from-parent-again", {})               # the parent's connections still work
    queue.close()
