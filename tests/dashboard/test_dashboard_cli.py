"""``orijs-sync dashboard``, run as a user would (a subprocess): serves on loopback,
stops cleanly on SIGINT and SIGTERM."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from orijs_sync import Queue
from orijs_sync.cli.main import build_parser
from orijs_sync.testing import wait_until


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_a_signal(redis_url, prefix, stop_signal):
    with Queue("cliq", connection=redis_url, prefix=prefix) as q:
        q.add("x", {})
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "orijs_sync.cli", "--url", redis_url,
                             "--prefix", prefix, "dashboard", "--port", str(port),
                             "--read-only"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/queues") or proc.poll() is not None,
                   30, "the dashboard answers")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/queues/cliq", timeout=5) as reply:
            page = reply.read().decode()
        assert "cliq" in page and "read-only" in page and "csrf_token" not in page
        proc.send_signal(stop_signal)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    err = proc.stderr.read() if proc.stderr else ""
    assert f"http://127.0.0.1:{port}/" in err and "stopped" in err
    assert "Traceback" not in err


def test_binds_to_loopback_by_default():
    args = build_parser().parse_args(["dashboard"])
    assert args.host == "127.0.0.1" and args.port == 8080 and args.read_only is False
