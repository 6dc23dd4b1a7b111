"""A real gunicorn serving examples/wsgi.py (its provider made at import time), in
sync and gthread workers, with and without --preload; the subscriber runs in another
process. 1,000 requests from 32 concurrent clients per mode: every request gets its
own answer. (Figures are bench/bench_wsgi.py's business, never asserted here.)"""
from __future__ import annotations

import pytest

from gunicorn_load import Gunicorn, Subscriber, expected, fire

pytest.importorskip("gunicorn")

REQUESTS = 1000
CLIENTS = 32


@pytest.fixture(scope="module")
def queue_prefix():
    import uuid
    return f"t{uuid.uuid4().hex[:12]}.wsgi"


@pytest.fixture(scope="module")
def subscriber(redis_url, queue_prefix):
    with Subscriber(redis_url, queue_prefix) as process:
        yield process
    from orijs_sync.testing import delete_keys
    delete_keys(redis_url, f"*{queue_prefix}*")


@pytest.mark.parametrize("preload", [True, False], ids=["preload", "no-preload"])
@pytest.mark.parametrize("worker_class", ["sync", "gthread"])
def test_every_request_gets_its_own_answer(redis_url, queue_prefix, subscriber,
                                           worker_class, preload):
    with Gunicorn(redis_url, queue_prefix, worker_class=worker_class, preload=preload) as server:
        run = fire(server.port, REQUESTS, CLIENTS)
    wrong = {n: answer for n, answer in run["answers"].items() if answer != (201, expected(n))}
    assert len(run["answers"]) == REQUESTS
    assert not wrong, f"{len(wrong)} wrong answers, e.g. {list(wrong.items())[:3]}"
