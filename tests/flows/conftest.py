# redis_url and namespace come from the orijs_sync pytest plugin (orijs_sync/testing.py).
from __future__ import annotations

from typing import Callable, Iterator

import pytest

from orijs_sync import FlowProducer


@pytest.fixture
def qn(namespace: str) -> Callable[[str], str]:
    """Queue names for this test: qn("orders") -> "orders-<namespace>"."""
    return lambda base: f"{base}-{namespace}"


@pytest.fixture
def flows(redis_url: str) -> Iterator[FlowProducer]:
    producer = FlowProducer(connection=redis_url)
    yield producer
    producer.close()
