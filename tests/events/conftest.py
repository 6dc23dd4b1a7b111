"""Fixtures for the event layer tests.

``make_provider`` is parametrized over both providers: the contract suite runs
once against ``InProcessEventProvider`` (no Redis) and once against
``BullMQEventProvider`` on the test Redis (``redis_url``), with the test's
``namespace`` token in ``queue_prefix`` so tests never share queues.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional

import pytest

from orijs_sync.events import BullMQEventProvider, InProcessEventProvider


class ProviderFactory:
    def __init__(self, kind: str, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self._request = request
        self.created: List[Any] = []
        self.url: Optional[str] = None
        self.queue_prefix: Optional[str] = None
        if kind == "bullmq":
            self.url = request.getfixturevalue("redis_url")
            self.queue_prefix = f"{request.getfixturevalue('namespace')}.event"
        elif kind == "cluster":     # every queue of one test under the hash tag {namespace}
            self.url = {"startup_nodes": request.getfixturevalue("redis_cluster").startup_nodes}
            self.queue_prefix = f"{{{request.getfixturevalue('namespace')}}}.event"

    def __call__(self, start: bool = True, **options: Any) -> Any:
        if self.kind in ("bullmq", "cluster"):
            provider: Any = BullMQEventProvider(self.url, queue_prefix=self.queue_prefix,
                                                **options)
        else:
            provider = InProcessEventProvider(**options)
        self.created.append(provider)
        return provider.start() if start else provider

    def close(self) -> None:
        for provider in reversed(self.created):
            provider.stop(timeout=10)


@pytest.fixture(params=["in_process", "bullmq", "cluster"])
def make_provider(request: pytest.FixtureRequest) -> Iterator[ProviderFactory]:
    factory = ProviderFactory(request.param, request)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def bullmq_provider(redis_url: str, namespace: str) -> Iterator[Callable[..., BullMQEventProvider]]:
    created: List[BullMQEventProvider] = []

    def make(start: bool = True, **options: Any) -> BullMQEventProvider:
        options.setdefault("queue_prefix", f"{namespace}.event")
        provider = BullMQEventProvider(redis_url, **options)
        created.append(provider)
        return provider.start() if start else provider

    yield make
    for provider in reversed(created):
        provider.stop(timeout=10)
