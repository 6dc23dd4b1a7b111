"""Points in time: ``run_at=`` (a timezone-aware datetime) holds a job until then, as
the delayed score BullMQ reads; the times a job or a scheduler holds read back as aware
UTC datetimes equal to the stored milliseconds."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from orijs_sync import FlowProducer, Queue, Tasks, Worker, errors

GUARD = 30.0


def _ms(moment: datetime) -> int:
    return int(round(moment.timestamp() * 1000))


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, timezone.utc)


def _due(r, queue: Queue, job_id: str) -> int:
    """The ms a delayed job becomes due: its score without the low 12 sequence bits."""
    score = r.zscore(queue.keys.key("delayed"), job_id)
    assert score is not None, f"job {job_id} is not delayed"
    return int(score) // 0x1000


def test_run_at_is_the_delayed_score(queue, r):
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    job = queue.add("report", {"n": 1}, run_at=at)
    assert queue.get_job_state(job.id) == "delayed"
    assert _due(r, queue, job.id) == _ms(at) == job.timestamp + job.delay
    elsewhere = at.astimezone(timezone(timedelta(hours=5, minutes=30)))   # the same moment
    other = queue.add("report", {"n": 2}, run_at=elsewhere)
    assert _due(r, queue, other.id) == _ms(at)
    stored = queue.get_job(job.id)
    assert stored.timestamp + stored.delay == _ms(at)


def test_run_at_in_add_bulk_a_flow_and_a_task(queue, r, redis_url, qname):
    at = datetime.now(timezone.utc) + timedelta(minutes=10)
    bulk = queue.add_bulk([{"name": "a", "data": {}, "opts": {"run_at": at}},
                           {"name": "b", "data": {}}])
    assert _due(r, queue, bulk[0].id) == _ms(at)
    assert queue.get_job_state(bulk[1].id) == "waiting"
    with FlowProducer(redis_url) as flows:
        node = flows.add({"name": "root", "queue_name": qname, "opts": {"run_at": at}})
    assert _due(r, queue, node.job.id) == _ms(at)
    with Tasks(connection=redis_url) as tasks:
        @tasks.task(queue=qname)
        def ping() -> str:
            return "pong"
        applied = ping.apply({}, run_at=at)
    assert _due(r, queue, applied.id) == _ms(at)


def test_a_past_run_at_runs_now_and_a_call_s_run_at_replaces_a_default_delay(redis_url, qname,
                                                                              r):
    with Queue(qname, redis_url, default_job_options={"delay": 60}) as queue:
        past = queue.add("x", run_at=datetime(2001, 1, 1, tzinfo=timezone.utc))
        assert queue.get_job_state(past.id) == "waiting"
        at = datetime.now(timezone.utc) + timedelta(minutes=5)
        assert _due(r, queue, queue.add("x", run_at=at).id) == _ms(at)


@pytest.mark.parametrize("opts, message", [
    ({"run_at": datetime(2030, 1, 1)}, "run_at must be a timezone-aware datetime"),
    ({"run_at": "tomorrow"}, "run_at must be a timezone-aware datetime or epoch seconds"),
    ({"run_at": datetime(2030, 1, 1, tzinfo=timezone.utc), "delay": 5},
     "run_at is given with delay"),
])
def test_a_bad_run_at_is_refused_before_anything_is_written(queue, opts, message):
    with pytest.raises(errors.ValidationError, match=message):
        queue.add("x", {}, **opts)
    with pytest.raises(errors.ValidationError, match=message):
        queue.add_bulk([{"name": "x", "opts": opts}])
    assert queue.count() == 0


def test_run_at_is_no_default_nor_a_scheduler_s(redis_url, qname, queue):
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(errors.InvalidArgument, match="default_job_options.run_at"):
        Queue(qname, redis_url, default_job_options={"run_at": at})
    with pytest.raises(errors.InvalidArgument, match="run_at"):
        queue.upsert_job_scheduler("s", every=60, template={"opts": {"run_at": at}})
    assert queue.get_job_schedulers_count() == 0


def test_job_times_are_utc_datetimes_equal_to_the_stored_ms(queue, events, redis_url, qname):
    job = queue.add("x", {"n": 1})
    assert job.created_at == _utc(job.timestamp) and job.created_at.tzinfo == timezone.utc
    assert job.processed_at is None and job.finished_at is None
    with Worker(qname, lambda j: j.data["n"], connection=redis_url):
        assert job.wait_until_finished(events, timeout=GUARD) == 1
    done = queue.get_job(job.id)
    assert done.processed_on is not None and done.finished_on is not None
    assert done.processed_at == _utc(done.processed_on)
    assert done.finished_at == _utc(done.finished_on)
    assert _ms(done.finished_at) == done.finished_on
    assert done.finished_at.utcoffset() == timedelta(0)
    assert done.created_at <= done.processed_at <= done.finished_at


def test_a_scheduler_s_next_run_as_a_datetime(queue):
    queue.upsert_job_scheduler("tick", every=60, template={"name": "tick"})
    info = queue.get_job_scheduler("tick")
    assert info is not None and info.next is not None
    assert info.next_at == _utc(info.next) and info.next_at.tzinfo == timezone.utc
