"""The real ``orijs-sync worker ... --processes 2`` command in a subprocess: its jobs run
in child processes (an exception and a child's death fail only their job), one SIGTERM
ends it cleanly, and no process it started is left behind (read from /proc)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

from orijs_sync import Queue
from orijs_sync.testing import wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def command() -> Optional[str]:
    """The installed ``orijs-sync`` script (beside this Python first)."""
    beside = Path(sys.executable).with_name("orijs-sync")
    return str(beside) if beside.is_file() else shutil.which("orijs-sync")


def _stat(pid: int) -> Optional[List[str]]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def descendants(pid: int) -> Set[int]:
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: Set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"      # a zombie has ended


def finished(queue: Queue, ids: List[str]) -> bool:
    return all(queue.get_job_state(i) in ("completed", "failed") for i in ids)


@pytest.mark.skipif(command() is None, reason="the orijs-sync command is not installed")
def test_worker_command_with_processes_runs_jobs_in_children_and_stops_clean(
        queue, redis_url, qname, tmp_path):
    ids = [queue.add("x", {"sleep": 0.3}).id for _ in range(6)]
    bad = queue.add("x", {"raise": 3}).id
    dying = queue.add("x", {"exit": True}).id
    ids.append(queue.add("x", {}).id)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    stderr = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen([str(command()), "--url", redis_url, "worker", qname,
                             "proc_handlers_int:by_request", "--processes", "2",
                             "--job-timeout", "60", "--max-jobs-per-process", "100"],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_until(lambda: finished(queue, ids + [bad, dying]), 60, "the jobs to finish")
        pids = {queue.get_job(i).returnvalue for i in ids}
        assert len(pids) >= 2 and not pids & {os.getpid(), proc.pid}
        started = descendants(proc.pid)
        assert started & pids           # the live children are the worker's descendants
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr.close()
    wait_until(lambda: not any(alive(pid) for pid in started | pids), 20,
               "the worker's child processes to end")
    failed = queue.get_job(bad)
    assert failed.failed_reason == "bad input: 3"
    assert "proc_handlers_int.py" in failed.stacktrace[-1]        # the child's traceback
    assert queue.get_job(dying).failed_reason.startswith("Unexpected exit code: 3")
    assert "Exception in thread" not in (tmp_path / "worker.log").read_text()
