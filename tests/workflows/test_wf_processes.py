"""Workflows across OS processes: the test process starts them (emitter only), step
processes (wf_process.py) run them; one step process is killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

from orijs_sync import Queue
from orijs_sync.workflows import WorkflowFailedError
from wf_definitions import make_workflows
from wf_helpers import GUARD

SCRIPT = Path(__file__).resolve().parent / "wf_process.py"


class StepProcesses:
    def __init__(self, url: str, queue_prefix: str, log_dir: Path) -> None:
        self.url, self.queue_prefix, self.log_dir = url, queue_prefix, log_dir
        self.procs: List[subprocess.Popen] = []

    def spawn(self, concurrency: int = 4) -> subprocess.Popen:
        log = open(self.log_dir / f"step-process-{len(self.procs)}.log", "w")
        proc = subprocess.Popen([sys.executable, str(SCRIPT), self.url, self.queue_prefix,
                                 str(concurrency)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", f"step process did not start: {line!r}, see {log.name}"
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.close()          # the process stops its provider and exits
        for proc in self.procs:
            try:
                code = proc.wait(timeout=GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                raise
            assert code in (0, -signal.SIGKILL), f"step process exited with {code}"


@pytest.fixture
def steps(redis_url, namespace, tmp_path) -> Iterator[StepProcesses]:
    procs = StepProcesses(redis_url, f"{namespace}.workflow", tmp_path)
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture
def emitter(bullmq, redis_url):
    workflows = make_workflows(redis_url, bullmq.queue_prefix)
    provider = bullmq()
    for name in workflows:
        provider.register_emitter(name)
    return provider, workflows


def test_two_processes(steps, emitter, r):
    provider, workflows = emitter
    remote = workflows["Remote"]
    worker = steps.spawn()
    handles = [provider.execute(remote, {"orderId": str(n)}, meta={"traceId": f"t{n}"})
               for n in range(20)]
    for n, handle in enumerate(handles):
        result = handle.result(timeout=GUARD)
        assert set(result) == {"validate", "charge", "email", "sms", "fulfill"}
        assert {step["pid"] for step in result.values()} == {worker.pid}
        assert all(step["meta"] == {"traceId": f"t{n}"} for step in result.values())
        assert result["fulfill"]["prior"] == ["charge", "email", "sms", "validate"]
    assert worker.pid != os.getpid()

    failing = provider.execute(remote, {"orderId": "9", "fail_at": "fulfill",
                                        "fail_rollback": "email"})
    with pytest.raises(WorkflowFailedError) as info:
        failing.result(timeout=GUARD)
    err = info.value
    assert (err.primary.step_name, err.primary.error_type, err.primary.message) == \
        ("fulfill", "ValueError", "fulfill refused order 9")
    assert err.rolled_back == ["charge", "validate"]
    assert [(e.step_name, e.message) for e in err.rollback_errors] == \
        [("email", "rollback email failed")]
    rollbacks = r.lrange(f"{steps.queue_prefix}:rollbacks:{failing.id}", 0, -1)
    assert rollbacks == [f"{name}@{worker.pid}" for name in ("email", "charge", "validate")]
    assert failing.status() == "failed"

    first = provider.execute(remote, {"orderId": "7"}, idempotency_key="order-7")
    second = provider.execute(remote, {"orderId": "7"}, idempotency_key="order-7")
    assert first.result(timeout=GUARD) == second.result(timeout=GUARD)
    assert r.llen(f"{steps.queue_prefix}:runs:order-7") == 5      # each step ran once


def test_three_processes_share_the_steps(steps, emitter, r):
    provider, workflows = emitter
    hold = workflows["Hold"]
    one, two = steps.spawn(concurrency=1), steps.spawn(concurrency=1)
    started = f"{steps.queue_prefix}:started"
    blocked = provider.execute(hold, {"gate": "g1"})
    assert r.blpop([started], timeout=GUARD)          # one process holds the gate: busy
    free = provider.execute(hold, {})                 # so the other one runs this one
    result = free.result(timeout=GUARD)
    r.rpush(f"{steps.queue_prefix}:gate:g1", "open")
    held = blocked.result(timeout=GUARD)
    assert {held["hold"], result["hold"]} == {one.pid, two.pid}
    assert result["after"] == {"pid": result["hold"], "hold": result["hold"]}  # other one busy
    assert held["after"]["hold"] == held["hold"]


def test_kill_9_during_a_step_another_process_finishes_the_workflow(steps, emitter, r,
                                                                    redis_url):
    provider, workflows = emitter
    victim = steps.spawn(concurrency=1)
    handle = provider.execute(workflows["Hold"], {"hang_pid": victim.pid})   # 30 s + 5 s
    started = f"{steps.queue_prefix}:started"
    assert r.blpop([started], timeout=GUARD)[1] == f"{handle.id}@{victim.pid}"
    rescuer = steps.spawn(concurrency=1)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=GUARD)
    # Within the effective timeout (default 30 s + stall interval 5 s), or the handle
    # would fail with WorkflowTimeoutError: the victim's lock expires (lock duration =
    # stall interval), the rescuer's stalled check moves the step back to wait.
    result = handle.result(timeout=60)
    assert result == {"hold": rescuer.pid, "after": {"pid": rescuer.pid, "hold": rescuer.pid}}
    with Queue(f"{steps.queue_prefix}.Hold.steps", connection=redis_url) as queue:
        assert queue.get_job(f"{handle.id}-step-hold").stalled_counter == 1
