"""GroupMQ's queue and job methods on real Redis: counts and id lists per state,
completed/failed job lists, clean, promote/recover, and the per-job methods
(remove, retry, promote, change_delay, update_data/update, get_state, to_json)."""
from __future__ import annotations

import time

import pytest

from orijs_sync import errors
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.groups._options import GroupOptionError
from orijs_sync.testing import wait_until


def _finish(gq: GroupQueue, fail_ids=()) -> None:
    def handler(job):
        if job.id in fail_ids:
            raise RuntimeError("boom")
        return job.id
    with GroupWorker(gq, handler, backoff=0):
        assert gq.wait_for_empty(30)


@pytest.fixture
def kept(redis_url: str, gname: str):
    queue = GroupQueue(gname, connection=redis_url, keep_completed=10, keep_failed=10,
                       max_attempts=1)
    yield queue
    queue.close()


def test_counts_and_id_lists(gq: GroupQueue) -> None:
    gq.add(group_id="a", data={}, job_id="w1")
    gq.add(group_id="a", data={}, job_id="w2")
    gq.add(group_id="b", data={}, job_id="d1", delay=60)
    assert gq.get_waiting_jobs() == ["w1", "w2", "d1"]     # GroupMQ's: jobs in groups
    assert gq.get_delayed_jobs() == ["d1"] and gq.get_delayed_count() == 1
    assert gq.get_active_jobs() == [] and gq.get_active_count() == 0
    assert gq.get_waiting_count() == gq.get_job_counts()["waiting"] == 3
    assert gq.get_unique_groups_count() == 2
    assert gq.get_completed_count() == 0 and gq.get_failed_count() == 0


def test_completed_failed_lists_and_clean(kept: GroupQueue) -> None:
    for i in range(3):
        kept.add(group_id="g", data={"i": i}, job_id=f"ok{i}")
    kept.add(group_id="h", data={}, job_id="bad")
    _finish(kept, fail_ids={"bad"})
    assert kept.get_completed_count() == 3 and kept.get_failed_count() == 1
    assert [j.id for j in kept.get_completed_jobs(2)] == ["ok2", "ok1"]
    assert [j.id for j in kept.get_failed_jobs()] == ["bad"]
    assert kept.clean("completed", grace=3600) == 0          # none that old
    assert kept.clean("completed", grace=0, limit=2) == 2
    left = [j.id for j in kept.get_completed_jobs()]
    assert len(left) == 1 and kept.get_job(left[0]) is not None
    assert sum(kept.get_job(f"ok{i}") is None for i in range(3)) == 2
    assert kept.clean("failed") == 1 and kept.get_job("bad") is None


def test_clean_delayed_keeps_the_group_consistent(gq: GroupQueue) -> None:
    gq.add(group_id="g", data={}, job_id="late", delay=0.05)
    gq.add(group_id="g", data={}, job_id="future", delay=600)
    time.sleep(0.2)                                  # "late" is due (nothing promotes it)
    assert gq.clean("delayed", grace=0.1) == 1
    assert gq.get_job("late") is None and gq.get_group_job_count("g") == 1
    assert gq.clean("delayed") == 0


@pytest.mark.parametrize("args", [("waiting",), ("active",), ("completed", -1),
                                  ("completed", 0, 0), ("completed", 0, "x")])
def test_clean_validates(gq: GroupQueue, args) -> None:
    gq.add(group_id="g", data={}, job_id="x1")
    with pytest.raises(GroupOptionError):
        gq.clean(*args)
    assert gq.get_job("x1") is not None


def test_promote_delayed_and_recover_groups(gq: GroupQueue) -> None:
    gq.add(group_id="g", data={}, job_id="soon", delay=0.05)
    wait_until(lambda: gq.promote_delayed_jobs() == 1 or gq.get_job("soon").status
               == "waiting", 30)
    assert gq.get_job("soon").status == "waiting"
    gq.client.zrem(gq.key("ready"), "g")                     # a group left out of ready
    assert gq.recover_delayed_groups() == 1
    assert gq.client.zscore(gq.key("ready"), "g") is not None


def test_job_methods(kept: GroupQueue) -> None:
    job = kept.add(group_id="g", data={"v": 1}, job_id="j1", delay=600)
    assert job.get_state() == "delayed"
    job.promote()
    assert job.get_state() == "waiting"
    job.change_delay(600)
    assert kept.get_job("j1").status == "delayed"
    job.update_data({"v": 2})
    assert kept.get_job("j1").data == {"v": 2} and job.data == {"v": 2}
    job.update({"v": 3})
    assert kept.get_job("j1").data == {"v": 3}
    with pytest.raises(errors.OrijsError):
        job.update_data({"bad": object()})
    assert job.to_json()["id"] == "j1" and "queue" not in job.to_json()
    assert job.remove() is True and job.get_state() == "unknown"
    kept.add(group_id="h", data={}, job_id="f1")
    _finish(kept, fail_ids={"f1"})
    failed = kept.get_job("f1")
    assert failed.get_state() == "failed"
    failed.retry()
    assert failed.get_state() == "waiting"
