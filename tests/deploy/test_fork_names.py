"""A worker's connection name (CLIENT SETNAME, as BullMQ names it) survives a fork: the
child's new connections are named again, the parent's stays as it was."""
from __future__ import annotations

from typing import Any, Dict

import pytest
from forking import run_in_child

from orijs_sync.connection import BlockingClient, RedisConnection

FORKS = ("os.fork", "fork")
NAME = "bull:cQ==:w:forked"


def named_child(blocking: BlockingClient) -> Dict[str, Any]:
    return {"name": blocking.client.client_getname(),
            "client_id": int(blocking.client.client_id())}


@pytest.mark.parametrize("mode", FORKS)
def test_the_child_names_its_new_connection_again(mode, redis_url):
    conn = RedisConnection(redis_url)
    blocking = conn.blocking_client(1.0, client_name=NAME)
    parent_id = int(blocking.client.client_id())
    assert blocking.client.client_getname() == NAME
    try:
        out = run_in_child(mode, named_child, blocking)
        assert out["name"] == NAME and out["client_id"] != parent_id
        assert int(blocking.client.client_id()) == parent_id
        assert blocking.client.client_getname() == NAME
    finally:
        blocking.close()
        conn.close()
