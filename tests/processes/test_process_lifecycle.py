"""A process-mode worker as a program: killed with -9 it leaves no child behind; one
SIGTERM lets the running job finish; a second stops it now, the job back to wait."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from orijs_sync import Queue
from orijs_sync.testing import wait_until

HERE = Path(__file__).resolve().parent
GUARD = 60.0

SCRIPT = """
import sys
from orijs_sync import Worker

if __name__ == "__main__":
    Worker(sys.argv[2], "proc_handlers:sleeping", connection=sys.argv[1], processes=2).run()
"""


@pytest.fixture
def program(tmp_path: Path, redis_url: str, qname: str) -> Iterator[subprocess.Popen]:
    script = tmp_path / "proc_worker.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.Popen([sys.executable, str(script), redis_url, qname], env=env)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def running(r, tag: str, count: int) -> List[int]:
    wait_until(lambda: r.llen(f"started:{tag}") >= count, GUARD, f"{count} jobs to start")
    return [int(e.split(":")[1]) for e in r.lrange(f"started:{tag}", 0, -1)]


def test_a_parent_killed_with_minus_9_leaves_no_child(program, queue, redis_url, r):
    for _ in range(2):
        queue.add("slow", {"url": redis_url, "tag": "k9", "seconds": 120})
    children = running(r, "k9", 2)
    helpers = {parent_of(pid) for pid in children}          # the fork server
    program.send_signal(signal.SIGKILL)
    program.wait(10)
    wait_until(lambda: all(gone(pid) for pid in children + sorted(helpers)), 5.0,
               "every child process to exit after its parent was killed")


def test_one_sigterm_lets_the_running_job_finish(program, queue: Queue, redis_url, r):
    job = queue.add("slow", {"url": redis_url, "tag": "term", "seconds": 1.5})
    children = running(r, "term", 1)
    program.send_signal(signal.SIGTERM)
    assert program.wait(GUARD) == 0
    assert queue.get_job_state(job.id) == "completed"
    assert all(gone(pid) for pid in children)


def test_a_second_sigterm_stops_the_job_now_and_puts_it_back(program, queue: Queue,
                                                              redis_url, r):
    job = queue.add("slow", {"url": redis_url, "tag": "cold", "seconds": 120}, attempts=3)
    children = running(r, "cold", 1)
    program.send_signal(signal.SIGTERM)
    time.sleep(0.5)      # the first signal is being handled: close() waits for the job
    assert program.poll() is None
    program.send_signal(signal.SIGTERM)
    assert program.wait(GUARD) == 0
    assert queue.get_job_state(job.id) == "waiting"
    assert queue.get_job(job.id).attempts_made == 0
    assert all(gone(pid) for pid in children)
