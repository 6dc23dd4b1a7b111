"""Job schedulers on real Redis: layout, runs, one series per id, validation."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, List
from zoneinfo import ZoneInfo

import pytest

from orijs_sync import Queue, Worker
from orijs_sync.job_scheduler import JobSchedulerInfo, cron_next_millis, schedule_next

from sched_helpers import Runs, pending_runs, run_millis, wait_until

HOUR = 3600.0


def test_every_scheduler_is_stored_as_bullmq_stores_it(queue, qname, r):
    job = queue.upsert_job_scheduler("report", every=HOUR,
                                     template={"name": "build-report", "data": {"kind": "daily"},
                                               "opts": {"attempts": 3}})
    assert job is not None
    millis = run_millis(job.id)
    assert job.id == f"repeat:report:{millis}" and job.name == "build-report"
    assert r.zscore(f"bull:{qname}:repeat", "report") == millis
    stored = r.hgetall(f"bull:{qname}:repeat:report")
    assert stored["name"] == "build-report" and stored["every"] == "3600000"
    assert stored["ic"] == "1" and int(stored["offset"]) == millis % 3600000
    assert json.loads(stored["data"]) == {"kind": "daily"}
    assert json.loads(stored["opts"]) == {"attempts": 3}
    run = r.hgetall(f"bull:{qname}:{job.id}")
    assert run["rjk"] == "report" and run["name"] == "build-report"
    assert json.loads(run["data"]) == {"kind": "daily"}
    opts = json.loads(run["opts"])
    assert opts["jobId"] == job.id and opts["repeatJobKey"] == "report" and opts["attempts"] == 3
    assert opts["repeat"] == {"every": 3600000, "count": 1, "offset": millis % 3600000}
    # The first run of an "every" scheduler starts at once.
    assert pending_runs(r, qname) == [job.id] and r.lrange(f"bull:{qname}:wait", 0, -1) == [job.id]
    entries = [f for _, f in r.xrange(f"bull:{qname}:events")]
    assert {"event": "added", "jobId": job.id, "name": "build-report"} in entries


def test_cron_scheduler_waits_for_its_first_tick(queue, qname, r):
    job = queue.upsert_job_scheduler("nightly", pattern="30 2 * * *", tz="Europe/Paris",
                                     template={"data": {"n": 1}})
    millis = run_millis(job.id)
    paris = datetime.fromtimestamp(millis / 1000, ZoneInfo("Europe/Paris"))
    assert (paris.hour, paris.minute, paris.second) == (2, 30, 0)
    assert job.name == "nightly"  # the template name defaults to the scheduler id
    assert r.zrange(f"bull:{qname}:delayed", 0, -1) == [job.id]
    stored = r.hgetall(f"bull:{qname}:repeat:nightly")
    assert stored["pattern"] == "30 2 * * *" and stored["tz"] == "Europe/Paris"
    assert "every" not in stored and "opts" not in stored
    info = queue.get_job_scheduler("nightly")
    assert info == JobSchedulerInfo(id="nightly", name="nightly", next=millis,
                                    pattern="30 2 * * *", tz="Europe/Paris", iteration_count=1,
                                    template={"data": {"n": 1}})


def test_runs_are_one_per_period_with_many_workers(queue, qname, r, redis_url):
    runs = Runs()
    queue.upsert_job_scheduler("tick", every=0.2, template={"data": {"x": 1}})
    workers = [Worker(qname, runs, connection=redis_url, concurrency=2) for _ in range(3)]
    try:
        for worker in workers:
            worker.start()
        wait_until(lambda: len(runs) >= 6, what="six runs")
    finally:
        for worker in workers:
            worker.close()
    info = queue.get_job_scheduler("tick")
    millis = [run_millis(i) for i in runs.ids]
    assert len(set(millis)) == len(millis), "a period ran twice"
    assert all(m % 200 == info.offset for m in millis), "a run left the series' slots"
    assert all(job.data == {"x": 1} and job.name == "tick" for job in runs.jobs)
    # Exactly one next run is pending, and the scheduler points at it.
    assert pending_runs(r, qname) == [f"repeat:tick:{info.next}"]
    assert info.iteration_count == len(millis) + 1  # every run taken, plus the pending one


def test_many_producers_and_workers_make_one_series(queue, qname, r, redis_url):
    runs = Runs()
    stop = threading.Event()
    errors: List[BaseException] = []

    def producer() -> None:
        with Queue(qname, connection=redis_url) as mine:
            while not stop.is_set():
                try:
                    mine.upsert_job_scheduler("beat", every=0.15, template={"data": {"v": 2}})
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                    return
                time.sleep(0.01)

    queue.upsert_job_scheduler("beat", every=0.15, template={"data": {"v": 2}})
    producers = [threading.Thread(target=producer) for _ in range(3)]
    workers = [Worker(qname, runs, connection=redis_url, concurrency=2) for _ in range(2)]
    try:
        for worker in workers:
            worker.start()
        for thread in producers:
            thread.start()
        wait_until(lambda: len(runs) >= 8 or bool(errors), what="eight runs")
    finally:
        stop.set()
        for thread in producers:
            thread.join(10)
        for worker in workers:
            worker.close()
    assert errors == []
    info = queue.get_job_scheduler("beat")
    millis = [run_millis(i) for i in runs.ids]
    assert len(set(millis)) == len(millis), "a period ran twice"
    assert all(m % 150 == info.offset for m in millis)
    assert queue.get_job_schedulers_count() == 1
    assert pending_runs(r, qname) == [f"repeat:beat:{info.next}"]


PRODUCER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from orijs_sync import Queue
    url, name, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    with Queue(name, connection=url) as queue:
        while not go.exists():
            time.sleep(0.005)
        ids = set()
        for _ in range(30):
            ids.add(queue.upsert_job_scheduler("shared", every=60,
                                               template={"data": {"from": "process"}}).id)
        print(" ".join(sorted(ids)))
""")


def test_two_processes_upserting_one_id_make_one_series(queue, qname, r, redis_url, tmp_path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", PRODUCER, redis_url, qname, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        go.touch()
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
    assert [p.returncode for p in procs] == [0, 0], outputs
    ids = {job_id for out, _ in outputs for job_id in out.split()}
    assert queue.get_job_schedulers_count() == 1
    info = queue.get_job_scheduler("shared")
    # Every upsert replaced the pending run in place: one run, the scheduler's next.
    assert pending_runs(r, qname) == [f"repeat:shared:{info.next}"]
    assert [k for k in r.scan_iter(match=f"bull:{qname}:repeat:shared:*")] == \
        [f"bull:{qname}:repeat:shared:{info.next}"]
    assert info.template == {"data": {"from": "process"}}
    assert ids == {f"repeat:shared:{info.next}"}  # both processes wrote the same run


def test_upsert_replaces_the_pending_run(queue, qname, r):
    first = queue.upsert_job_scheduler("s", every=HOUR, template={"data": {"v": 1}})
    again = queue.upsert_job_scheduler("s", every=HOUR, template={"data": {"v": 2}})
    assert again.id == first.id  # same slot, new content
    assert pending_runs(r, qname) == [first.id]
    assert json.loads(r.hget(f"bull:{qname}:{first.id}", "data")) == {"v": 2}
    cron = queue.upsert_job_scheduler("s", pattern="0 0 1 1 *", template={"data": {"v": 3}})
    assert pending_runs(r, qname) == [cron.id] and cron.id != first.id
    assert not r.exists(f"bull:{qname}:{first.id}")
    stored = r.hgetall(f"bull:{qname}:repeat:s")
    assert stored["pattern"] == "0 0 1 1 *" and "every" not in stored
    assert queue.get_job_schedulers_count() == 1


def test_next_runs_carry_the_template_and_count_iterations(queue, qname, redis_url):
    runs = Runs()
    queue.upsert_job_scheduler("t", every=0.1, template={
        "name": "work", "data": {"a": [1, 2]}, "opts": {"attempts": 4, "priority": 3,
                                                       "remove_on_complete": {"count": 100}}})
    with Worker(qname, runs, connection=redis_url):
        wait_until(lambda: len(runs) >= 3)
    for count, job in enumerate(runs.jobs[:3], start=1):
        assert job.name == "work" and job.data == {"a": [1, 2]}
        assert job.opts["attempts"] == 4 and job.opts["priority"] == 3
        assert job.opts["removeOnComplete"] == {"count": 100}
        assert job.opts["repeat"]["count"] == count and job.opts["repeat"]["every"] == 100
        assert job.repeat_job_key == "t"


def test_limit_caps_the_number_of_runs(queue, qname, r, redis_url):
    runs = Runs()
    queue.upsert_job_scheduler("three", every=0.05, limit=3)
    with Worker(qname, runs, connection=redis_url):
        wait_until(lambda: len(runs) == 3 and pending_runs(r, qname) == []
                   and queue.get_job_counts("completed")["completed"] == 3)
    assert queue.get_job_scheduler("three").limit == 3
    assert queue.get_job_scheduler("three").next == run_millis(runs.ids[-1])


def test_six_field_cron_reads_seconds_first(queue, qname, redis_url):
    runs = Runs()
    queue.upsert_job_scheduler("secs", pattern="* * * * * *")
    with Worker(qname, runs, connection=redis_url):
        wait_until(lambda: len(runs) >= 2)
    millis = [run_millis(i) for i in runs.ids]
    assert all(m % 1000 == 0 for m in millis) and len(set(millis)) == len(millis)


def test_remove_job_scheduler(queue, qname, r, redis_url):
    job = queue.upsert_job_scheduler("gone", every=HOUR, start_date=datetime.now() + timedelta(hours=1))
    assert r.zrange(f"bull:{qname}:delayed", 0, -1) == [job.id]
    assert queue.remove_job_scheduler("gone") is True
    assert queue.get_job_scheduler("gone") is None and pending_runs(r, qname) == []
    assert not r.exists(f"bull:{qname}:{job.id}") and not r.exists(f"bull:{qname}:repeat:gone")
    entries = [f for _, f in r.xrange(f"bull:{qname}:events")]
    assert {"event": "removed", "jobId": job.id, "prev": "delayed"} in entries
    assert queue.remove_job_scheduler("gone") is False


def test_the_next_run_is_scheduled_once_and_not_after_removal(queue, qname, r, redis_url):
    started, release = threading.Event(), threading.Event()

    def handler(job: Any) -> Any:
        started.set()
        release.wait(20)
        return "done"

    first = queue.upsert_job_scheduler("busy", every=HOUR)
    with Worker(qname, handler, connection=redis_url):
        assert started.wait(20)
        # Taking the first run scheduled the second, once.
        wait_until(lambda: len(pending_runs(r, qname)) == 1)
        second = pending_runs(r, qname)[0]
        assert run_millis(second) == run_millis(first.id) + 3_600_000
        taken = queue.get_job(first.id)
        assert schedule_next(taken) is None  # e.g. a stalled run taken again: no second copy
        assert pending_runs(r, qname) == [second]
        assert queue.remove_job_scheduler("busy") is True
        assert pending_runs(r, qname) == []
        assert schedule_next(taken) is None  # the scheduler is gone: nothing more
        release.set()
        wait_until(lambda: queue.get_job_counts("completed")["completed"] == 1)
    assert pending_runs(r, qname) == [] and queue.get_job_schedulers() == []


def test_start_date_delays_the_first_every_run(queue, qname, r):
    start = datetime.now(timezone.utc) + timedelta(minutes=10)
    job = queue.upsert_job_scheduler("later", every=60, start_date=start)
    assert run_millis(job.id) == int(round(start.timestamp() * 1000))
    assert r.zrange(f"bull:{qname}:delayed", 0, -1) == [job.id]
    assert queue.get_job_scheduler("later").start_date == run_millis(job.id)


def test_get_job_schedulers_orders_by_next_run(queue):
    queue.upsert_job_scheduler("soon", every=HOUR, start_date=datetime.now() + timedelta(minutes=5))
    queue.upsert_job_scheduler("late", every=HOUR, start_date=datetime.now() + timedelta(days=5))
    queue.upsert_job_scheduler("mid", pattern="0 0 * * *",
                               start_date=datetime.now() + timedelta(days=1))
    assert [s.id for s in queue.get_job_schedulers(asc=True)] == ["soon", "mid", "late"]
    assert [s.id for s in queue.get_job_schedulers()] == ["late", "mid", "soon"]
    assert [s.id for s in queue.get_job_schedulers(0, 0)] == ["late"]
    assert queue.get_job_schedulers_count() == 3
    assert queue.get_job_scheduler("nope") is None


def test_end_date_before_the_first_tick_adds_nothing(queue, namespace, r):
    first_tick = cron_next_millis("0 0 1 1 *", int(time.time() * 1000), tz="UTC")
    assert queue.upsert_job_scheduler("never", pattern="0 0 1 1 *", tz="UTC",
                                      end_date=first_tick - 1) is None
    assert list(r.scan_iter(match=f"*{namespace}*")) == []


@pytest.mark.parametrize("kwargs", [
    {},
    {"every": 10, "pattern": "* * * * *"},
    {"every": 0},
    {"every": -1},
    {"every": timedelta(0)},
    {"every": "10"},
    {"every": 0.0001},
    {"pattern": "61 * * * *"},
    {"pattern": "* * * *"},
    {"pattern": "* * * * * * *"},
    {"pattern": "not a cron"},
    {"pattern": ""},
    {"pattern": "* * * * *", "tz": "Mars/Olympus"},
    {"every": 10, "limit": 0},
    {"every": 10, "end_date": 1_000},          # ms since the epoch: 1970
    {"every": 10, "end_date": datetime(2001, 1, 1)},
    {"every": 10, "template": {"name": ""}},
    {"every": 10, "template": {"data": {"x": object()}}},
    {"every": 10, "template": {"opts": {"job_id": "mine"}}},
    {"every": 10, "template": {"opts": {"delay": 5}}},
    {"every": 10, "template": {"opts": {"priority": -2}}},
    {"every": 10, "template": {"opts": {"no_such_option": 1}}},
    {"every": 10, "template": {"nme": "typo"}},
])
def test_bad_input_raises_and_writes_nothing(queue, namespace, r, kwargs):
    with pytest.raises((ValueError, TypeError)):
        queue.upsert_job_scheduler("bad", **kwargs)
    assert list(r.scan_iter(match=f"*{namespace}*")) == []


def test_scheduler_id_must_be_a_string(queue):
    with pytest.raises(ValueError):
        queue.upsert_job_scheduler("", every=1)
    with pytest.raises(ValueError):
        queue.upsert_job_scheduler(7, every=1)  # type: ignore[arg-type]


def test_cron_next_millis():
    base = int(datetime(2030, 3, 10, 12, 0, 0, tzinfo=timezone.utc).timestamp() * 1000)
    assert cron_next_millis("15 * * * *", base, tz="UTC") == base + 15 * 60_000
    assert cron_next_millis("30 * * * * *", base, tz="UTC") == base + 30_000  # seconds first
    assert cron_next_millis("0 9 * * *", base, tz="America/New_York") == \
        int(datetime(2030, 3, 10, 13, 0, tzinfo=timezone.utc).timestamp() * 1000)  # EDT
    later = base + 3 * 3_600_000
    assert cron_next_millis("0 * * * *", base, tz="UTC", start_date=later) == later + 3_600_000
    assert cron_next_millis("0 * * * *", base, tz="UTC", end_date=base + 1000) is None
    assert cron_next_millis("0 * * * *", base + 1, tz="UTC") == base + 3_600_000


@pytest.mark.parametrize("field,value", [("every", "nan"), ("offset", "nan"), ("ic", "abc"),
                                         ("limit", "abc"), ("endDate", "1e400")])
def test_a_corrupted_scheduler_field_stops_neither_its_runs_nor_the_listing(
        queue, qname, r, redis_url, field, value):
    """A field of the scheduler's hash another program wrote that is no number: the next
    run was never scheduled (a NaN score, a counter HINCRBY refuses) and
    ``get_job_schedulers`` raised for every scheduler of the queue. The runs go on
    (the run's own options still say "every") and the field reads as unset."""
    queue.upsert_job_scheduler("tick", every=0.1, template={"data": {"n": 1}})
    r.hset(f"bull:{qname}:repeat:tick", field, value)
    ran: List[str] = []
    with Worker(qname, lambda job: ran.append(job.id), connection=redis_url):
        wait_until(lambda: len(ran) >= 3, timeout=10, what="three runs")
    info = queue.get_job_schedulers()
    assert [i.id for i in info] == ["tick"]
    attr = {"every": "every", "offset": "offset", "ic": "iteration_count", "limit": "limit",
            "endDate": "end_date"}[field]
    restarted = r.hget(f"bull:{qname}:repeat:tick", "ic") if field == "ic" else None
    assert getattr(info[0], attr) == (None if restarted is None else int(restarted))
