"""Fixtures shared by every test folder. ``redis_url`` and ``namespace`` come from the
orijs_sync pytest plugin (orijs_sync/testing.py), registered by the package's
pytest11 entry point."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from orijs_sync import Queue, QueueEvents


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A plain redis-py client on the test Redis, for looking at keys directly."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname(namespace: str) -> str:
    return f"q-{namespace}"


@pytest.fixture
def queue(redis_url: str, qname: str) -> Iterator[Queue]:
    q = Queue(qname, connection=redis_url)
    yield q
    q.close()


@pytest.fixture
def events(redis_url: str, qname: str) -> Iterator[QueueEvents]:
    ev = QueueEvents(qname, connection=redis_url)
    yield ev
    ev.close()
