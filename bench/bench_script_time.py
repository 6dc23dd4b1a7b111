#!/usr/bin/env python
"""Where Redis's time goes in a 3-step workflow: each script's calls and duration, and
the Redis commands the scripts run inside, from the slow log.

    python bench/bench_script_time.py            # starts a redis-server of its own
    python bench/bench_script_time.py --count 500

A redis-server of its own (its slow log is set to record every command) runs the
workflow provider's Workers in this process; after a warm-up, ``count`` sequential
``execute().result()`` calls are logged. Each script call is named from its SHA1.
Per workflow it prints, for each script and each command the scripts run: calls,
median microseconds, total microseconds. A command run inside a script is logged on
its own as well, so its time is part of its script's, not added to it. Prints the
figures; asserts nothing. Run by hand.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import redis  # noqa: E402

from orijs_sync.store.scripts import Scripts  # noqa: E402
from orijs_sync.testing import RedisServer  # noqa: E402
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow  # noqa: E402

LUA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "orijs_sync", "lua")


def script_names(client: redis.Redis) -> Dict[str, str]:
    """SHA1 -> script name, for every script under orijs_sync/lua/ (groups/ included)."""
    scripts = Scripts(client)
    names = {}
    for folder in (LUA, os.path.join(LUA, "groups")):
        for file in sorted(os.listdir(folder)):
            if file.endswith(".lua"):
                name = os.path.relpath(os.path.join(folder, file), LUA)[:-4]
                names[scripts.get(name).sha] = name
    return names


def run(count: int) -> None:
    wf = (Workflow("Bench").step("a", lambda ctx: {"a": ctx.data["n"]})
          .step("b", lambda ctx: {"b": ctx.get_result("a")["a"] + 1})
          .step("c", lambda ctx: {"c": ctx.get_result("b")["b"] + 1}))
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        provider = BullMQWorkflowProvider(server.url, queue_prefix="bench.workflow",
                                          concurrency=16)
        provider.register(wf)
        with provider:
            for n in range(200):
                provider.execute(wf, {"n": n}).result(timeout=20)
            client.config_set("slowlog-max-len", 400 * count)
            client.config_set("slowlog-log-slower-than", 0)
            client.slowlog_reset()
            for n in range(count):
                provider.execute(wf, {"n": n}).result(timeout=20)
            entries = client.slowlog_get(400 * count)
            client.config_set("slowlog-log-slower-than", 10000)
        report(entries, script_names(client), count)


def report(entries: List[Dict], names: Dict[str, str], count: int) -> None:
    durations: Dict[str, List[int]] = collections.defaultdict(list)
    for entry in entries:
        command = entry["command"]
        words = (command.decode() if isinstance(command, bytes) else command).split()
        key = words[0].upper()
        if key == "EVALSHA":
            key = "script " + names.get(words[1], words[1][:12])
        elif key in ("SLOWLOG", "CONFIG", "INFO"):
            continue
        durations[key].append(entry["duration"])
    scripts = sum(sum(v) for k, v in durations.items() if k.startswith("script "))
    inside = sum(sum(v) for k, v in durations.items() if not k.startswith("script "))
    print(f"{count} workflows; per workflow: calls, median µs, total µs")
    for key, values in sorted(durations.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {key:<28} {len(values) / count:6.2f} {statistics.median(values):8.0f} "
              f"{sum(values) / count:8.0f}")
    print(f"scripts {scripts / count:.0f} µs per workflow, of which the commands they run "
          f"{inside / count:.0f} µs (the rest: Lua itself, arguments, replies)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    run(parser.parse_args().count)


if __name__ == "__main__":
    main()
