"""GroupQueue on real Redis: what add() writes (GroupMQ 1.1's layout), validation that
writes nothing, and the job operations."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from orijs_sync import errors
from orijs_sync.groups import GroupDataError, GroupOptionError, GroupQueue, GroupWorker


def keys_of(r, gq):
    return sorted(r.keys(f"{gq.ns}:*"))


def test_add_writes_groupmq_layout(gq, r):
    job = gq.add(group_id="user:42", data={"a": 1}, order_ms=1_750_000_000_000, job_id="j1")
    assert job.id == "j1" and job.status == "waiting" and job.data == {"a": 1}
    h = r.hgetall(f"{gq.ns}:job:j1")
    seq = int(h["seq"])
    assert h["groupId"] == "user:42" and h["data"] == '{"a":1}' and h["attempts"] == "0"
    assert h["maxAttempts"] == "3" and h["orderMs"] == "1750000000000" and h["status"] == "waiting"
    assert h["delayUntil"] == "0"
    assert int(h["score"]) == (1_750_000_000_000 - 1704067200000) * 1000 + seq
    assert r.zscore(f"{gq.ns}:g:user:42", "j1") == int(h["score"])
    assert r.zscore(f"{gq.ns}:ready", "user:42") == int(h["score"])
    assert r.smembers(f"{gq.ns}:groups") == {"user:42"}
    assert r.get(f"{gq.ns}:unique:j1") == "j1"


def test_group_order_is_order_ms_then_submission(gq, r):
    gq.add(group_id="g", data=1, order_ms=2000, job_id="late")
    gq.add(group_id="g", data=2, order_ms=1000, job_id="early-a")
    gq.add(group_id="g", data=3, order_ms=1000, job_id="early-b")
    assert r.zrange(f"{gq.ns}:g:g", 0, -1) == ["early-a", "early-b", "late"]


def test_same_job_id_is_not_added_twice(gq, r):
    first = gq.add(group_id="g", data={"v": 1}, job_id="once")
    again = gq.add(group_id="g", data={"v": 2}, job_id="once")
    assert first.id == again.id == "once"
    assert again.data == {"v": 1}
    assert r.zcard(f"{gq.ns}:g:g") == 1


@pytest.mark.parametrize("kwargs, error", [
    ({}, GroupOptionError),
    ({"data": {"a": 1}}, GroupOptionError),
    ({"group_id": ""}, GroupOptionError),
    ({"group_id": "   "}, GroupOptionError),
    ({"group_id": None}, GroupOptionError),
    ({"group_id": 7}, GroupOptionError),
    ({"group_id": "g", "data": {"x": object()}}, GroupDataError),
    ({"group_id": "g", "data": float("nan")}, GroupDataError),
    ({"group_id": "g", "repeat": {"every": 0}}, GroupOptionError),
    ({"group_id": "g", "repeat": {"pattern": "not a cron"}}, GroupOptionError),
    ({"group_id": "g", "repeat": {"every": 5, "pattern": "* * * * *"}}, GroupOptionError),
    ({"group_id": "g", "repeat": {"hourly": True}}, GroupOptionError),
    ({"group_id": "g", "repeat": {"every": 5}, "delay": 1}, GroupOptionError),
    ({"group_id": "g", "delay": -1}, GroupOptionError),
    ({"group_id": "g", "delay": 1, "run_at": time.time()}, GroupOptionError),
    ({"group_id": "g", "run_at": datetime(2030, 1, 1)}, GroupOptionError),   # naive
    ({"group_id": "g", "max_attempts": 0}, GroupOptionError),
    ({"group_id": "g", "job_id": ""}, GroupOptionError),
    ({"group_id": "g", "order_ms": "soon"}, GroupOptionError),
])
def test_bad_input_raises_and_writes_nothing(gq, r, kwargs, error):
    with pytest.raises(error) as info:
        gq.add(**kwargs)
    assert isinstance(info.value, errors.OrijsError)
    assert keys_of(r, gq) == []


def test_bad_durations_raise_library_errors(gq):
    with pytest.raises(GroupOptionError):
        gq.wait_for_empty(-1)
    with pytest.raises(errors.InvalidArgumentType, match="seconds"):
        gq.change_delay("x", "soon")
    with pytest.raises(GroupOptionError):
        GroupWorker(gq, print, stalled_interval=0)
    with pytest.raises(GroupOptionError):
        GroupWorker(gq, print, concurrency=0)
    with pytest.raises(errors.InvalidArgument, match="handler"):
        GroupWorker(gq, "not callable")        # a string is an import name: not one
    worker = GroupWorker(gq, print)
    with pytest.raises(GroupOptionError):
        worker.close(timeout=-1)
    worker.close()


def test_bad_queue_options(redis_url):
    for kwargs in ({"ordering": "random"}, {"ordering": "scheduler"},
                   {"ordering": "none", "ordering_window": 1}, {"job_timeout": 0},
                   {"keep_completed": -1}, {"max_attempts": 0}):
        with pytest.raises(GroupOptionError):
            GroupQueue("bad", connection=redis_url, **kwargs)


def test_getters_and_counts(gq):
    gq.add(group_id="a", data=1, job_id="a1")
    gq.add(group_id="a", data=2, job_id="a2")
    gq.add(group_id="b", data=3, job_id="b1", delay=60)
    counts = gq.get_job_counts()
    assert counts["waiting"] == 3 and counts["delayed"] == 1 and counts["active"] == 0
    assert counts["groups"] == 2
    assert gq.get_unique_groups() == ["a", "b"]
    assert gq.get_group_job_count("a") == 2
    job = gq.get_job("b1")
    assert job.status == "delayed" and job.group_id == "b" and job.data == 3
    assert gq.get_job("a1").status == "waiting"
    assert gq.get_job("nope") is None
    assert not gq.is_empty()
    assert gq.wait_for_empty(0.3) is False


def test_remove_update_change_delay_promote(gq, r):
    gq.add(group_id="g", data={"v": 1}, job_id="x")
    gq.add(group_id="g", data={"v": 2}, job_id="y")
    gq.update_data("x", {"v": 10})
    assert gq.get_job("x").data == {"v": 10}
    gq.change_delay("x", 60)
    job = gq.get_job("x")
    assert job.status == "delayed"
    assert r.zscore(f"{gq.ns}:ready", "g") is None        # a delayed head holds its group
    gq.promote("x")
    assert gq.get_job("x").status == "waiting"
    assert r.zscore(f"{gq.ns}:ready", "g") is not None
    assert gq.remove("x") is True and gq.remove("x") is False
    assert gq.get_job("x") is None
    assert r.zrange(f"{gq.ns}:g:g", 0, -1) == ["y"]
    with pytest.raises(errors.JobNotFound):
        gq.update_data("x", {})
    with pytest.raises(errors.JobNotFound):
        gq.change_delay("x", 1)
    with pytest.raises(errors.InvalidStateError):
        gq.retry("y")                                       # not failed


def test_run_at_and_delay(gq, r):
    at = datetime.now(timezone.utc) + timedelta(seconds=30)
    gq.add(group_id="g", data=1, job_id="at", run_at=at)
    assert abs(r.zscore(f"{gq.ns}:delayed", "at") - at.timestamp() * 1000) < 5
    stored = gq.get_job("at")
    assert stored.created_at == datetime.fromtimestamp(stored.timestamp / 1000, timezone.utc)
    assert stored.processed_at is None and stored.finished_at is None
    gq.add(group_id="g", data=1, job_id="d", delay=timedelta(seconds=10))
    assert r.hget(f"{gq.ns}:job:d", "status") == "delayed"


def test_repeat_is_stored_as_groupmq_does(gq, r):
    job = gq.add(group_id="reports", data={"t": 1}, repeat={"every": 5})
    assert job.id.startswith("repeat:reports:{\"every\":5000}:")
    repeat_key = r.get(f'{gq.ns}:repeat:lookup:reports:{{"every":5000}}')
    assert job.id == f"repeat:{repeat_key}"
    assert r.zscore(f"{gq.ns}:repeat:schedule", repeat_key) is not None
    assert gq.remove_repeating_job("reports", {"every": 5}) is True
    assert gq.remove_repeating_job("reports", {"every": 5}) is False
    assert r.zcard(f"{gq.ns}:repeat:schedule") == 0


def test_scheduler_runs_a_repeat_once_per_period(gq, r, redis_url, gname):
    gq.add(group_id="rep", data={"t": 1}, repeat={"every": 0.2})
    others = [GroupQueue(gname, connection=redis_url) for _ in range(3)]
    try:
        time.sleep(0.25)
        ran = sum(q.run_scheduler_once() for q in [gq] + others)
        assert ran == 1
        assert sum(q.run_scheduler_once() for q in [gq] + others) == 0   # not due again yet
        assert gq.get_group_job_count("rep") == 1
    finally:
        for q in others:
            q.close()


def test_two_schedulers_reading_the_same_due_repeat_add_one_run(gq, r):
    gq.add(group_id="rep", data={"t": 1}, repeat={"every": 0.05})
    time.sleep(0.1)
    (repeat_key,) = r.zrange(f"{gq.ns}:repeat:schedule", 0, -1)
    text = r.get(f"{gq.ns}:repeat:{repeat_key}")
    now = int(time.time() * 1000)

    def run(job_id: str) -> int:       # what each scheduler sends after reading `text`
        return gq.run_script("repeat_run", repeat_key, text, text.replace("false", "false "),
                             now + 50, now, job_id, 0, "rep", '{"t":1}', 3, now)
    assert [run("first"), run("second")] == [1, 0]
    assert r.zrange(f"{gq.ns}:g:rep", 0, -1) == ["first"]


def test_cron_repeat_next_run_and_six_field_patterns(gq, r):
    from orijs_sync.groups._repeat import next_run
    start = int(datetime(2026, 1, 5, 8, 59, 30, tzinfo=timezone.utc).timestamp() * 1000)
    nxt = next_run({"pattern": "*/5 * * * *"}, start)
    assert nxt > start and (nxt // 1000) % 300 == 0 and nxt - start <= 300_000
    assert next_run({"every": 1500}, start) == start + 1500
    job = gq.add(group_id="c", data=None, repeat={"pattern": "*/10 * * * * *"})   # seconds first
    repeat_key = job.id[len("repeat:"):]
    due = r.zscore(f"{gq.ns}:repeat:schedule", repeat_key)
    assert 0 < due - time.time() * 1000 <= 10_000


def test_queue_made_before_a_fork_adds_from_the_child(gq):
    import os
    gq.add(group_id="f", data={"who": "parent"}, job_id="p")      # the parent's pool is in use
    pid = os.fork()
    if pid == 0:                                                   # the child: exit code says
        try:
            gq.add(group_id="f", data={"who": "child"}, job_id="c")
            os._exit(0)
        except BaseException:                                     # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert gq.get_job("c").data == {"who": "child"}
    gq.add(group_id="f", data={"who": "parent again"}, job_id="p2")
    assert gq.get_group_job_count("f") == 3


def test_get_jobs_by_state(gq):
    gq.add(group_id="a", data=1, job_id="a1", order_ms=1)
    gq.add(group_id="a", data=2, job_id="a2", order_ms=2)
    gq.add(group_id="b", data=3, job_id="b1", delay=60)
    assert [j.id for j in gq.get_jobs("waiting")] == ["a1", "a2", "b1"]
    assert [j.id for j in gq.get_jobs("waiting", limit=1)] == ["a1"]
    assert [(j.id, j.status) for j in gq.get_jobs("delayed")] == [("b1", "delayed")]
    gq.run_script("reserve", int(time.time() * 1000), 10_000, 5, "", "t", 100)
    assert [j.id for j in gq.get_jobs("active")] == ["a1"]
    assert gq.get_jobs("completed") == [] and gq.get_jobs("failed") == []
    with pytest.raises(GroupOptionError):
        gq.get_jobs("paused")
