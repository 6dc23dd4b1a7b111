"""Emitter in the test process, subscriber in another OS process, same Redis."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orijs_sync import errors

SCRIPT = Path(__file__).resolve().parent / "subscriber_process.py"


@pytest.fixture
def subscriber(redis_url, namespace):
    prefix = f"{namespace}.event"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), redis_url, prefix],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", f"subscriber did not start: {line!r} " \
                                        f"{proc.stderr.read() if proc.poll() is not None else ''}"
        yield proc
        proc.stdin.close()          # the subscriber stops its provider and exits
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_subscriber_in_another_process(bullmq_provider, subscriber):
    provider = bullmq_provider()
    sub = provider.emit("greet.remote", {"name": "ada"}, meta={"requestId": "r-9"})
    result = sub.result(timeout=20)
    assert result["hello"] == "ada" and result["meta"] == {"requestId": "r-9"}
    assert result["pid"] == subscriber.pid != os.getpid()
    assert result["causationId"] is None


def test_propagation_crosses_processes(bullmq_provider, subscriber):
    provider = bullmq_provider()
    outer = provider.emit("chain", {"name": "bob"}, meta={"traceId": "t-77"})
    result = outer.result(timeout=30)
    # The remote handler emitted greet.remote from inside its handler: same meta, and the
    # chain event is its cause.
    assert result["inner"]["meta"] == {"traceId": "t-77"}
    assert result["inner"]["causationId"] == outer.event_id
    assert result["pid"] == result["inner"]["pid"] == subscriber.pid


def test_many_emits_to_another_process(bullmq_provider, subscriber):
    provider = bullmq_provider()
    subs = [provider.emit("greet.remote", {"name": f"n{i}"}) for i in range(200)]
    assert [s.result(timeout=30)["hello"] for s in subs] == [f"n{i}" for i in range(200)]
    with pytest.raises(errors.TimeoutError):
        provider.emit("not.subscribed.remotely", {}, timeout=0.3).result(timeout=10)
