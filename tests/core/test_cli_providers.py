"""``orijs-sync events`` / ``orijs-sync workflows``: a provider's workers run by the
command (a subprocess), reached by an emit / execute from this process."""
from __future__ import annotations

import pytest
from cli_helpers import Running, run_cli

from orijs_sync import Queue
from orijs_sync.events import BullMQEventProvider
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow

PROVIDERS = '''
import logging
import os
import time

from orijs_sync.events import BullMQEventProvider
from orijs_sync.workflows import BullMQWorkflowProvider, Workflow, Workflow

events = BullMQEventProvider(os.environ["REDIS_URL"], queue_prefix="{ns}-ev")
events.subscribe("order.created", lambda msg: {{"ok": msg.payload["id"], "pid": os.getpid()}})


def slow(msg):
    logging.getLogger("app").warning("napping")
    time.sleep(600)


events.subscribe("slow", slow)

ADD = (Workflow("Add{ns}")
       .step("double", lambda ctx: ctx.data["x"] * 2)
       .step("plus", lambda ctx: ctx.get_result("double") + 1))


def make_workflows():
    provider = BullMQWorkflowProvider(os.environ["REDIS_URL"], queue_prefix="{ns}-wf")
    provider.register(ADD)
    return provider


def broken():
    raise RuntimeError("the factory broke")


NOT_A_PROVIDER = 42
'''


@pytest.fixture
def app(tmp_path, namespace):
    name = f"providers_{namespace.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(PROVIDERS.format(ns=namespace))
    return name


def test_events_runs_the_subscriptions_until_sigterm(redis_url, namespace, tmp_path, app):
    with Running("events", f"{app}:events", cwd=tmp_path, redis_url=redis_url) as cmd, \
            BullMQEventProvider(redis_url, queue_prefix=f"{namespace}-ev") as emitter:
        cmd.wait_for_log("events provider started")
        reply = emitter.emit("order.created", {"id": 7}).result(timeout=60)
        assert reply["ok"] == 7 and reply["pid"] == cmd.proc.pid
        cmd.terminate()
        assert cmd.wait() == 0
        assert f"events provider {app}:events" in cmd.log()


def test_events_a_second_signal_exits_at_once(redis_url, namespace, tmp_path, app):
    with Running("events", f"{app}:events", cwd=tmp_path, redis_url=redis_url) as cmd, \
            BullMQEventProvider(redis_url, queue_prefix=f"{namespace}-ev") as emitter:
        cmd.wait_for_log("events provider started")
        job_id = emitter.emit("slow", {}, timeout=0).job_id
        cmd.wait_for_log("napping")
        cmd.terminate()
        cmd.wait_for_log("warm shutdown")
        cmd.terminate()
        assert cmd.wait() == 0
        assert "cold shutdown (a second signal)" in cmd.log()
    with Queue(f"{namespace}-ev.slow", redis_url) as queue:     # given back before exiting
        assert queue.get_job_state(job_id) == "waiting"
        assert queue.get_job(job_id).attempts_made == 0


def test_events_the_shutdown_timeout_gives_the_running_job_back(redis_url, namespace,
                                                                 tmp_path, app):
    with Running("events", f"{app}:events", "--shutdown-timeout", "0.5", cwd=tmp_path,
                 redis_url=redis_url) as cmd, \
            BullMQEventProvider(redis_url, queue_prefix=f"{namespace}-ev") as emitter:
        cmd.wait_for_log("events provider started")
        job_id = emitter.emit("slow", {}, timeout=0).job_id
        cmd.wait_for_log("napping")
        cmd.terminate()
        assert cmd.wait() == 0
        assert "cold shutdown (0.5 s passed)" in cmd.log()
    with Queue(f"{namespace}-ev.slow", redis_url) as queue:
        assert queue.get_job_state(job_id) == "waiting"


def test_workflows_runs_a_factorys_provider_until_sigterm(redis_url, namespace, tmp_path, app):
    emitter = BullMQWorkflowProvider(redis_url, queue_prefix=f"{namespace}-wf")
    shape = (Workflow(f"Add{namespace}").step("double", lambda ctx: None)   # never run here
             .step("plus", lambda ctx: None))
    emitter.register_emitter(shape)
    emitter.start()
    try:
        with Running("workflows", f"{app}:make_workflows", cwd=tmp_path,
                     redis_url=redis_url) as cmd:
            cmd.wait_for_log("workflows provider started")
            handle = emitter.execute(shape, {"x": 20})
            assert handle.result(timeout=60)["plus"] == 41
            cmd.terminate()
            assert cmd.wait() == 0
    finally:
        emitter.stop()


@pytest.mark.parametrize("command, target, code, says", [
    ("events", "NOT_A_PROVIDER", 2, "is a int, not a BullMQEventProvider"),
    ("workflows", "events", 2, "not a BullMQWorkflowProvider"),
    ("events", "nothing_here", 2, "has no nothing_here"),
    ("events", "broken", 1, "RuntimeError: the factory broke"),
])
def test_a_bad_provider_is_refused(redis_url, tmp_path, app, command, target, code, says):
    proc = run_cli(command, f"{app}:{target}", cwd=tmp_path, redis_url=redis_url, code=code)
    assert says in proc.stderr
    assert ("Traceback" in proc.stderr) == (code == 1)     # a crash shows where


def test_url_and_prefix_are_the_providers_own(redis_url, tmp_path, app):
    proc = run_cli("--url", redis_url, "events", f"{app}:events", cwd=tmp_path, code=2)
    assert "--url and --prefix are the provider's own" in proc.stderr
