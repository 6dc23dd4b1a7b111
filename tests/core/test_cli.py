"""The orijs-sync command's reading commands, help, version and exit statuses, run as a
user would (a subprocess)."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from cli_helpers import cli_env, run_cli

from orijs_sync import Worker, __version__
from orijs_sync.cli.main import build_parser
from orijs_sync.testing import wait_until

COMMANDS = sorted(next(a for a in build_parser()._actions if a.dest == "command").choices)


def cli(redis_url, *args, code=0):
    return run_cli("--url", redis_url, *args, code=code)


def js(redis_url, *args):
    return json.loads(cli(redis_url, "--json", *args).stdout)


def test_counts_job_and_jobs_as_json(queue, redis_url, qname):
    job = queue.add("send", {"to": "x"})
    assert js(redis_url, "counts", qname)["waiting"] == 1
    shown = js(redis_url, "job", qname, job.id)
    assert shown["name"] == "send" and shown["state"] == "waiting"
    assert shown["timestamp"] == job.timestamp            # raw ms in JSON
    listed = js(redis_url, "jobs", qname, "--state", "wait")
    assert listed[0]["id"] == job.id and listed[0]["timestamp"] == job.timestamp
    missing = cli(redis_url, "job", qname, "nope", code=1)
    assert "no job nope" in missing.stderr


def test_human_output_shows_iso_dates(queue, redis_url, qname):
    queue.add("a", {})
    with Worker(qname, lambda job: 1, redis_url, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 1, what="done")
    job = queue.get_jobs(["completed"])[0]
    shown = cli(redis_url, "job", qname, job.id).stdout
    stamp = re.search(r"^finishedOn: (\S+)$", shown, re.M).group(1)
    assert datetime.fromisoformat(stamp).timestamp() == job.finished_on / 1000.0
    assert re.search(r"^timestamp: \d{4}-\d\d-\d\dT", shown, re.M) and "state: completed" in shown
    listed = cli(redis_url, "jobs", qname, "--state", "completed").stdout
    assert listed.startswith(f"{job.id} a added 20") and " finished 20" in listed
    counts = cli(redis_url, "counts", qname).stdout
    assert "completed=1" in counts and "waiting=0" in counts


@pytest.mark.parametrize("command", [["counts"], ["jobs"], ["job", "1"]])
def test_reading_a_queue_that_does_not_exist_says_so(redis_url, namespace, command):
    name = f"none-{namespace}"
    proc = cli(redis_url, command[0], name, *command[1:], code=1)
    assert f"queue '{name}' does not exist" in proc.stderr and proc.stdout == ""


def test_counts_with_state_keeps_the_paused_count(queue, redis_url, qname):
    queue.add("a", {})
    queue.add("b", {})
    queue.pause()
    shown = js(redis_url, "counts", qname, "--with-state")
    assert shown["paused"] == 2 and shown["is_paused"] is True
    queue.resume()
    shown = js(redis_url, "counts", qname, "--with-state")
    assert shown["paused"] == 0 and shown["waiting"] == 2 and shown["is_paused"] is False


def test_version_and_python_dash_m_orijs_sync_are_the_command():
    assert run_cli("--version").stdout.strip() == f"orijs-sync {__version__}"
    via_cli_package = [sys.executable, "-m", "orijs_sync.cli", "--help"]
    other = subprocess.run(via_cli_package, capture_output=True, text=True, timeout=60,
                           env=cli_env())
    assert run_cli("--help").stdout == other.stdout
    script = Path(sys.executable).with_name("orijs-sync")
    installed = str(script) if script.is_file() else shutil.which("orijs-sync")
    if installed:
        same = subprocess.run([installed, "--help"], capture_output=True, text=True,
                              timeout=60, env=cli_env())
        assert same.stdout == other.stdout


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_texts_have_no_rest_markup(command):
    shown = run_cli(*([command] if command else []), "--help").stdout
    assert shown.startswith("usage: orijs-sync")
    assert "``" not in shown and not re.search(r":[a-z]+:`", shown), shown


def test_redis_down_is_exit_3_for_any_command():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli("--url", f"redis://127.0.0.1:{port}/0", "counts", "q", code=3)
    assert "Traceback" not in proc.stderr
