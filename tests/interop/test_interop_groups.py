"""orijs_sync.groups and a real Node GroupMQ 1.1 (pinned in package.json) on one Redis:
jobs added on one side run on the other, and Node and Python workers share one queue
with per-group exclusivity and order intact.

The Node side is node/groupmq_driver.js; its handler logs "start|..." / "end|..." to a
Redis list as the Python handlers here do (orijs_sync.groups.testing), returns
{"echo": data, "by": "node"} and throws Error(data.message) while data.fail is set.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import redis as redis_py

from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.groups.testing import check_runs, record

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "node" / "groupmq_driver.js"
GUARD = 90.0


class GroupMQ:
    """Runs node/groupmq_driver.js commands against one Redis and namespace."""

    def __init__(self, url: str, namespace: str) -> None:
        node = shutil.which("node")
        installed = HERE / "node_modules" / "groupmq" / "package.json"
        wanted = json.loads((HERE / "package.json").read_text())["dependencies"]["groupmq"]
        if not node or not installed.is_file() or \
                json.loads(installed.read_text())["version"] != wanted:
            pytest.fail(f"interop tests need node and groupmq {wanted} in {HERE}/node_modules: "
                        "`npm install --no-save` in tests/interop (`bash .ci/setup` does)",
                        pytrace=False)
        self.node = node
        self.base = {"url": url, "namespace": namespace}
        self.procs: List[subprocess.Popen] = []

    def _cmd(self, command: str, args: Dict[str, Any]) -> List[str]:
        payload = dict(self.base, timeout=GUARD - 10, **args)
        return [self.node, str(DRIVER), command, json.dumps(payload)]

    def __call__(self, command: str, **args: Any) -> Any:
        proc = subprocess.run(self._cmd(command, args), cwd=str(HERE), capture_output=True,
                              text=True, timeout=GUARD, stdin=subprocess.DEVNULL)
        return self._reply(command, proc.stdout, proc.stderr)

    def start(self, command: str, **args: Any) -> subprocess.Popen:
        proc = subprocess.Popen(self._cmd(command, args), cwd=str(HERE), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def result(self, proc: subprocess.Popen, command: str = "work") -> Any:
        out, err = proc.communicate(timeout=GUARD)
        return self._reply(command, out, err)

    @staticmethod
    def _reply(command: str, out: str, err: str) -> Any:
        lines = [line for line in out.splitlines() if line.strip()]
        assert lines, f"groupmq driver {command!r} printed nothing; stderr:\n{err}"
        reply = json.loads(lines[-1])
        assert reply["ok"], f"groupmq driver {command!r} failed: {reply}\n{err}"
        return reply["result"]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)


@pytest.fixture
def gname(namespace: str) -> str:
    return f"gq-{namespace}"


@pytest.fixture
def gmq(redis_url: str, gname: str) -> Iterator[GroupMQ]:
    driver = GroupMQ(redis_url, gname)
    yield driver
    driver.close()


class PyHandler:
    def __init__(self, url: str, log: str) -> None:
        self.r = redis_py.Redis.from_url(url, decode_responses=True)
        self.log = log

    def __call__(self, job: GroupJob) -> Any:
        data = job.data or {}
        record(self.r, self.log, "start", job.id, job.group_id, data.get("n"), "py")
        time.sleep(data.get("sleep", 0))
        record(self.r, self.log, "end", job.id, job.group_id, data.get("n"), "py")
        if data.get("fail") and job.attempts_made < data.get("failTimes", 99):
            raise ValueError(data.get("message", "python failed"))
        return {"py": data, "id": job.id}


def test_node_adds_python_processes(gmq, redis_url, gname, r):
    base = int(time.time() * 1000)
    jobs = []
    for g in range(4):
        for n in (2, 0, 1):                      # submitted out of order, sorted by orderMs
            jobs.append({"groupId": f"g{g}", "data": {"n": n, "text": "h\u00e9llo \u2713"},
                         "orderMs": base + n * 10, "jobId": f"g{g}-{n}"})
    jobs.append({"groupId": "g0", "data": {"n": 3, "fail": True, "failTimes": 1},
                 "orderMs": base + 30, "jobId": "retry-me", "maxAttempts": 3})
    added = gmq("add", jobs=jobs)
    assert [j["id"] for j in added] == [j["jobId"] for j in jobs]
    gq = GroupQueue(gname, connection=redis_url, keep_completed=100)
    assert gq.get_job("g1-0").data == {"n": 0, "text": "h\u00e9llo \u2713"}
    assert gq.get_job_counts()["waiting"] == 13
    with GroupWorker(gq, PyHandler(redis_url, f"{gname}:log"), concurrency=4, backoff=0.05,
                     scheduler_interval=0.05):
        assert gq.wait_for_empty(GUARD)
    runs = check_runs(r.lrange(f"{gname}:log", 0, -1))
    assert runs == {"g0": [0, 1, 2, 3, 3], "g1": [0, 1, 2], "g2": [0, 1, 2], "g3": [0, 1, 2]}
    node_view = gmq("getJob", id="retry-me")
    assert node_view["status"] == "completed" and node_view["attemptsMade"] == 1
    assert node_view["returnvalue"] == {"py": {"n": 3, "fail": True, "failTimes": 1},
                                        "id": "retry-me"}
    assert node_view["groupId"] == "g0"
    gq.close()


def test_python_adds_node_processes(gmq, redis_url, gname, r):
    gq = GroupQueue(gname, connection=redis_url)
    base = int(time.time() * 1000)
    for g in range(3):
        for n in (1, 0, 2):
            gq.add(group_id=f"u:{g}", data={"n": n, "nested": {"list": [1, None]}},
                   order_ms=base + n, job_id=f"u{g}-{n}")
    gq.add(group_id="u:0", data={"n": 3, "fail": True, "failTimes": 1}, order_ms=base + 3,
           job_id="node-retries")
    gq.add(group_id="u:1", data={"n": 3}, order_ms=base + 3, job_id="later", delay=0.3)
    seen = gmq("getJob", id="u2-1")
    assert seen["groupId"] == "u:2" and seen["data"] == {"n": 1, "nested": {"list": [1, None]}}
    assert seen["status"] == "waiting" and seen["orderMs"] == base + 1
    assert gmq("getJob", id="later")["status"] == "delayed"
    counts = gmq("counts")
    assert (counts["waiting"], counts["delayed"], counts["active"]) == (11, 1, 0)
    result = gmq("work", log=f"{gname}:log", concurrency=3, until=11,
                 queueOpts={"keepCompleted": 100},
                 workerOpts={"schedulerIntervalMs": 50, "cleanupIntervalMs": 100})
    assert sorted(result["completed"]) == sorted(
        [f"u{g}-{n}" for g in range(3) for n in range(3)] + ["node-retries", "later"])
    runs = check_runs(r.lrange(f"{gname}:log", 0, -1))
    assert runs == {"u:0": [0, 1, 2, 3, 3], "u:1": [0, 1, 2, 3], "u:2": [0, 1, 2]}
    done = gq.get_job("node-retries")
    assert done.status == "completed" and done.attempts_made == 1
    assert done.returnvalue == {"echo": {"n": 3, "fail": True, "failTimes": 1}, "by": "node"}
    gq.close()


def test_node_and_python_workers_share_one_queue(gmq, redis_url, gname, r, tmp_path):
    gq = GroupQueue(gname, connection=redis_url)
    groups, per_group = 30, 20
    for n in range(per_group):
        for g in range(groups):
            gq.add(group_id=f"m{g}", data={"n": n, "sleep": 0.002})
    ready = tmp_path / "node-ready"
    node = gmq.start("work", log=f"{gname}:log", concurrency=4, sleepMs=2,
                     readyFile=str(ready))
    deadline = time.monotonic() + GUARD
    while not ready.exists():
        assert node.poll() is None, node.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with GroupWorker(gq, PyHandler(redis_url, f"{gname}:log"), concurrency=4):
        assert gq.wait_for_empty(GUARD)
    gmq.result(node)
    entries = r.lrange(f"{gname}:log", 0, -1)
    runs = check_runs(entries)
    assert runs == {f"m{g}": list(range(per_group)) for g in range(groups)}
    by = Counter(e.split("|")[4] for e in entries if e.startswith("start"))
    assert by["node"] > 0 and by["py"] > 0, by
    gq.close()


def test_node_repeating_job_runs_on_python_and_python_removes_it(gmq, redis_url, gname, r):
    placeholder = gmq("add", jobs=[{"groupId": "tick", "data": {"n": 0, "k": "v"},
                                    "repeat": {"every": 300}}])[0]
    assert placeholder["id"].startswith('repeat:tick:{"every":300}:')
    gq = GroupQueue(gname, connection=redis_url)
    runs: List[str] = []
    handler = PyHandler(redis_url, f"{gname}:log")

    def count(job: GroupJob) -> Any:
        runs.append(job.id)
        return handler(job)
    with GroupWorker(gq, count, scheduler_interval=0.05):
        deadline = time.monotonic() + GUARD
        while len(runs) < 2:
            assert time.monotonic() < deadline, runs
            time.sleep(0.05)
        assert gq.remove_repeating_job("tick", {"every": 0.3}) is True
    assert r.zcard(f"groupmq:{gname}:repeat:schedule") == 0
    assert gmq("getJob", id=placeholder["id"]) is None
    check_runs(r.lrange(f"{gname}:log", 0, -1))
    gq.close()


def test_python_repeating_job_runs_on_node(gmq, redis_url, gname):
    gq = GroupQueue(gname, connection=redis_url)
    gq.add(group_id="cron", data={"n": 0}, repeat={"every": 0.2})
    result = gmq("work", until=2, workerOpts={"schedulerIntervalMs": 50, "cleanupIntervalMs": 50},
                 queueOpts={"schedulerLockTtlMs": 50})
    assert len(set(result["completed"])) >= 2
    gq.close()


def test_ordering_scheduler_staged_on_one_side_runs_in_order_on_the_other(gmq, redis_url,
                                                                          gname, r):
    now = int(time.time() * 1000)
    late_first = [{"groupId": "o", "data": {"n": 2}, "orderMs": now},
                  {"groupId": "o", "data": {"n": 1}, "orderMs": now - 100}]
    gmq("add", jobs=late_first, queueOpts={"orderingDelayMs": 400})       # Node stages them
    gq = GroupQueue(gname, connection=redis_url, ordering="scheduler", ordering_window=0.4)
    assert gq.get_job_counts()["staged"] == 2
    with GroupWorker(gq, PyHandler(redis_url, f"{gname}:log")):
        assert gq.wait_for_empty(GUARD)
    gq.add(group_id="p", data={"n": 2}, order_ms=now + 1000)                # Python stages them
    gq.add(group_id="p", data={"n": 1}, order_ms=now + 900)
    assert gq.get_job_counts()["staged"] == 2
    gmq("work", log=f"{gname}:log", until=2, queueOpts={"orderingDelayMs": 400})
    assert check_runs(r.lrange(f"{gname}:log", 0, -1)) == {"o": [1, 2], "p": [1, 2]}
    gq.close()


def test_clean_on_either_side_of_the_other_sides_jobs(gmq, redis_url, gname):
    """Node's clean removes jobs Python completed; Python's removes a due delayed job
    Node added, and Node then counts the group's remaining job as before."""
    gq = GroupQueue(gname, connection=redis_url, keep_completed=10)
    for i in range(3):
        gq.add(group_id="c", data={"n": i}, job_id=f"c{i}")
    with GroupWorker(gq, lambda job: job.id):
        assert gq.wait_for_empty(30)
    assert gq.get_completed_count() == 3
    assert gmq("clean", status="completed", graceMs=0, limit=2) == 2
    assert gq.get_completed_count() == 1
    # d1's delay is long enough to be stored as delayed however slowly the add runs
    # (GroupMQ queues a job whose delay has passed when its script runs as ready)
    gmq("add", jobs=[{"groupId": "d", "data": {"n": 1}, "jobId": "d1", "delay": 1500},
                     {"groupId": "d", "data": {"n": 2}, "jobId": "d2", "delay": 600000}])
    assert gmq("counts")["delayed"] == 2
    time.sleep(1.7)                                   # d1 is due (nothing promotes it)
    assert gq.clean("delayed", grace=0.1) == 1
    assert gmq("getJob", id="d1") is None
    assert gmq("counts")["delayed"] == 1 and gq.get_group_job_count("d") == 1
    gq.close()
