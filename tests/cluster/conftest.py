"""Fixtures for the Redis Cluster and Sentinel tests: each starts its servers on free
loopback ports (``orijs_sync.testing.ClusterServers``/``SentinelServers``) and stops
them by PID. ``redis_cluster`` (the session's 3-primary cluster) comes from the plugin."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List

import pytest
import redis
from redis.cluster import RedisCluster

from cluster_helpers import slot_of

from orijs_sync.testing import ClusterServers, cluster_supported


@pytest.fixture
def cluster_conn(redis_cluster: ClusterServers) -> Dict[str, Any]:
    return {"startup_nodes": redis_cluster.startup_nodes}


@pytest.fixture
def rc(redis_cluster: ClusterServers) -> Iterator[RedisCluster]:
    """A plain redis-py cluster client, for looking at keys directly."""
    client = RedisCluster(startup_nodes=[redis.cluster.ClusterNode(n["host"], n["port"])
                                         for n in redis_cluster.startup_nodes],
                          decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def spread_names(redis_cluster: ClusterServers, namespace: str) -> Callable[[int], List[str]]:
    """``spread_names(n)``: n queue names, each with its own hash tag, on n different
    primaries (as many as there are)."""
    def pick(n: int) -> List[str]:
        names, owners = [], set()
        i = 0
        while len(names) < n:
            name = f"{{{namespace}-{i}}}q"
            owner = redis_cluster.owner_port(slot_of("bull", name))
            if owner not in owners or len(owners) >= redis_cluster.primaries:
                names.append(name)
                owners.add(owner)
            i += 1
        return names
    return pick


@pytest.fixture
def cluster_with_replicas() -> Iterator[ClusterServers]:
    """A 3-primary cluster with one replica each, for failover tests (its own)."""
    if not cluster_supported():
        pytest.skip("this redis-server has no cluster support (--cluster-enabled)")
    with ClusterServers(3, replicas=1) as cluster:
        yield cluster
