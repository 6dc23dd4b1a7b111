"""Deduplication modes as BullMQ 5.81 runs them: plain, ``extend`` (each duplicate
resets the key's ttl), ``replace`` (a duplicate replaces the job while it is
delayed) and ``keep_last_if_active`` (a duplicate of an active job is kept and
added once that job finishes). Nothing is written for a refused option."""
from __future__ import annotations

import threading
import time

import pytest

from orijs_sync import FlowProducer, Worker, errors
from orijs_sync.testing import wait_until

GUARD = 30.0


def de_key(queue, dedup_id):
    return queue.keys.base + "de:" + dedup_id


def test_extend_resets_the_ttl_on_each_duplicate(queue, r):
    de = {"id": "d", "ttl": 1.5, "extend": True}
    ids = [queue.add("x", {"n": 0}, deduplication=de).id]
    for n in (1, 2):          # at 0.8 s and 1.6 s: each add finds the key its last one renewed
        time.sleep(0.8)
        ids.append(queue.add("x", {"n": n}, deduplication=de).id)
        assert r.pttl(de_key(queue, "d")) > 1200      # renewed (else at most 700 left)
    assert ids == [ids[0]] * 3
    assert queue.get_job(ids[0]).data == {"n": 0}
    assert r.llen(queue.keys.wait) == 1
    time.sleep(1.8)           # no add for longer than the ttl: the id is free again
    assert queue.add("x", {"n": 3}, deduplication=de).id != ids[0]


def test_without_extend_a_duplicate_leaves_the_ttl_running(queue, r):
    de = {"id": "d", "ttl": 10.0}
    first = queue.add("x", {}, deduplication=de)
    time.sleep(0.5)
    assert queue.add("x", {}, deduplication=de).id == first.id
    assert r.pttl(de_key(queue, "d")) <= 9500


def test_extend_renews_the_ttl_even_when_the_add_is_deduplicated(queue, r):
    de = {"id": "d", "ttl": 10.0, "extend": True}
    first = queue.add("x", {}, deduplication=de)
    time.sleep(0.5)
    assert queue.add("x", {}, deduplication=de).id == first.id
    assert r.pttl(de_key(queue, "d")) > 9600
    assert r.get(de_key(queue, "d")) == first.id


def test_replace_swaps_a_delayed_job_for_the_new_one(queue, r):
    de = {"id": "d", "replace": True}
    first = queue.add("x", {"v": 1}, delay=30, deduplication=de)
    second = queue.add("y", {"v": 2}, delay=60, attempts=3, deduplication=de)
    assert second.id != first.id
    assert queue.get_job(first.id) is None
    assert r.zrange(queue.keys.delayed, 0, -1) == [second.id]
    stored = queue.get_job(second.id)
    assert (stored.name, stored.data, stored.delay) == ("y", {"v": 2}, 60000)
    assert stored.opts["attempts"] == 3 and stored.deduplication_id == "d"
    assert r.get(de_key(queue, "d")) == second.id
    assert r.ttl(de_key(queue, "d")) == -1


def test_replace_keeps_the_ttl_left_unless_extend(queue, r):
    first = queue.add("x", {"v": 1}, delay=30, deduplication={"id": "d", "ttl": 10.0,
                                                              "replace": True})
    time.sleep(0.5)
    second = queue.add("x", {"v": 2}, delay=30, deduplication={"id": "d", "ttl": 10.0,
                                                               "replace": True})
    assert second.id != first.id and r.get(de_key(queue, "d")) == second.id
    assert r.pttl(de_key(queue, "d")) <= 9500
    third = queue.add("x", {"v": 3}, delay=30, deduplication={"id": "d", "ttl": 10.0,
                                                              "replace": True, "extend": True})
    assert r.get(de_key(queue, "d")) == third.id and r.pttl(de_key(queue, "d")) > 9600


def test_replace_leaves_a_job_that_is_no_longer_delayed(queue, r):
    de = {"id": "d", "replace": True}
    first = queue.add("x", {"v": 1}, deduplication=de)
    assert queue.add("x", {"v": 2}, delay=30, deduplication=de).id == first.id
    assert queue.get_job(first.id).data == {"v": 1}
    assert r.zcard(queue.keys.delayed) == 0 and r.llen(queue.keys.wait) == 1


def test_keep_last_if_active_adds_the_last_duplicate_when_the_active_job_ends(
        queue, redis_url, qname, r):
    de = {"id": "d", "keep_last_if_active": True}
    started, release, seen = threading.Event(), threading.Event(), []

    def handler(job):
        seen.append((job.id, job.data))
        started.set()
        release.wait(GUARD)

    first = queue.add("x", {"v": 1}, deduplication=de)
    with Worker(qname, handler, connection=redis_url):
        assert started.wait(GUARD)
        dups = [queue.add("x", {"v": v}, deduplication=de) for v in (2, 3)]
        assert [d.id for d in dups] == [first.id, first.id]
        assert r.hget(queue.keys.base + "dn:d", "data") == '{"v":3}'
        release.set()
        wait_until(lambda: len(seen) == 2 and r.llen(queue.keys.active) == 0
                   and r.zcard(queue.keys.completed) == 2, GUARD, "both runs")
    # The kept job has the id its own add was given (the third id of the queue).
    assert seen == [(first.id, {"v": 1}), ("3", {"v": 3})]
    assert r.exists(de_key(queue, "d"), queue.keys.base + "dn:d") == 0


def test_keep_last_if_active_deduplicates_a_job_that_still_waits(queue, r):
    de = {"id": "d", "keep_last_if_active": True}
    first = queue.add("x", {"v": 1}, deduplication=de)
    assert queue.add("x", {"v": 2}, deduplication=de).id == first.id
    assert queue.get_job(first.id).data == {"v": 1}
    assert r.exists(queue.keys.base + "dn:d") == 0
    assert r.ttl(de_key(queue, "d")) == -1


def test_removing_the_deduplicated_job_drops_its_kept_duplicate(queue, r):
    r.set(de_key(queue, "d"), "7")
    r.hset(queue.keys.base + "dn:d", mapping={"name": "x", "data": "{}", "opts": "{}"})
    r.hset(queue.keys.job("7"), mapping={"name": "x", "data": "{}", "opts": "{}", "deid": "d"})
    r.zadd(queue.keys.completed, {"7": 1})
    queue.clean(0, 10, "completed")
    assert r.exists(de_key(queue, "d"), queue.keys.base + "dn:d") == 0


def test_debounce_is_the_older_name_of_deduplication(queue, r):
    first = queue.add("x", {}, debounce={"id": "d", "ttl": 10.0})
    assert first.opts["de"] == {"id": "d", "ttl": 10000}
    assert queue.add("x", {}, debounce={"id": "d"}).id == first.id
    assert queue.get_job(first.id).deduplication_id == "d"


@pytest.mark.parametrize("opts, named", [
    ({"deduplication": {"id": "d", "extend": True}}, "deduplication.extend"),
    ({"deduplication": {"id": "d", "ttl": 5, "keep_last_if_active": True}},
     "deduplication.ttl"),
    ({"deduplication": {"id": "d", "keepLastIfActive": True}}, "keep_last_if_active"),
    ({"deduplication": {"id": "d", "keep_last_if_active": 1}},
     "deduplication.keep_last_if_active"),
    ({"deduplication": {"id": "d", "replace": True, "bounce": True}}, "bounce"),
    ({"deduplication": {"id": "d"}, "debounce": {"id": "d"}}, "debounce"),
    ({"debounce": {"ttl": 5}}, "debounce.id"),
])
def test_a_deduplication_option_not_run_is_refused_by_name(queue, r, opts, named):
    with pytest.raises(errors.ValidationError, match=named.replace(".", r"\.")):
        queue.add("x", {}, **opts)
    assert r.exists(queue.keys.id, queue.keys.wait, queue.keys.events) == 0
    assert list(r.scan_iter(match=queue.keys.base + "*")) == []


def test_a_scheduler_template_refuses_deduplication(queue, r):
    for name in ("deduplication", "debounce"):
        with pytest.raises(errors.InvalidArgument, match=name):
            queue.upsert_job_scheduler("s", every=60, template={"opts": {name: {"id": "d"}}})
    assert list(r.scan_iter(match=queue.keys.base + "*")) == []


@pytest.mark.parametrize("de, children, named", [
    ({"id": "d", "replace": True}, [], "replace"),
    ({"id": "d", "keep_last_if_active": True}, [{"name": "c"}], "keep_last_if_active"),
])
def test_a_flow_refuses_what_bullmq_flows_leave_out(redis_url, qname, r, de, children,
                                                    named):
    with FlowProducer(connection=redis_url) as flows:
        tree = {"name": "p", "queue_name": qname, "opts": {"deduplication": de},
                "children": [dict(c, queue_name=qname) for c in children]}
        with pytest.raises(errors.InvalidArgument, match=named):
            flows.add(tree)
    assert list(r.scan_iter(match=f"bull:{qname}:*")) == []


def test_obliterate_deletes_a_kept_duplicate(queue, r):
    queue.add("x", {}, deduplication={"id": "d"})
    r.hset(queue.keys.base + "dn:d", mapping={"name": "x", "data": "{}", "opts": "{}"})
    queue.obliterate(force=True)
    assert list(r.scan_iter(match=queue.keys.base + "*")) == []


def test_an_unreadable_kept_duplicate_is_dropped_and_the_job_still_finishes(
        queue, redis_url, qname, r):
    de = {"id": "d", "keep_last_if_active": True}
    job = queue.add("x", {}, deduplication=de)
    r.hset(queue.keys.base + "dn:d", mapping={"name": "x", "data": "{}", "opts": "not json"})
    with Worker(qname, lambda j: "ok", connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD, "the job done")
    assert r.exists(de_key(queue, "d"), queue.keys.base + "dn:d") == 0
    assert r.zcard(queue.keys.completed) == 1
