"""The orijs-sync command, run as a user would (a subprocess)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

from orijs_sync.testing import wait_until


def cli(redis_url, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "orijs_sync.cli", "--url", redis_url, *args],
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_counts_job_and_jobs(queue, redis_url, qname):
    job = queue.add("send", {"to": "x"})
    counts = json.loads(cli(redis_url, "counts", qname).stdout)
    assert counts["waiting"] == 1
    shown = json.loads(cli(redis_url, "job", qname, job.id).stdout)
    assert shown["name"] == "send" and shown["state"] == "waiting"
    assert json.loads(cli(redis_url, "jobs", qname, "--state", "wait").stdout)[0]["id"] == job.id
    missing = cli(redis_url, "job", qname, "nope", check=False)
    assert missing.returncode == 1 and "no job nope" in missing.stderr


def test_worker_runs_a_module_function_until_sigterm(queue, redis_url, qname, tmp_path):
    (tmp_path / "cli_tasks.py").write_text("def double(job):\n    return job.data['n'] * 2\n")
    job = queue.add("x", {"n": 21})
    proc = subprocess.Popen([sys.executable, "-m", "orijs_sync.cli", "--url", redis_url,
                             "worker", qname, "cli_tasks:double", "--concurrency", "2"],
                            cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: queue.get_job_state(job.id) == "completed", 30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert queue.get_job(job.id).returnvalue == 42


def test_bad_handler_spec_is_a_clear_error(redis_url, qname):
    bad = cli(redis_url, "worker", qname, "no_colon_here", check=False)
    assert bad.returncode == 2 and "module:function" in bad.stderr


def test_counts_with_state_keeps_the_paused_count(queue, redis_url, qname):
    queue.add("a", {})
    queue.add("b", {})
    queue.pause()
    shown = json.loads(cli(redis_url, "counts", qname, "--with-state").stdout)
    assert shown["paused"] == 2 and shown["is_paused"] is True
    queue.resume()
    shown = json.loads(cli(redis_url, "counts", qname, "--with-state").stdout)
    assert shown["paused"] == 0 and shown["waiting"] == 2 and shown["is_paused"] is False
