"""Fixtures for the workflow layer tests.

``make_provider`` is parametrized over both providers: the contract suite runs once
against ``InProcessWorkflowProvider`` (no Redis) and once against
``BullMQWorkflowProvider`` on the test Redis (``redis_url``), with the test's
``namespace`` token in ``queue_prefix`` (so its keys are deleted afterwards).
"""
from __future__ import annotations

from typing import Any, Iterator, List, Optional

import pytest
import redis

from orijs_sync.workflows import BullMQWorkflowProvider, InProcessWorkflowProvider


class ProviderFactory:
    def __init__(self, kind: str, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.created: List[Any] = []
        self.url: Optional[str] = None
        self.queue_prefix: Optional[str] = None
        if kind == "bullmq":
            self.url = request.getfixturevalue("redis_url")
            self.queue_prefix = f"{request.getfixturevalue('namespace')}.workflow"
        elif kind == "cluster":     # every queue of one test under the hash tag {namespace}
            self.url = {"startup_nodes": request.getfixturevalue("redis_cluster").startup_nodes}
            self.queue_prefix = f"{{{request.getfixturevalue('namespace')}}}.workflow"

    def __call__(self, *workflows: Any, start: bool = True, **options: Any) -> Any:
        # One attempt per step unless a test says otherwise (None: the provider's
        # defaults, OriJS's 3 attempts with back-off).
        options.setdefault("default_step_options", {"attempts": 1})
        if self.kind in ("bullmq", "cluster"):
            assert self.queue_prefix is not None
            provider: Any = BullMQWorkflowProvider(self.url, queue_prefix=self.queue_prefix,
                                                   **options)
        else:
            provider = InProcessWorkflowProvider(**options)
        self.created.append(provider)
        for workflow in workflows:
            provider.register(workflow)
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
def bullmq(request: pytest.FixtureRequest) -> Iterator[ProviderFactory]:
    """BullMQ providers only (Redis layout, registry, cross-process tests)."""
    factory = ProviderFactory("bullmq", request)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()
