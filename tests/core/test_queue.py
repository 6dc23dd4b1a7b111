"""Queue: adding jobs, reading them back, and refusing bad input before writing."""
from __future__ import annotations

import json

import pytest

from orijs_sync import Queue, errors


def test_add_stores_the_job_as_bullmq_does(queue, r):
    job = queue.add("send", {"to": "a@example.com"})
    stored = r.hgetall(queue.keys.job(job.id))
    assert stored["name"] == "send"
    assert json.loads(stored["data"]) == {"to": "a@example.com"}
    assert json.loads(stored["opts"]) == {"attempts": 1}
    assert stored["delay"] == "0" and stored["priority"] == "0"
    assert int(stored["timestamp"]) == job.timestamp
    assert r.lrange(queue.keys.wait, 0, -1) == [job.id]
    assert r.zrange(queue.keys.marker, 0, -1) == ["0"]
    events = [f["event"] for _, f in r.xrange(queue.keys.events)]
    assert events == ["added", "waiting"]


def test_generated_ids_count_up_and_custom_ids_are_kept(queue):
    first, second = queue.add("a", {}), queue.add("b", {})
    assert int(second.id) == int(first.id) + 1
    custom = queue.add("c", {"x": 1}, job_id="order-7")
    assert custom.id == "order-7"
    assert queue.get_job("order-7").data == {"x": 1}


def test_adding_an_existing_custom_id_writes_nothing(queue, r):
    queue.add("c", {"v": 1}, job_id="dup")
    again = queue.add("c", {"v": 2}, job_id="dup")
    assert again.id == "dup"
    assert queue.get_job("dup").data == {"v": 1}
    assert r.llen(queue.keys.wait) == 1


def test_get_job_reads_every_field(queue):
    job = queue.add("send", {"n": 1}, attempts=3, remove_on_complete=True)
    got = queue.get_job(job.id)
    assert (got.id, got.name, got.data) == (job.id, "send", {"n": 1})
    assert got.opts == {"attempts": 3, "removeOnComplete": True}
    assert got.attempts == 3 and got.attempts_made == 0
    assert got.returnvalue is None and got.failed_reason is None
    assert got.processed_on is None and got.finished_on is None
    assert got.get_state() == "waiting"
    assert queue.get_job("missing") is None


def test_get_job_counts_names_every_state(queue):
    queue.add("a", {})
    queue.add("b", {}, delay=60)
    queue.add("c", {}, priority=5)
    counts = queue.get_job_counts()
    assert counts == {"waiting": 1, "active": 0, "completed": 0, "failed": 0, "delayed": 1,
                      "prioritized": 1, "paused": 0, "waiting-children": 0}
    assert queue.get_job_counts("delayed") == {"delayed": 1}
    with pytest.raises(ValueError, match="unknown job state"):
        queue.get_job_counts("nope")


def test_add_bulk_adds_all_with_their_options(queue, r):
    jobs = queue.add_bulk([{"name": "send", "data": {"i": i}, "opts": {"remove_on_complete": True}}
                           for i in range(50)])
    assert [j.data["i"] for j in jobs] == list(range(50))
    assert r.llen(queue.keys.wait) == 50
    assert queue.get_job(jobs[7].id).opts["removeOnComplete"] is True


@pytest.mark.parametrize("bad", [{"when": object()}, {"x": float("nan")}, {1j: 2}])
def test_data_json_cannot_hold_is_refused_before_writing(queue, r, bad):
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        queue.add("send", bad)
    assert r.exists(queue.keys.id, queue.keys.wait, queue.keys.events) == 0


def test_add_bulk_with_one_bad_item_writes_nothing(queue, r):
    with pytest.raises(TypeError):
        queue.add_bulk([{"name": "ok", "data": {}}, {"name": "bad", "data": {"s": {1, 2}}}])
    assert r.exists(queue.keys.wait) == 0


@pytest.mark.parametrize("job_id", ["a:b", "42", "-7", ""])
def test_bad_custom_ids_are_refused(queue, r, job_id):
    with pytest.raises(ValueError, match="job_id"):
        queue.add("send", {}, job_id=job_id)
    assert r.exists(queue.keys.wait) == 0


def test_a_connection_that_fails_names_the_address():
    q = Queue("nowhere", connection="redis://127.0.0.1:1/0")
    with pytest.raises(errors.ConnectionError, match="127.0.0.1:1"):
        q.add("send", {})
    with pytest.raises(ConnectionError):  # the builtin too
        q.get_job_counts()


def test_connection_forms(redis_url, qname, r):
    import redis as redis_lib
    for conn in (redis_url, {"url": redis_url}, redis_lib.Redis.from_url(redis_url)):
        with Queue(qname, connection=conn) as q:
            q.add("x", {})
    assert r.llen(f"bull:{qname}:wait") == 3
    with pytest.raises(TypeError, match="connection"):
        Queue(qname, connection=42)  # type: ignore[arg-type]


def test_prefix_changes_every_key(redis_url, qname, r):
    with Queue(qname, connection=redis_url, prefix="custom") as q:
        job = q.add("x", {})
    assert r.exists(f"custom:{qname}:{job.id}") == 1
    assert r.exists(f"bull:{qname}:{job.id}") == 0


def test_adding_an_existing_id_returns_the_job_as_stored(queue):
    queue.add("first", {"v": 1}, job_id="same", attempts=2)
    again = queue.add("second", {"v": 2}, job_id="same")
    assert (again.name, again.data, again.attempts) == ("first", {"v": 1}, 2)
    bulk = queue.add_bulk([{"name": "third", "data": {"v": 3}, "opts": {"job_id": "same"}}])
    assert bulk[0].data == {"v": 1}


def test_adds_from_many_threads_share_a_few_connections_given_back(redis_url, qname):
    """``Queue.add`` leases a raw connection per call (no thread keeps one): as many as
    the adds under way at once, each given back, closed with the queue."""
    import threading
    with Queue(qname, connection=redis_url) as queue:
        threads = [threading.Thread(target=lambda: [queue.add("x", {}) for _ in range(50)])
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert queue.count() == 400
        made = list(queue.connection._direct)
        assert 1 <= len(made) <= 8
        assert sorted(map(id, queue.connection._free)) == sorted(map(id, made))
    assert all(getattr(conn, "_sock", None) is None for conn in made)


def test_adds_keep_to_max_connections_when_it_is_set(redis_url, qname):
    with Queue(qname, connection={"url": redis_url, "max_connections": 2}) as queue:
        for _ in range(3):
            queue.add("x", {})
        assert queue.count() == 3
        assert queue.connection._direct == []
