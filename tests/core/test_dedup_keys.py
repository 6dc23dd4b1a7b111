"""Deduplication keys read and removed by id: Queue.get_deduplication_job_id and
Queue.remove_deduplication_key (BullMQ's getDeduplicationJobId and
removeDeduplicationKey, over the ``{prefix}:{queue}:de:{id}`` key)."""
from __future__ import annotations

import time

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def test_the_job_holding_an_id_and_removing_its_key(queue, r):
    first = queue.add("x", deduplication={"id": "order-1"})
    assert queue.get_deduplication_job_id("order-1") == first.id
    assert queue.add("x", deduplication={"id": "order-1"}).id == first.id    # deduplicated
    assert queue.get_deduplication_job_id("order-2") is None
    assert queue.remove_deduplication_key("order-1") is True
    assert not r.exists(f"{queue.keys.base}de:order-1")
    assert queue.get_deduplication_job_id("order-1") is None
    assert queue.get_job(first.id) is not None          # the job itself stays
    second = queue.add("x", deduplication={"id": "order-1"})
    assert second.id != first.id
    assert queue.get_deduplication_job_id("order-1") == second.id
    assert queue.remove_deduplication_key("order-1") is True
    assert queue.remove_deduplication_key("order-1") is False


def test_a_key_with_a_ttl_expires(queue):
    job = queue.add("x", deduplication={"id": "short", "ttl": 0.2})
    assert queue.get_deduplication_job_id("short") == job.id
    time.sleep(0.3)
    assert queue.get_deduplication_job_id("short") is None


def test_the_key_goes_when_its_job_finishes(queue, redis_url, qname):
    queue.add("x", deduplication={"id": "done"})
    with Worker(qname, lambda job: None, connection=redis_url):
        wait_until(lambda: queue.get_deduplication_job_id("done") is None, what="key removed")


@pytest.mark.parametrize("bad,exc", [("", errors.InvalidArgument), (3, errors.InvalidArgumentType),
                                     (None, errors.InvalidArgumentType)])
def test_bad_ids_are_refused(queue, bad, exc):
    queue.add("x", deduplication={"id": "kept"})
    with pytest.raises(exc, match="deduplication_id"):
        queue.get_deduplication_job_id(bad)
    with pytest.raises(exc, match="deduplication_id"):
        queue.remove_deduplication_key(bad)
    assert queue.get_deduplication_job_id("kept") is not None
