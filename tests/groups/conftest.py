"""Fixtures of the group queue tests (real Redis from the orijs_sync pytest plugin)."""
from __future__ import annotations

from typing import Iterator

import pytest

from orijs_sync.groups import GroupQueue


@pytest.fixture
def gname(namespace: str) -> str:
    return f"gq-{namespace}"


@pytest.fixture
def gq(redis_url: str, gname: str) -> Iterator[GroupQueue]:
    queue = GroupQueue(gname, connection=redis_url, job_timeout=5)
    yield queue
    queue.close()
