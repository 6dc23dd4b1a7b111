"""Fixtures of the fault tests: a FaultProxy in front of the test Redis (``redis_url``).
The library is pointed at ``proxied_url``; the tests' own checks use ``redis_url``."""
from __future__ import annotations

from typing import Iterator

import pytest
from fault_helpers import through
from fault_proxy import FaultProxy


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.before(redis_url) as running:
        yield running


@pytest.fixture
def proxied_url(proxy: FaultProxy, redis_url: str) -> str:
    return through(proxy, redis_url)
