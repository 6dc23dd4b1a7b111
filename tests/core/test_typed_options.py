"""Job options are typed (``orijs_sync.types.JobOptions`` through PEP 692's ``Unpack``):
``mypy --strict`` on a user's script flags a misspelt option or a value of the wrong
type before the code runs, and passes a correct script. mypy really runs, on this
checkout's package (MYPYPATH), each script in a directory of its own."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orijs_sync import JobOptions, errors
from orijs_sync.types import BulkJob, FlowJob

ROOT = Path(__file__).resolve().parents[2]

# Errors inside the package itself (found through MYPYPATH, so checked as sources, with
# redis-py's untyped corners) are not the script's: only the script's are reported.
CONFIG = """\
[mypy]
strict = True
python_version = {python}

[mypy-orijs_sync.*]
ignore_errors = True
"""

BAD = """\
from datetime import datetime, timezone

from orijs_sync import FlowProducer, JobOptions, Queue, Tasks

queue = Queue("x")
queue.add("x", {}, atempts=3)
queue.add("x", {}, delay="soon")
queue.add_bulk([{"name": "y", "opts": {"priorty": 2}}])
queue.upsert_job_scheduler("s", every=60, template={"opts": {"lifo": "yes"}})
FlowProducer().add({"name": "p", "queue_name": "q", "children": [{"name": "c"}]})
tasks = Tasks()


@tasks.task(queue="q", attemps=2)
def work() -> None: ...


work.apply({}, run_at="2030-01-01")
options: JobOptions = {"backoff": {"delay": 1}}
"""

GOOD = """\
from datetime import datetime, timedelta, timezone
from typing import List

from orijs_sync import FlowProducer, Job, JobOptions, Queue, Tasks
from orijs_sync.types import BulkJob, FlowJob

queue = Queue("x")
job: Job = queue.add("x", {}, attempts=3, delay=timedelta(seconds=5), priority=2,
                     backoff={"type": "exponential", "delay": 1, "jitter": 0.5},
                     remove_on_complete={"age": 3600, "count": 10},
                     deduplication={"id": "d", "ttl": 60})
queue.add("x", None, run_at=datetime(2030, 1, 1, tzinfo=timezone.utc), parent=job)
options: JobOptions = {"attempts": 2, "lifo": True}
queue.add("x", {}, **options)
entries: List[BulkJob] = [{"name": "y", "data": [1], "opts": {"job_id": "y-1"}}]
queue.add_bulk(entries)
queue.upsert_job_scheduler("s", every=60, template={"name": "t", "opts": {"attempts": 2}})
flow: FlowJob = {"name": "p", "queue_name": "q",
                 "children": [{"name": "c", "queue_name": "q", "opts": {"priority": 1}}]}
FlowProducer().add(flow)
tasks = Tasks()


@tasks.task(queue="q", attempts=2)
def work(n: int) -> int:
    return n


work.apply({"n": 1}, delay=1.5)
when = job.finished_at.isoformat() if job.finished_at is not None else job.created_at.isoformat()
"""


def _mypy(tmp_path: Path, source: str, python: str) -> subprocess.CompletedProcess:
    """mypy on ``source`` as a script for Python ``python`` (3.9: typing_extensions's
    ``Unpack`` and ``Required``; the running one: typing's)."""
    (tmp_path / "mypy.ini").write_text(CONFIG.format(python=python))
    (tmp_path / "user_script.py").write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
         str(tmp_path / ".mypy_cache"), "user_script.py"],
        cwd=str(tmp_path), env=dict(os.environ, MYPYPATH=str(ROOT)),
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


PYTHONS = ("3.9", f"{sys.version_info[0]}.{sys.version_info[1]}")


@pytest.mark.parametrize("python", PYTHONS)
def test_mypy_flags_a_misspelt_option_and_a_wrong_type(tmp_path, python):
    proc = _mypy(tmp_path, BAD, python)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    lines = {int(line.split(":")[1]): line for line in out.splitlines()
             if line.startswith("user_script.py:") and ": error:" in line}
    assert '"atempts"' in lines[6], out                         # misspelt keyword
    assert '"delay"' in lines[7] and '"str"' in lines[7], out   # wrong type
    assert '"priorty"' in lines[8], out                         # an add_bulk entry's opts
    assert '"template"' in lines[9], out                        # lifo="yes" in its opts
    assert '"queue_name"' in lines[10], out                     # a flow node without one
    assert '"attemps"' in lines[14], out                        # a task's defaults
    assert '"run_at"' in lines[18], out                         # Task.apply
    assert '"backoff"' in lines[19], out                        # backoff needs its type
    assert len(lines) == 8, out


@pytest.mark.parametrize("python", PYTHONS)
def test_mypy_passes_a_correctly_typed_script(tmp_path, python):
    proc = _mypy(tmp_path, GOOD, python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout


def test_the_typed_dicts_know_their_required_keys_at_run_time():
    assert BulkJob.__required_keys__ == {"name"}
    assert FlowJob.__required_keys__ == {"name", "queue_name"}
    assert "run_at" in JobOptions.__optional_keys__ and not JobOptions.__required_keys__


def test_untyped_callers_are_still_checked_at_run_time(queue):
    untyped: dict = {"atempts": 3}
    with pytest.raises(errors.UnknownOption, match="atempts"):
        queue.add("x", {}, **untyped)
    with pytest.raises(errors.ValidationError, match="delay"):
        queue.add("x", {}, **{"delay": "soon"})
    assert queue.count() == 0
