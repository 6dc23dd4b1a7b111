"""A real gunicorn serving ``examples.wsgi:app``, the order subscriber in its own process,
and a load of concurrent HTTP clients. Used by test_gunicorn.py (correctness only) and
bench/bench_wsgi.py (figures)."""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from orijs_sync.testing import _free_port

ROOT = Path(__file__).resolve().parents[2]


def _env(redis_url: str, queue_prefix: str) -> Dict[str, str]:
    env = dict(os.environ, REDIS_URL=redis_url, ORIJS_QUEUE_PREFIX=queue_prefix)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM by PID, then SIGKILL if it lingers."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class Subscriber:
    """``python -m examples.wsgi subscriber`` in its own process."""

    def __init__(self, redis_url: str, queue_prefix: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "examples.wsgi", "subscriber"],
                                     cwd=ROOT, env=_env(redis_url, queue_prefix),
                                     stdout=subprocess.PIPE, text=True)

    def __enter__(self) -> "Subscriber":
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()      # bounded: the process prints or dies
        if line.strip() != "READY":
            _stop(self.proc)
            raise RuntimeError(f"the subscriber did not start (said {line!r})")
        return self

    def __exit__(self, *exc: object) -> None:
        _stop(self.proc)


class Gunicorn:
    """gunicorn on a free loopback port; ``worker_class`` sync or gthread."""

    def __init__(self, redis_url: str, queue_prefix: str, *, worker_class: str,
                 preload: bool, workers: int = 2, threads: int = 8) -> None:
        self.port = _free_port()
        args = [sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{self.port}",
                "-w", str(workers), "-k", worker_class, "--log-level", "warning",
                "--graceful-timeout", "10"]
        if worker_class == "gthread":
            args += ["--threads", str(threads)]
        if preload:
            args.append("--preload")
        self.proc = subprocess.Popen(args + ["examples.wsgi:app"], cwd=ROOT,
                                     env=_env(redis_url, queue_prefix))

    def __enter__(self) -> "Gunicorn":
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}")
            try:
                if request(self.port, "GET", "/ping")[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                _stop(self.proc)
                raise RuntimeError("gunicorn did not answer within 60 s")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        _stop(self.proc)


def request(port: int, method: str, path: str, body: Optional[Dict[str, Any]] = None,
            headers: Optional[Dict[str, str]] = None) -> Tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload,
                     headers={"Content-Type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"null")
    finally:
        conn.close()


def fire(port: int, count: int, clients: int, path: str = "/orders") -> Dict[str, Any]:
    """``count`` requests from ``clients`` threads; returns the answers by request number
    and each request's latency (seconds), plus the wall time."""
    answers: Dict[int, Tuple[int, Any]] = {}
    latencies: List[float] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        began = time.perf_counter()
        if path == "/orders":
            answer = request(port, "POST", path, {"id": n, "items": ["book"] * (n % 3 + 1)},
                             {"X-Request-Id": f"req-{n}"})
        else:
            answer = request(port, "GET", path)
        took = time.perf_counter() - began
        with lock:
            answers[n] = answer
            latencies.append(took)

    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(count)))
    return {"answers": answers, "latencies": latencies, "seconds": time.perf_counter() - began}


def expected(n: int) -> Dict[str, Any]:
    """The answer request ``n`` must get (examples.flask_app.handle_order_created)."""
    return {"orderId": n, "status": "accepted", "items": n % 3 + 1, "requestId": f"req-{n}"}
