"""Workers list and metrics shared with a real Node BullMQ (tests/interop/node/monitoring.js):
each side lists the other's workers and reads the other's metrics."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from orijs_sync import Job, Queue, Worker
from orijs_sync.testing import wait_until

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "node" / "monitoring.js"


def _node() -> str:
    node = shutil.which("node")
    if not node:
        pytest.fail("these tests need Node.js on PATH", pytrace=False)
    return node


def _reply(command: str, out: str, err: str) -> Any:
    lines = out.strip().splitlines()
    assert lines, f"monitoring.js {command} printed nothing; stderr:\n{err}"
    reply = json.loads(lines[-1])
    assert reply["ok"], f"monitoring.js {command} failed: {reply.get('error')}\n{err}"
    return reply["result"]


def monitoring(command: str, **args: Any) -> Any:
    proc = subprocess.run([_node(), str(SCRIPT), command, json.dumps(args)], cwd=str(HERE),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return _reply(command, proc.stdout, proc.stderr)


@pytest.fixture
def node_worker(node_setup, redis_url, tmp_path) -> Iterator[Any]:
    """Starts Node workers (``start(queue, **opts)``) that run until the test ends."""
    stop = tmp_path / "stop"
    started: List[subprocess.Popen] = []

    def start(queue: str, **opts: Any) -> None:
        ready = tmp_path / f"ready-{len(started)}"
        args = dict(opts, url=redis_url, queue=queue, stopFile=str(stop), readyFile=str(ready))
        started.append(subprocess.Popen([_node(), str(SCRIPT), "workUntil", json.dumps(args)],
                                        cwd=str(HERE), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert started[-1].poll() is None, started[-1].communicate(timeout=10)
            assert time.monotonic() < deadline, "the Node worker did not start"
            time.sleep(0.02)

    try:
        yield start
    finally:
        stop.write_text("stop")
        for proc in started:
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate(timeout=10)
            _reply("workUntil", out, err)


def handler(job: Job) -> str:
    if job.name.startswith("fail"):
        raise ValueError("python failed")
    return "py"


def test_each_side_lists_the_others_workers(node_worker, redis_url, namespace):
    name = f"workers-\u00e9-{namespace}"
    node_worker(name, name="node-1")
    with Queue(name, redis_url) as queue, \
            Worker(name, handler, redis_url, worker_name="py-1", drain_delay=1).start():
        wait_until(lambda: len(queue.get_workers()) == 2, timeout=30, what="both workers")
        python_view = sorted(w["rawname"] for w in queue.get_workers())
        node_view = monitoring("getWorkers", url=redis_url, queue=name)
        assert sorted(w["rawname"] for w in node_view) == python_view
        assert {w["name"] for w in node_view} == {name}
        assert [n.rsplit(":w:", 1)[1] for n in python_view] == ["node-1", "py-1"]


def _finish(queue: Queue, jobs: "list[str]") -> None:
    queue.add_bulk([{"name": n} for n in jobs])
    wait_until(lambda: sum(queue.get_job_counts("completed", "failed").values()) == len(jobs),
               timeout=60, what="every job finished")


def _seed(r: Any, name: str) -> None:
    """A last data point long ago: the next finished job writes a full, known list."""
    r.hset(f"bull:{name}:metrics:completed", mapping={"count": 9, "prevTS": 1000,
                                                       "prevCount": 4})


def _node_view(redis_url: str, name: str, kind: str) -> Any:
    got = monitoring("getMetrics", url=redis_url, queue=name, type=kind)
    return got["meta"]["count"], got["meta"]["prevCount"], got["data"], got["count"]


def test_metrics_written_by_either_side_match_and_are_read_by_the_other(
        node_worker, redis_url, namespace, r):
    jobs = ["ok", "ok", "fail-1", "ok"]
    py_name, node_name = f"metrics-py-{namespace}", f"metrics-node-{namespace}"
    for name in (py_name, node_name):
        _seed(r, name)
    node_worker(node_name, maxDataPoints=5)
    with Queue(py_name, redis_url) as py_queue, Queue(node_name, redis_url) as node_queue:
        with Worker(py_name, handler, redis_url, metrics={"max_data_points": 5},
                    drain_delay=1).start():
            _finish(py_queue, jobs)
        _finish(node_queue, jobs)
        for kind in ("completed", "failed"):
            py_written, node_written = py_queue.get_metrics(kind), node_queue.get_metrics(kind)
            as_tuple = (py_written.meta.count, py_written.meta.prev_count, py_written.data,
                        py_written.count)
            assert as_tuple == (node_written.meta.count, node_written.meta.prev_count,
                                node_written.data, node_written.count)
            assert _node_view(redis_url, py_name, kind) == as_tuple
            assert _node_view(redis_url, node_name, kind) == as_tuple
        completed = py_queue.get_metrics("completed")
        assert (completed.meta.count, completed.data) == (12, [0, 0, 0, 0, 5])
        assert py_queue.get_metrics("failed").meta.count == 1
        for kind in ("completed", "failed"):
            fields = set(r.hgetall(f"bull:{py_name}:metrics:{kind}"))
            assert fields == set(r.hgetall(f"bull:{node_name}:metrics:{kind}"))
