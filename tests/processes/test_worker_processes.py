"""Process mode of the plain Worker (``processes=``): handlers run in child processes,
their results and exceptions come back as a thread's would, a child that dies or
overruns ``job_timeout`` costs its job one attempt and nothing else."""
from __future__ import annotations

import os
import re
import signal
from typing import Any, Iterator, List

import pytest
import redis

import proc_handlers
from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.testing import wait_until

GUARD = 60.0


@pytest.fixture
def q(redis_url: str, qname: str) -> Iterator[Queue]:
    with Queue(qname, connection=redis_url) as queue:
        yield queue


def finish(queue: Queue, events: QueueEvents, job: Any) -> Any:
    """The job's return value, or its failure as the JobFailed raised."""
    return job.wait_until_finished(events, timeout=GUARD)


def data(redis_url: str, tag: str, **more: Any) -> dict:
    return {"url": redis_url, "tag": tag, **more}


def started(r: "redis.Redis[str]", tag: str) -> List[str]:
    return list(r.lrange(f"started:{tag}", 0, -1))


def test_jobs_run_in_child_processes_and_use_them_all(q, events, redis_url, r):
    with Worker(q.name, "proc_handlers:cpu", connection=redis_url, processes=2):
        jobs = [q.add("cpu", data(redis_url, "all", seconds=0.2)) for _ in range(6)]
        pids = {finish(q, events, job)["pid"] for job in jobs}
    assert os.getpid() not in pids
    assert len(pids) == 2, "both children ran jobs"


@pytest.mark.parametrize("processor", [
    "proc_handlers:pid",
    proc_handlers.pid,
    {"a": "proc_handlers:pid", "b": proc_handlers.pid},
], ids=["import-name", "function", "mapping"])
def test_a_handler_by_name_function_or_mapping(q, events, redis_url, processor):
    with Worker(q.name, processor, connection=redis_url, processes=1):
        for name in ("a", "b"):
            assert finish(q, events, q.add(name, {})) != os.getpid()


def test_what_cannot_run_in_a_child_is_refused_up_front(q, redis_url):
    def nested(job: Any) -> None:
        return None
    for bad in (lambda job: None, nested, {"a": nested}):
        with pytest.raises(errors.InvalidArgument, match="cannot be sent to a child process"):
            Worker(q.name, bad, connection=redis_url, processes=1)
    with pytest.raises(errors.InvalidArgument, match="job_timeout needs processes"):
        Worker(q.name, proc_handlers.pid, connection=redis_url, job_timeout=5)
    with pytest.raises(errors.InvalidArgument, match="max_jobs_per_process needs processes"):
        Worker(q.name, proc_handlers.pid, connection=redis_url, max_jobs_per_process=5)
    with pytest.raises(errors.InvalidArgument, match="concurrency must be at least processes"):
        Worker(q.name, proc_handlers.pid, connection=redis_url, processes=4, concurrency=2)
    with pytest.raises(errors.InvalidArgument, match="no_such_module"):
        Worker(q.name, "no_such_module:fn", connection=redis_url, processes=1)
    assert q.get_job_counts("waiting", "active", "completed") == \
        {"waiting": 0, "active": 0, "completed": 0, "paused": 0}


def test_an_exception_crosses_back_with_the_childs_traceback(q, events, redis_url):
    with Worker(q.name, "proc_handlers:raising", connection=redis_url, processes=1):
        job = q.add("x", {"x": 7})
        with pytest.raises(errors.JobFailed, match="bad input: 7"):
            finish(q, events, job)
    stored = q.get_job(job.id)
    assert stored.failed_reason == "bad input: 7"
    trace = stored.stacktrace[-1]
    assert "proc_handlers.py" in trace and "in raising" in trace
    assert trace.rstrip().endswith("ValueError: bad input: 7")


def test_an_exception_that_does_not_pickle_comes_back_by_name(q, events, redis_url):
    with Worker(q.name, "proc_handlers:raising_unpicklable", connection=redis_url, processes=1):
        job = q.add("x", {})
        with pytest.raises(errors.JobFailed, match="needs two arguments: 1, 2"):
            finish(q, events, job)
    assert "Unpicklable: needs two arguments" in q.get_job(job.id).stacktrace[-1]


def test_unrecoverable_delayed_and_rate_limit_errors_keep_their_meaning(q, events, redis_url, r):
    routes = {"u": "proc_handlers:unrecoverable", "d": "proc_handlers:delaying",
              "rl": "proc_handlers:rate_limited_once"}
    with Worker(q.name, routes, connection=redis_url, processes=1):
        failing = q.add("u", {}, attempts=3)
        with pytest.raises(errors.JobFailed, match="give up now"):
            finish(q, events, failing)
        assert q.get_job(failing.id).attempts_made == 1          # not retried
        delayed = q.add("d", {})
        wait_until(lambda: q.get_job_state(delayed.id) == "delayed", GUARD, "delayed")
        limited = q.add("rl", data(redis_url, "rl"))
        assert finish(q, events, limited) == "second run"
        assert q.get_job(limited.id).attempts_made == 1           # the first run not counted


def test_a_handler_in_a_child_waits_for_the_children_it_added(q, events, redis_url, namespace):
    children = f"kids-{namespace}"
    with Worker(children, "proc_handlers:times_ten", connection=redis_url, processes=1), \
            Worker(q.name, "proc_handlers:parent_of_two", connection=redis_url, processes=1):
        job = q.add("p", {"url": redis_url, "children": children})
        assert finish(q, events, job) == 30
    assert q.get_job(job.id).attempts_made == 1


def test_a_return_value_json_cannot_hold_fails_the_job_clearly(q, events, redis_url):
    with Worker(q.name, "proc_handlers:not_json", connection=redis_url, processes=1):
        job = q.add("x", {}, attempts=3)
        with pytest.raises(errors.JobFailed, match="return value of job"):
            finish(q, events, job)
    assert q.get_job(job.id).attempts_made == 1


def test_a_child_that_exits_fails_its_job_only_and_is_replaced(q, events, redis_url, r):
    routes = {"exit": "proc_handlers:exiting", "slow": "proc_handlers:sleeping",
              "pid": "proc_handlers:pid"}
    with Worker(q.name, routes, connection=redis_url, processes=2) as worker:
        slow = q.add("slow", data(redis_url, "slow", seconds=1.5))
        wait_until(lambda: started(r, "slow"), GUARD, "the slow job to start")
        dying = q.add("exit", data(redis_url, "exit"), attempts=2)
        with pytest.raises(errors.JobFailed,
                           match=r"Unexpected exit code: 3 signal: null"):
            finish(q, events, dying)
        assert finish(q, events, slow) == "slept"            # the other child untouched
        assert q.get_job(dying.id).attempts_made == 2         # retried per attempts
        assert finish(q, events, q.add("pid", {})) in worker._children.pids


def test_a_child_killed_mid_job_fails_it_and_the_next_job_runs(q, events, redis_url, r):
    routes = {"slow": "proc_handlers:sleeping", "pid": "proc_handlers:pid"}
    with Worker(q.name, routes, connection=redis_url, processes=1):
        job = q.add("slow", data(redis_url, "kill", seconds=60))
        wait_until(lambda: started(r, "kill"), GUARD, "the job to start")
        child = int(started(r, "kill")[0].split(":")[1])
        os.kill(child, signal.SIGKILL)
        with pytest.raises(errors.JobFailed, match="Unexpected exit code: null signal: SIGKILL"):
            finish(q, events, job)
        assert finish(q, events, q.add("pid", {})) not in (child, os.getpid())


def test_a_job_past_its_timeout_is_killed_failed_and_retried(q, events, redis_url, r):
    routes = {"hang": "proc_handlers:hanging", "pid": "proc_handlers:pid"}
    with Worker(q.name, routes, connection=redis_url, processes=1, job_timeout=1.0):
        job = q.add("hang", data(redis_url, "hang"), attempts=2)
        with pytest.raises(errors.JobFailed, match=r"timed out after 1 s"):
            finish(q, events, job)
        stored = q.get_job(job.id)
        assert stored.attempts_made == 2
        killed = [int(pid) for pid in re.findall(r"its child process (\d+) was killed",
                                                 "".join(stored.stacktrace))]
        assert len(set(killed)) == 2, "each attempt had a fresh child"
        assert finish(q, events, q.add("pid", {})) not in killed


def test_a_child_is_recycled_after_max_jobs_per_process(q, events, redis_url):
    with Worker(q.name, "proc_handlers:pid", connection=redis_url, processes=1,
                max_jobs_per_process=2):
        pids = [finish(q, events, q.add("pid", {})) for _ in range(6)]
    assert [pids.count(p) for p in dict.fromkeys(pids)] == [2, 2, 2]


def test_a_cpu_job_three_lock_durations_long_runs_once(q, events, redis_url, r):
    """The parent renews the lock while the child holds a core: another worker's stalled
    check never takes the job."""
    with Worker(q.name, "proc_handlers:cpu", connection=redis_url, processes=1,
                lock_duration=1.0, stalled_interval=0.5), \
            Worker(q.name, "proc_handlers:cpu", connection=redis_url, processes=1,
                   lock_duration=1.0, stalled_interval=0.5):
        job = q.add("cpu", data(redis_url, "long", seconds=3.5))
        finish(q, events, job)
    assert r.get(f"runs:long:{job.id}") == "1"
    assert q.get_job(job.id).stalled_counter == 0


def test_children_inherit_no_socket_of_a_process_running_a_threaded_worker(
        q, events, redis_url, namespace):
    """A Worker on threads runs first (its sockets open); the children are started by a
    fork server, never forked from this threaded process: they hold none of its sockets."""
    with Queue(f"threads-{namespace}", connection=redis_url) as other, \
            Worker(other.name, proc_handlers.pid, connection=redis_url, concurrency=4), \
            QueueEvents(other.name, connection=redis_url) as other_events:
        assert finish(other, other_events, other.add("t", {})) == os.getpid()
        with Worker(q.name, "proc_handlers:sockets", connection=redis_url, processes=1):
            mine = set(proc_handlers.socket_inodes())
            theirs = set(finish(q, events, q.add("s", {})))
    assert theirs and mine and not mine & theirs


def test_close_past_its_timeout_kills_the_running_job_back_to_wait(q, redis_url, r):
    worker = Worker(q.name, "proc_handlers:sleeping", connection=redis_url, processes=1)
    worker.start()
    job = q.add("slow", data(redis_url, "close", seconds=60), attempts=3)
    wait_until(lambda: started(r, "close"), GUARD, "the job to start")
    child = int(started(r, "close")[0].split(":")[1])
    assert worker.close(timeout=0.5) is True
    assert q.get_job_state(job.id) == "waiting"
    assert q.get_job(job.id).attempts_made == 0
    wait_until(lambda: not os.path.exists(f"/proc/{child}"), 10, "the child to be gone")
