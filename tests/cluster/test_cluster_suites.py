"""The core lifecycle, flows and job schedulers suites, run again on the session's
3-primary Redis Cluster: the same test functions (imported here, same assertions),
with this module's fixtures: ``redis_url`` is the cluster's connection, queue names
carry a hash tag (each test's own, so tests spread over the cluster's nodes), and
``r`` is a redis-py cluster client (tests/conftest.py's ``queue`` and ``events`` use them). A few tests that start other processes with a
Redis URL, or look at one server as a whole, are left to the single-Redis run."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

TESTS = Path(__file__).resolve().parent.parent
for folder in ("core", "flows", "schedulers"):
    sys.path.insert(0, str(TESTS / folder))

import test_flow_children  # noqa: E402
import test_flow_producer  # noqa: E402
import test_job_schedulers  # noqa: E402
import test_lifecycle  # noqa: E402

from orijs_sync import FlowProducer  # noqa: E402

# Tests that hand a URL to another process, or read a single server's whole keyspace.
SKIP = {"test_two_processes_upserting_one_id_make_one_series"}


def _collect() -> Dict[str, Callable[..., Any]]:
    found: Dict[str, Callable[..., Any]] = {}
    for module in (test_lifecycle, test_flow_producer, test_flow_children, test_job_schedulers):
        for name, obj in vars(module).items():
            if name.startswith("test_") and callable(obj) and name not in SKIP:
                found[f"{name}__{module.__name__}"] = obj
    return found


globals().update(_collect())


@pytest.fixture
def namespace() -> str:
    # A hash tag: every queue name a test builds from it lands on one slot. The cluster
    # is thrown away at the end of the session: nothing to delete.
    return f"{{t{uuid.uuid4().hex[:12]}}}"


@pytest.fixture
def redis_url(redis_cluster: Any) -> Dict[str, Any]:
    return {"startup_nodes": redis_cluster.startup_nodes}


@pytest.fixture
def r(redis_cluster: Any) -> Iterator[redis.RedisCluster]:
    client = RedisCluster(startup_nodes=[ClusterNode(n["host"], n["port"])
                                         for n in redis_cluster.startup_nodes],
                          decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname(namespace: str) -> str:
    return f"q-{namespace}"


@pytest.fixture
def qn(namespace: str) -> Callable[[str], str]:
    return lambda base: f"{base}-{namespace}"


@pytest.fixture
def flows(redis_url: Any) -> Iterator[FlowProducer]:
    producer = FlowProducer(connection=redis_url)
    yield producer
    producer.close()
