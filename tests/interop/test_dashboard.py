"""examples/dashboard: bull-board (Node, pinned in examples/dashboard/package.json) over
queues filled from Python, checked through the board's own JSON API."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from orijs_sync import Queue, Worker
from orijs_sync.testing import _free_port, wait_until

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "dashboard"


def _load_fill() -> Any:
    spec = importlib.util.spec_from_file_location("dashboard_fill", DASHBOARD / "fill.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def board(redis_url: str, namespace: str) -> Iterator[Any]:
    """Starts server.js on a free loopback port for a prefix of this test's own."""
    node = shutil.which("node")
    if not node or not (DASHBOARD / "node_modules" / "@bull-board" / "api").is_dir():
        pytest.fail("the dashboard needs Node and its packages: `npm install` in "
                    "examples/dashboard (`bash .ci/setup` does it)", pytrace=False)
    started = []

    def start() -> str:
        port = _free_port()
        env = dict(os.environ, REDIS_URL=redis_url, PREFIX=namespace, HOST="127.0.0.1",
                   PORT=str(port))
        started.append(subprocess.Popen([node, "server.js"], cwd=str(DASHBOARD), env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
        return f"http://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for proc in started:
            proc.terminate()
            try:
                proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=15)


def get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=10) as reply:
        return json.loads(reply.read().decode())


def answers(base: str) -> bool:
    try:
        get(base, "/api/queues")
        return True
    except (urllib.error.URLError, ConnectionError):
        return False


def test_the_board_shows_python_queues_failures_workers_and_metrics(board, redis_url,
                                                                      namespace):
    fill = _load_fill()
    queues = fill.fill(redis_url, prefix=namespace)
    worked, idle = queues
    worker = Worker(worked.name, fill.handle, redis_url, prefix=namespace,
                    worker_name="fill-demo", metrics={"max_data_points": 60}, drain_delay=1)
    try:
        with worker.start():
            wait_until(lambda: worked.get_job_counts("completed", "failed")
                       == {"completed": 5, "failed": 1}, timeout=30, what="jobs finished")
            base = board()
            wait_until(lambda: answers(base), timeout=60, what="the board answering")
            listed = {q["name"]: q for q in get(base, "/api/queues")["queues"]}
            assert set(listed) == {q.name for q in queues}
            for queue in queues:
                counts = queue.get_job_counts()
                assert {k: listed[queue.name]["counts"][k] for k in counts} == counts
            assert listed[worked.name]["hasWorkers"] is True
            assert listed[idle.name]["hasWorkers"] is False

            failed = get(base, f"/api/queues?activeQueue={worked.name}&status=failed")
            jobs = {q["name"]: q for q in failed["queues"]}[worked.name]["jobs"]
            assert [j["failedReason"] for j in jobs] == ["no such domain for ghost@invalid"]
            assert "ValueError" in jobs[0]["stacktrace"][0]

            workers = get(base, f"/api/queues/{worked.name}/workers")["workers"]
            ours = worked.get_workers()
            assert [(w["id"], w["addr"], w["name"]) for w in workers] == \
                [(w["id"], w["addr"], "fill-demo") for w in ours]
            assert get(base, f"/api/queues/{idle.name}/workers")["workers"] == []

            metrics = get(base, f"/api/queues/{worked.name}/metrics")
            assert metrics["completed"]["meta"]["count"] == 5
            assert metrics["failed"]["meta"]["count"] == 1
    finally:
        for queue in queues:
            queue.close()
