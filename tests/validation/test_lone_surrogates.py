"""Text holding a lone surrogate (half of a UTF-16 pair: ``json.loads('"\\ud83d"')``, what
JavaScript leaves when it cuts an emoji) on real Redis. UTF-8 cannot encode it: job data,
return values, progress and event payloads are stored as Node's JSON.stringify writes
them (the ``\\ud83d`` escape) and read back equal; a failedReason, written as it is, gets
U+FFFD as Node's UTF-8 encoding gives it; names, ids and options are refused before
anything is written."""
from __future__ import annotations

import json
import threading
from typing import Any, List

import pytest
import redis

from orijs_sync import Queue, QueueEvents, Worker, errors
from orijs_sync.events import BullMQEventProvider
from orijs_sync.groups import GroupQueue, GroupWorker
from orijs_sync.testing import wait_until
from orijs_sync.workflows._failure_codec import decode_failure, encode_failure
from orijs_sync.workflows.errors import RollbackFailedError

LONE = json.loads('"\\ud83d"')
VALUE = {"t": LONE, "k" + LONE: [LONE + "x", "\u00e9\U0001F600"]}
# What JSON.stringify(VALUE) gives in Node: the lone surrogate escaped, the rest as it is.
NODE_JSON = '{"t":"\\ud83d","k\\ud83d":["\\ud83dx","\u00e9\U0001F600"]}'


def test_data_and_progress_are_stored_as_node_writes_them_and_read_back_equal(
        queue: Queue, r: redis.Redis) -> None:
    job = queue.add("x", VALUE)
    assert r.hget(queue.keys.job(job.id), "data") == NODE_JSON
    assert queue.get_job(job.id).data == VALUE
    job.update_data({"again": VALUE})
    job.update_progress(VALUE)
    stored = queue.get_job(job.id)
    assert stored.data == {"again": VALUE} and stored.progress == VALUE


def test_a_handler_returning_a_lone_surrogate_completes_once(queue: Queue, events: QueueEvents,
                                                             redis_url: str, qname: str,
                                                             r: redis.Redis) -> None:
    runs: List[str] = []

    def handler(job: Any) -> Any:
        runs.append(job.id)
        return VALUE

    job = queue.add("x", {}, attempts=3)
    with Worker(qname, handler, connection=redis_url):
        assert job.wait_until_finished(events, timeout=10) == VALUE
    assert runs == [job.id]
    assert r.hget(queue.keys.job(job.id), "returnvalue") == NODE_JSON
    assert queue.get_job(job.id).returnvalue == VALUE


def test_a_failure_message_with_a_lone_surrogate_fails_the_job_once(queue: Queue,
                                                                    redis_url: str,
                                                                    qname: str) -> None:
    runs: List[str] = []

    def handler(job: Any) -> Any:
        runs.append(job.id)
        raise ValueError("bad " + LONE)

    job = queue.add("x", {})
    with Worker(qname, handler, connection=redis_url):
        wait_until(lambda: queue.get_job_state(job.id) == "failed", 10, "the job failed")
    assert runs == [job.id]
    failed = queue.get_job(job.id)
    assert failed.failed_reason == "bad \ufffd"
    assert "ValueError: bad " + LONE in failed.stacktrace[0]    # JSON: escaped, read back


def test_names_ids_and_options_with_a_lone_surrogate_are_refused(queue: Queue,
                                                                 r: redis.Redis) -> None:
    calls = {"name": lambda: queue.add(LONE, {}),
             "job_id": lambda: queue.add("x", {}, job_id="a" + LONE),
             "deduplication.id": lambda: queue.add("x", {}, deduplication={"id": LONE})}
    for argument, call in calls.items():
        with pytest.raises(errors.InvalidArgument, match="lone surrogate") as info:
            call()
        assert info.value.argument == argument
    assert r.keys(f"{queue.keys.base}*") == []          # nothing was written
    job = queue.add("x", {})
    with pytest.raises(errors.InvalidArgument, match="lone surrogate"):
        job.log("half " + LONE)


def test_an_event_payload_and_result_with_a_lone_surrogate(redis_url: str,
                                                          namespace: str) -> None:
    provider = BullMQEventProvider(redis_url, queue_prefix=f"{namespace}.event").start()
    try:
        provider.subscribe("text.cut", lambda m: {"echo": m.payload})
        assert provider.emit("text.cut", VALUE).result(timeout=10) == {"echo": VALUE}
        with pytest.raises(errors.InvalidArgument, match="lone surrogate"):
            provider.emit("cut" + LONE, {})
    finally:
        provider.stop(timeout=10)


def test_a_group_job_failing_with_a_lone_surrogate_fails_once(redis_url: str,
                                                             namespace: str) -> None:
    runs: List[str] = []
    done = threading.Event()

    def handler(job: Any) -> Any:
        runs.append(job.id)
        done.set()
        raise ValueError("bad " + LONE)

    with GroupQueue(f"gq-{namespace}", connection=redis_url, job_timeout=5,
                    max_attempts=1, keep_failed=10) as gq:
        job = gq.add(group_id="g", data=VALUE)
        assert gq.get_job(job.id).data == VALUE
        with GroupWorker(gq, handler):
            assert done.wait(10)
            wait_until(lambda: gq.get_job(job.id).status == "failed", 10, "the job failed")
        assert runs == [job.id]
        assert gq.get_job(job.id).failed_reason == "bad \ufffd"


def test_a_workflow_failure_with_a_lone_surrogate_is_storable_text() -> None:
    """What a failed workflow stores (its failure record, a step's failedReason): plain
    text with U+FFFD; the JSON of failed rollbacks escaped, decoding back equal."""
    assert encode_failure("charge", "ValueError", "bad " + LONE) == \
        "Step 'charge' failed: bad \ufffd"
    rolled = encode_failure("charge", "ValueError", "bad " + LONE,
                            [RollbackFailedError("refund", "TypeError", "no " + LONE)])
    assert rolled.isascii()
    decoded = decode_failure("wf", "flow-1", rolled)
    assert [e.message for e in decoded.rollback_errors] == ["no " + LONE]
