"""Sequential adds on a throwaway Redis: adds/s and Redis' own time per command (INFO
commandstats). Compare two commits by pointing PYTHONPATH at each checkout in turn:

    PYTHONPATH=/path/to/before python3 bench/bench_seq_add.py
    PYTHONPATH=/path/to/after python3 bench/bench_seq_add.py
"""
from __future__ import annotations

import socket
import subprocess
import time

import redis

from orijs_sync import Queue

WARM_UP, N = 500, 5000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        queue = Queue("bench-seq-add", connection=f"redis://127.0.0.1:{port}/0")
        admin = redis.Redis(port=port)
        for i in range(WARM_UP):
            queue.add("x", {"i": i}, remove_on_complete=True)
        admin.config_resetstat()
        started = time.perf_counter()
        for i in range(N):
            queue.add("x", {"i": i}, remove_on_complete=True)
        seconds = time.perf_counter() - started
        stats = admin.info("commandstats")
        print(f"{N / seconds:.0f} adds/s; Redis us per call: " + ", ".join(
            f"{k[8:]} {v['usec_per_call']}" for k, v in sorted(stats.items())))
        queue.close()
        admin.close()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
