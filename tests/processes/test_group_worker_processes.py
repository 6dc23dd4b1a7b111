"""GroupWorker(processes=N) on real Redis: handlers run in child processes (by import
name or by reference), an exception or a child's death fails only its job, a group's
order holds across children, job_timeout kills a child, a close past its timeout gives
the running job back to its group (no attempt counted, the group not stuck), and what
cannot be sent to a child is refused up front."""
from __future__ import annotations

import os
from typing import Iterator, List

import proc_handlers_int as handlers
import pytest

from orijs_sync import errors
from orijs_sync.groups import GroupOptionError, GroupQueue, GroupWorker
from orijs_sync.groups.testing import check_runs
from orijs_sync.testing import wait_until


@pytest.fixture
def gq(redis_url: str, namespace: str) -> Iterator[GroupQueue]:
    queue = GroupQueue(f"gq-{namespace}", connection=redis_url, job_timeout=5,
                       keep_completed=1000, keep_failed=1000, max_attempts=1)
    yield queue
    queue.close()


def finished(gq: GroupQueue, ids: List[str], timeout: float = 60) -> None:
    def done() -> bool:
        return all(gq.get_job(i).status in ("completed", "failed") for i in ids)
    wait_until(done, timeout, "the jobs to finish")


def test_handlers_run_in_child_processes_by_name(gq):
    ids = [gq.add(group_id=f"g{i}", data={"sleep": 0.3}).id for i in range(6)]
    with GroupWorker(gq, "proc_handlers_int:pid", processes=2) as worker:
        assert worker.concurrency == 2
        finished(gq, ids)
    pids = {gq.get_job(i).returnvalue for i in ids}
    assert os.getpid() not in pids and len(pids) >= 2
    assert {gq.get_job(i).status for i in ids} == {"completed"}


def test_a_function_by_reference_and_recycled_children(gq):
    ids = [gq.add(group_id="g", data={}).id for _ in range(4)]
    with GroupWorker(gq, handlers.pid, processes=1, max_jobs_per_process=1):
        finished(gq, ids)
    pids = [gq.get_job(i).returnvalue for i in ids]
    assert os.getpid() not in pids and len(set(pids)) == 4     # a new child per job


def test_an_exception_fails_its_job_with_its_message(gq):
    job = gq.add(group_id="g", data={"raise": 7})
    after = gq.add(group_id="g", data={"raise": 8})
    with GroupWorker(gq, "proc_handlers_int:by_request", processes=1):
        finished(gq, [job.id, after.id])
    failed = gq.get_job(job.id)
    assert failed.status == "failed" and failed.failed_reason == "bad input: 7"
    assert "proc_handlers_int.py" in failed.stacktrace      # the child's traceback
    assert gq.get_job(after.id).status == "failed"           # the group went on


def test_a_child_that_exits_fails_its_job_and_the_next_one_runs(gq):
    dying = gq.add(group_id="g", data={"exit": True})
    nxt = gq.add(group_id="g", data={})
    failures: List[BaseException] = []
    with GroupWorker(gq, "proc_handlers_int:by_request", processes=1) as worker:
        worker.on("failed", lambda job, exc: failures.append(exc))
        finished(gq, [dying.id, nxt.id])
    dead = gq.get_job(dying.id)
    assert dead.status == "failed" and dead.failed_reason.startswith("Unexpected exit code: 3")
    assert isinstance(failures[0], errors.ChildDied)
    ran = gq.get_job(nxt.id)
    assert ran.status == "completed" and ran.returnvalue not in (os.getpid(), None)


def test_each_groups_order_holds_across_children(gq, redis_url, namespace):
    log = f"log-{namespace}"
    ids = [gq.add(group_id=f"g{g}", data={"url": redis_url, "log": log, "n": n}).id
           for n in range(5) for g in range(4)]
    with GroupWorker(gq, "proc_handlers_int:group_ordered", processes=2, concurrency=4):
        finished(gq, ids)
    entries = gq.client.lrange(log, 0, -1)
    runs = check_runs(entries)                  # no overlap in a group, order kept
    assert runs == {f"g{g}": [0, 1, 2, 3, 4] for g in range(4)}
    pids = {entry.split("|")[4] for entry in entries}
    assert str(os.getpid()) not in pids and len(pids) >= 2


def test_job_timeout_kills_the_child(gq):
    job = gq.add(group_id="g", data={})
    with GroupWorker(gq, "proc_handlers_int:hanging", processes=1, job_timeout=0.5):
        finished(gq, [job.id], 30)
    assert "timed out after 0.5 s" in gq.get_job(job.id).failed_reason


def test_close_past_its_timeout_gives_the_job_back_to_its_group(gq, redis_url, namespace):
    log = f"log-{namespace}"
    first = gq.add(group_id="g", data={"url": redis_url, "log": log})
    second = gq.add(group_id="g", data={"url": redis_url, "log": log})
    late: List[str] = []
    worker = GroupWorker(gq, "proc_handlers_int:slow_first_run", processes=1).start()
    worker.on("graceful-timeout", lambda job: late.append(job.id))
    wait_until(lambda: gq.client.llen(log) == 1, 30, "the first job to start")
    assert worker.close(timeout=0.3) is True          # its child killed, its job back
    assert late == [first.id]
    back = gq.get_job(first.id)
    assert back.status == "waiting" and back.attempts_made == 0
    with GroupWorker(gq, "proc_handlers_int:slow_first_run", processes=1):
        finished(gq, [first.id, second.id])           # the group is not stuck
    assert gq.get_job(first.id).returnvalue == 2       # its second run, in its place
    assert gq.get_job(second.id).returnvalue == 1


def test_a_handler_by_name_runs_on_a_thread_without_processes(gq):
    job = gq.add(group_id="g", data={})
    with GroupWorker(gq, "proc_handlers_int:pid") as worker:
        assert worker.process_options is None and worker.concurrency == 1
        finished(gq, [job.id])
    assert gq.get_job(job.id).returnvalue == os.getpid()


def test_what_cannot_run_in_a_child_is_refused(gq):
    with pytest.raises(errors.InvalidArgument, match="handler cannot be sent to a child"):
        GroupWorker(gq, lambda job: None, processes=2)
    with pytest.raises(GroupOptionError, match="no name to route"):
        GroupWorker(gq, {"a": handlers.pid}, processes=2)
    with pytest.raises(errors.InvalidArgument, match="job_timeout needs processes"):
        GroupWorker(gq, handlers.pid, job_timeout=5)
    with pytest.raises(errors.InvalidArgument, match="at least processes"):
        GroupWorker(gq, handlers.pid, processes=4, concurrency=2)
    with pytest.raises(errors.InvalidArgument, match="names a module that cannot be"):
        GroupWorker(gq, "no_such_module_here:fn")
    with pytest.raises(GroupOptionError, match="must be callable"):
        GroupWorker(gq, 42)
