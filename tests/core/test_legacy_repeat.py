"""Legacy repeatable jobs (BullMQ's deprecated opts.repeat): Python lists and removes
the ones a Node service added, and refuses to add them (job schedulers replace them).

The layouts here are written as BullMQ 5 (and BullMQ 3) write them; the interop tests
(tests/interop/test_interop_getters.py) check the same against a real Node BullMQ."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import pytest

from orijs_sync import Queue, errors

NEXT = 4_102_444_800_000      # 2100-01-01, ms


def md5(text):
    return hashlib.md5(text.encode()).hexdigest()


def add_legacy(r, queue, name, fields, joined, next_millis=NEXT, stored_key=None):
    """A repeatable job as BullMQ stores it: the repeat zset entry (its md5 key, or
    ``stored_key``), its hash (none for a BullMQ 3 key) and its delayed next run."""
    key = stored_key or md5(joined)
    r.zadd(queue.keys.repeat, {key: next_millis})
    if fields:
        r.hset(f"{queue.keys.repeat}:{key}", mapping={"name": name, **fields})
    run_id = (f"repeat:{key}:{next_millis}" if stored_key is None else
              f"repeat:{md5(name + key.split(':')[1] + md5(key))}:{next_millis}")
    r.hset(queue.keys.job(run_id), mapping={"name": name, "data": "{}", "opts": "{}",
                                            "timestamp": 0, "delay": 0, "priority": 0,
                                            "rjk": key})
    r.rpush(queue.keys.logs(run_id), "a line")
    r.zadd(queue.keys.delayed, {run_id: next_millis * 4096})
    return key, run_id


def gone(r, queue, key, run_id):
    return (r.zscore(queue.keys.repeat, key) is None
            and not r.exists(f"{queue.keys.repeat}:{key}", queue.keys.job(run_id),
                             queue.keys.logs(run_id))
            and r.zscore(queue.keys.delayed, run_id) is None)


def removed_events(r, queue):
    return [f["jobId"] for _, f in r.xrange(queue.keys.events) if f["event"] == "removed"]


def test_adding_with_repeat_is_refused_and_points_to_job_schedulers(queue, redis_url, qname, r):
    for add in (lambda: queue.add("report", repeat={"every": 60}),
                lambda: queue.add_bulk([{"name": "r", "opts": {"repeat": {"pattern": "* * * * *"}}}])):
        with pytest.raises(errors.InvalidArgument, match="upsert_job_scheduler") as caught:
            add()
        assert "repeat" in caught.value.argument
    with pytest.raises(errors.InvalidArgument, match="default_job_options.repeat"):
        Queue(qname, connection=redis_url, default_job_options={"repeat": {"every": 1}})
    assert r.keys(f"bull:{qname}:*") == []


def test_repeatable_jobs_are_listed_as_bullmq_lists_them(queue, r):
    every_key, _ = add_legacy(r, queue, "every", {"every": "60000"}, "every::::60000",
                              next_millis=NEXT + 2)
    cron_key, _ = add_legacy(r, queue, "cron", {"pattern": "0 9 * * *", "tz": "Europe/Paris",
                                                "endDate": str(NEXT + 10)},
                             f"cron:::{NEXT + 10}:Europe/Paris:0 9 * * *", next_millis=NEXT + 1)
    old_key = "old:custom:1700000000000:UTC:*/5 * * * *"
    add_legacy(r, queue, "old", None, "", next_millis=NEXT, stored_key=old_key)
    listed = queue.get_repeatable_jobs(asc=True)
    assert [j.key for j in listed] == [old_key, cron_key, every_key]
    old, cron, every = listed
    assert (old.name, old.id, old.end_date, old.tz, old.pattern, old.next) == \
        ("old", "custom", 1700000000000, "UTC", "*/5 * * * *", NEXT)
    assert (cron.name, cron.pattern, cron.tz, cron.end_date, cron.every, cron.id) == \
        ("cron", "0 9 * * *", "Europe/Paris", NEXT + 10, None, None)
    assert (every.name, every.every, every.pattern, every.next) == ("every", 60.0, None, NEXT + 2)
    assert [j.key for j in queue.get_repeatable_jobs()] == [every_key, cron_key, old_key]
    assert [j.key for j in queue.get_repeatable_jobs(0, 0)] == [every_key]
    queue.upsert_job_scheduler("nightly", pattern="0 1 * * *")    # schedulers share the key
    assert "nightly" in [j.key for j in queue.get_repeatable_jobs()]
    assert "nightly" in [s.id for s in queue.get_job_schedulers()]
    with pytest.raises(errors.InvalidArgumentType, match="asc"):
        queue.get_repeatable_jobs(asc="yes")


def test_remove_repeatable_by_its_options(queue, r):
    key, run = add_legacy(r, queue, "every", {"every": "60000"}, "every::::60000")
    assert queue.remove_repeatable("every", {"every": 60}) is True
    assert gone(r, queue, key, run)
    assert removed_events(r, queue) == [run]
    assert queue.remove_repeatable("every", {"every": 60}) is False


def test_remove_repeatable_with_a_job_id_tz_and_end_date(queue, r):
    end = datetime(2099, 1, 2, tzinfo=timezone.utc)
    end_ms = int(end.timestamp() * 1000)
    joined = f"cron:my-id:{end_ms}:Europe/Paris:0 9 * * *"
    key, run = add_legacy(r, queue, "cron", {"pattern": "0 9 * * *", "tz": "Europe/Paris",
                                             "endDate": str(end_ms)}, joined)
    opts = {"pattern": "0 9 * * *", "tz": "Europe/Paris", "end_date": end}
    assert queue.remove_repeatable("cron", opts) is False                 # the job id differs
    assert queue.remove_repeatable("cron", dict(opts, tz="UTC"), job_id="my-id") is False
    assert queue.remove_repeatable("cron", dict(opts, end_date=end_ms), job_id="my-id") is True
    assert gone(r, queue, key, run)


def test_remove_repeatable_with_a_custom_key(queue, r):
    r.zadd(queue.keys.repeat, {"my-key": NEXT})
    r.hset(f"{queue.keys.repeat}:my-key", mapping={"name": "keyed", "every": "1000"})
    run = f"repeat:my-key:{NEXT}"
    r.hset(queue.keys.job(run), mapping={"name": "keyed", "data": "{}", "opts": "{}",
                                         "timestamp": 0})
    r.zadd(queue.keys.delayed, {run: NEXT * 4096})
    assert queue.remove_repeatable("keyed", {"key": "my-key"}) is True
    assert gone(r, queue, "my-key", run)


def test_remove_repeatable_by_key_new_and_bullmq3_keys(queue, r):
    key, run = add_legacy(r, queue, "every", {"every": "5000"}, "every::::5000")
    old_key = "old:custom::UTC:*/5 * * * *"
    _, old_run = add_legacy(r, queue, "old", None, "", stored_key=old_key)
    assert queue.remove_repeatable_by_key(key) is True
    assert gone(r, queue, key, run)
    # a BullMQ 3 key: its entry goes; its next run stays (it runs once more), as BullMQ
    # 5's removeRepeatableByKey leaves it (it looks for the run under the key itself)
    assert queue.remove_repeatable_by_key(old_key) is True
    assert r.zscore(queue.keys.repeat, old_key) is None
    assert r.zscore(queue.keys.delayed, old_run) is not None
    assert queue.remove_repeatable_by_key(key) is False
    assert removed_events(r, queue) == [run]


@pytest.mark.parametrize("call,arg", [
    (lambda q: q.remove_repeatable("every", {"every": 60, "limit": 3}), "unknown key .limit"),
    (lambda q: q.remove_repeatable("every", {}), "repeat_opts"),
    (lambda q: q.remove_repeatable("every", {"every": -1}), "every"),
    (lambda q: q.remove_repeatable("every", {"every": 60, "tz": 1}), "repeat_opts.tz"),
    (lambda q: q.remove_repeatable("every", {"pattern": ""}), "repeat_opts.pattern"),
    (lambda q: q.remove_repeatable("every", {"every": 60}, job_id=5), "job_id"),
    (lambda q: q.remove_repeatable(3, {"every": 60}), "name"),
    (lambda q: q.remove_repeatable("every", [("every", 60)]), "repeat_opts"),
    (lambda q: q.remove_repeatable_by_key(""), "key"),
])
def test_bad_arguments_remove_nothing(queue, r, call, arg):
    key, run = add_legacy(r, queue, "every", {"every": "60000"}, "every::::60000")
    with pytest.raises(errors.ValidationError, match=arg):
        call(queue)
    assert r.zscore(queue.keys.repeat, key) == NEXT
    assert r.exists(queue.keys.job(run))


def test_remove_repeatable_of_a_bullmq3_series_takes_its_next_run_too(queue, r):
    old_key = "old:custom::UTC:*/5 * * * *"        # BullMQ 3 stored the options joined
    _, run = add_legacy(r, queue, "old", None, "", stored_key=old_key)
    assert queue.remove_repeatable("old", {"pattern": "*/5 * * * *", "tz": "UTC"},
                                   job_id="custom") is True
    assert gone(r, queue, old_key, run)
    assert removed_events(r, queue) == [run]
