"""What keeps pages fast with 1,000,000 jobs in a state and 1,000 queues, asserted as a
structure (the timing is bench/dashboard_bench.py's): the Redis commands a page runs,
counted by the server (INFO commandstats on a Redis of this test's own), do not grow with
the number of jobs in the state nor with the number of queues; nothing runs KEYS."""
from __future__ import annotations

import json
from typing import Dict

import pytest
import redis
from dash_http import Client

from orijs_sync.dashboard import Dashboard
from orijs_sync.testing import RedisServer, wait_until


def _fill(client: redis.Redis, queues: int, jobs: int) -> None:
    """``queues`` queues with a meta hash and one waiting job each; queue ``big`` with
    ``jobs`` completed jobs (hashes and the zset), written in pipelines."""
    pipe = client.pipeline(transaction=False)
    for i in range(queues):
        pipe.hset(f"bull:q{i:04d}:meta", "opts.maxLenEvents", 10000)
        pipe.hset(f"bull:q{i:04d}:1", mapping={"name": "n", "data": "{}", "opts": "{}",
                                              "timestamp": 1})
        pipe.lpush(f"bull:q{i:04d}:wait", "1")
    pipe.hset("bull:big:meta", "opts.maxLenEvents", 10000)
    pipe.execute()
    for start in range(0, jobs, 5000):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(start + 5000, jobs)):
            pipe.hset(f"bull:big:{n}", mapping={
                "name": f"job-{n}", "data": json.dumps({"n": n}), "opts": "{}",
                "timestamp": 1_700_000_000_000 + n, "finishedOn": 1_700_000_000_500 + n,
                "returnvalue": "1"})
        pipe.zadd("bull:big:completed", {str(n): 1_700_000_000_500 + n
                                         for n in range(start, min(start + 5000, jobs))})
        pipe.execute()


def _commands(server_client: redis.Redis, client: Client, path: str) -> Dict[str, int]:
    server_client.config_resetstat()
    status, _, page = client.get(path)
    assert status == 200, page
    stats = server_client.info("commandstats")
    calls = {name[len("cmdstat_"):]: int(value["calls"]) for name, value in stats.items()}
    calls.pop("info", None)
    calls.pop("config|resetstat", None)
    calls.pop("config", None)
    return calls


PAGES = ("/queues", "/queues?page=2", "/queues/big", "/queues/big/completed",
         "/queues/big/completed?page=7", "/queues/big/completed?name=job-",
         "/queues/big/jobs/3", "/queues/q0005/wait")


@pytest.fixture
def measure(dashboard_server):
    def run(queues: int, jobs: int) -> Dict[str, Dict[str, int]]:
        with RedisServer() as server:
            admin = redis.Redis.from_url(server.url, decode_responses=True)
            _fill(admin, queues, jobs)
            with Dashboard(server.url, queue_list_ttl=3600) as board:
                client = Client(dashboard_server(board))
                client.get("/queues")          # starts the directory's background scan
                wait_until(lambda: board.queues.complete, what="the first pass")
                admin.config_resetstat()
                board.queues.loop()            # one more pass, counted
                first = {name[len("cmdstat_"):]: int(value["calls"])
                         for name, value in admin.info("commandstats").items()}
                found = {path: _commands(admin, client, path) for path in PAGES}
                found["first"] = first
            admin.close()
        return found
    return run


def test_commands_per_page_do_not_grow_with_jobs_or_queues(measure):
    small = measure(queues=120, jobs=2000)
    large = measure(queues=1000, jobs=30_000)
    assert large["first"]["scan"] > small["first"]["scan"]       # in steps, never KEYS
    assert "keys" not in large["first"]
    for path in PAGES:
        assert large[path] == small[path], path
        assert "keys" not in large[path] and "scan" not in large[path], path
        assert sum(large[path].values()) < 1500, (path, large[path])
