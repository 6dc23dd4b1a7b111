"""orijs-sync's listing and actions, run as a user would (a subprocess) against real Redis."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until

ROOT = str(Path(__file__).resolve().parents[2])


def cli(redis_url, *args, code=0, env=None):
    proc = subprocess.run([sys.executable, "-m", "orijs_sync.cli", *args], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, REDIS_URL=redis_url,
                                                          PYTHONPATH=ROOT, **(env or {})))
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def js(redis_url, *args):
    return json.loads(cli(redis_url, *args, "--json").stdout)


def test_queues_lists_every_queue_under_the_prefix_with_counts(redis_url, namespace):
    prefix = f"p{namespace}"
    with Queue("alpha", redis_url, prefix=prefix) as a, Queue("beta", redis_url, prefix=prefix) as b:
        a.add("x", {})
        b.add("y", {}, delay=60)
        b.pause()
        table = js(redis_url, "--prefix", prefix, "queues")
        assert sorted(table) == ["alpha", "beta"]
        assert table["alpha"]["waiting"] == 1 and table["alpha"]["is_paused"] is False
        assert table["beta"]["delayed"] == 1 and table["beta"]["is_paused"] is True
        human = cli(redis_url, "queues", "--prefix", prefix).stdout
        assert human.startswith("alpha: waiting=1") and "beta: " in human


def test_queues_watch_refreshes_until_sigterm(redis_url, namespace, queue):
    prefix = f"w{namespace}"
    with Queue("gamma", redis_url, prefix=prefix) as q:
        q.add("x", {})
        proc = subprocess.Popen([sys.executable, "-m", "orijs_sync.cli", "--json", "--prefix",
                                 prefix, "queues", "--watch", "0.2"], stdout=subprocess.PIPE,
                                text=True, env=dict(os.environ, REDIS_URL=redis_url,
                                                    PYTHONPATH=ROOT))
        try:
            first = json.loads(proc.stdout.readline())
            q.add("y", {})
            deadline = time.monotonic() + 30
            while json.loads(proc.stdout.readline())["gamma"]["waiting"] != 2:
                assert time.monotonic() < deadline, "the watch never showed the new job"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert first["gamma"]["waiting"] == 1


def failing(job):
    raise ValueError("boom")


def test_retry_one_and_all_failed(queue, redis_url, qname):
    jobs = queue.add_bulk([{"name": "a"}, {"name": "b"}, {"name": "c"}])
    with Worker(qname, failing, redis_url, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("failed")["failed"] == 3, what="all failed")
    assert js(redis_url, "retry", qname, jobs[0].id) == {"retried": [jobs[0].id]}
    assert queue.get_job_state(jobs[0].id) == "waiting"
    assert sorted(js(redis_url, "retry", qname, "--all-failed")["retried"]) == \
        sorted(j.id for j in jobs[1:])
    assert queue.get_job_counts("waiting", "failed") == {"waiting": 3, "failed": 0, "paused": 0}
    cli(redis_url, "retry", qname, code=2)      # neither an id nor --all-failed


def test_remove_promote_pause_resume_drain(queue, redis_url, qname):
    gone, later, stays = queue.add("a", {}), queue.add("b", {}, delay=3600), queue.add("c", {})
    assert "removed" in cli(redis_url, "remove", qname, gone.id).stdout
    assert queue.get_job(gone.id) is None
    cli(redis_url, "remove", qname, "no-such-job", code=2)
    cli(redis_url, "promote", qname, later.id)
    assert queue.get_job_state(later.id) == "waiting"
    cli(redis_url, "pause", qname)
    assert queue.is_paused()
    cli(redis_url, "resume", qname)
    assert not queue.is_paused()
    assert js(redis_url, "drain", qname) == {
        "removed": 2, "by_state": {"waiting": 2, "prioritized": 0, "paused": 0}}
    assert queue.get_job(stays.id) is None


def test_drain_delayed_reports_what_it_removed(queue, redis_url, qname):
    queue.add("a", {})
    queue.add("b", {}, delay=3600)
    queue.add("c", {}, delay=3600)
    said = cli(redis_url, "drain", qname, "--delayed").stdout
    assert said.startswith(f"3 job(s) removed from {qname} (1 waiting, 0 prioritized, "
                           f"0 paused, 2 delayed")
    assert queue.count() == 0


def test_a_refused_action_names_the_state_the_job_is_in(queue, redis_url, qname):
    waiting = queue.add("a", {})
    refused = cli(redis_url, "retry", qname, waiting.id, code=2)
    assert f"job {waiting.id} is waiting, not failed: not retried" in refused.stderr
    refused = cli(redis_url, "promote", qname, waiting.id, code=2)
    assert f"job {waiting.id} is waiting, not delayed: not promoted" in refused.stderr
    worker = Worker(qname, None, redis_url)        # takes the job by hand: locked, active
    try:
        taken = worker.get_next_job("tok")
        assert taken.id == waiting.id
        refused = cli(redis_url, "remove", qname, waiting.id, code=2)
        assert f"job {waiting.id} is active and locked by a worker: not removed" in \
            refused.stderr
    finally:
        worker.close()
    assert queue.get_job_state(waiting.id) == "active"


def test_clean_by_state_and_grace(queue, redis_url, qname):
    queue.add_bulk([{"name": "a"}, {"name": "b"}])
    with Worker(qname, lambda job: 1, redis_url, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 2, what="done")
    assert js(redis_url, "clean", qname, "--state", "completed", "--grace", "3600") == \
        {"removed": []}
    assert len(js(redis_url, "clean", qname, "--state", "completed", "--grace", "0")
               ["removed"]) == 2
    assert queue.get_job_counts("completed")["completed"] == 0


def test_obliterate_needs_force(queue, redis_url, qname, r):
    queue.add("a", {})
    refused = cli(redis_url, "obliterate", qname, code=2)
    assert "--force" in refused.stderr and queue.count() == 1
    cli(redis_url, "obliterate", qname, "--force")
    assert r.keys(f"bull:{qname}:*") == []


def test_schedulers_list_and_remove(queue, redis_url, qname):
    queue.upsert_job_scheduler("tick", every=60, template={"name": "tick-job"})
    listed = js(redis_url, "schedulers", qname)
    assert [(s["id"], s["name"], s["every"]) for s in listed] == [("tick", "tick-job", 60)]
    cli(redis_url, "schedulers", qname, "--remove", "tick")
    assert queue.get_job_schedulers() == []
    cli(redis_url, "schedulers", qname, "--remove", "tick", code=2)


@pytest.mark.parametrize("action", [["retry", "--all-failed"], ["remove", "1"],
                                    ["promote", "1"], ["clean", "--grace", "0"], ["pause"],
                                    ["resume"], ["drain"], ["obliterate", "--force"],
                                    ["schedulers"]])
def test_every_action_refuses_a_queue_that_does_not_exist(redis_url, namespace, r, action):
    name = f"missing-{namespace}"
    proc = cli(redis_url, action[0], name, *action[1:], code=2)
    assert f"queue '{name}' does not exist" in proc.stderr
    assert r.keys(f"*{name}*") == []


def test_worker_name_is_listed_and_each_job_logged(queue, redis_url, qname, tmp_path):
    (tmp_path / "cli_named.py").write_text("def work(job):\n    return 1\n")
    proc = subprocess.Popen([sys.executable, "-m", "orijs_sync.cli", "worker", qname,
                             "cli_named:work", "--name", "night-shift"], cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, REDIS_URL=redis_url,
                                     PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}"))
    try:
        wait_until(lambda: len(queue.get_workers()) == 1, timeout=30, what="worker listed")
        assert queue.get_workers()[0]["rawname"].endswith(":w:night-shift")
        job = queue.add("x", {})
        wait_until(lambda: queue.get_job_state(job.id) == "completed", timeout=30, what="done")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        log = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert f"job {job.id} (x) of {qname} completed" in log
