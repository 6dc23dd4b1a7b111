# redis_url and namespace come from the orijs_sync pytest plugin (orijs_sync/testing.py).
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from orijs_sync import Queue


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname(namespace: str) -> str:
    return f"sched-{namespace}"


@pytest.fixture
def queue(redis_url: str, qname: str) -> Iterator[Queue]:
    q = Queue(qname, connection=redis_url)
    yield q
    q.close()
