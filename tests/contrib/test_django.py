"""orijs_sync.contrib.django in a real Django project (django_project/: SQLite in a temp
dir, one app with one model, its migrations applied): jobs and events sent on commit and
never for a rolled-back transaction, the settings checked, ``manage.py orijs_worker`` as
a subprocess, and ``manage.py test`` with the throwaway-Redis test runner."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
import redis
from contrib_helpers import PROJECT, subprocess_env

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until

pytest.importorskip("django")

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from orijs_sync.contrib import django as orijs_django  # noqa: E402
from orijs_sync.contrib.django import add_on_commit, emit_on_commit, get_queue  # noqa: E402

GUARD = 30.0


@pytest.fixture(autouse=True)
def project(django_env):
    """Each test gets the process's hub afresh (closed after it)."""
    yield django_env
    orijs_django.close(timeout=10)


@pytest.fixture
def order_model():
    from shop.models import Order
    return Order


@pytest.fixture
def worker_runs(redis_url, qname):
    """A Worker on the test's queue running shop.tasks.mark_paid; the ids it ran."""
    from shop.tasks import mark_paid

    from orijs_sync.contrib.django.management.commands.orijs_worker import (
        with_fresh_connections,
    )
    ran = []

    def handler(job):
        ran.append(job.id)
        return mark_paid(job)

    with Worker(qname, with_fresh_connections(handler), connection=redis_url):
        yield ran


def _sentinel_done(queue, ran):
    """Add a job directly and wait until the Worker ran it: whatever was added before
    it has run too (one queue, one Worker, first in first out)."""
    job = queue.add("sentinel", {"order": -1})
    wait_until(lambda: job.id in ran, GUARD, "the sentinel job")
    return job


def test_add_on_commit_adds_after_the_commit_and_the_worker_runs_it(order_model, qname,
                                                                     worker_runs):
    queue = get_queue(qname)
    with transaction.atomic():
        order = order_model.objects.create(item="book")
        add_on_commit(qname, "pay", {"order": order.pk}, job_id=f"order-{order.pk}")
        assert queue.get_job(f"order-{order.pk}") is None        # nothing before commit
    wait_until(lambda: queue.get_job_state(f"order-{order.pk}") == "completed", GUARD)
    assert queue.get_job(f"order-{order.pk}").returnvalue == {"order": order.pk, "updated": 1}
    order.refresh_from_db()
    assert order.paid is True


def test_a_rolled_back_transaction_never_adds_its_job(order_model, qname, worker_runs):
    queue = get_queue(qname)
    with pytest.raises(RuntimeError, match="boom"):
        with transaction.atomic():
            order = order_model.objects.create(item="lamp")
            add_on_commit(qname, "pay", {"order": order.pk}, job_id="rolled-back")
            raise RuntimeError("boom")
    assert not order_model.objects.filter(pk=order.pk).exists()
    sentinel = _sentinel_done(queue, worker_runs)
    assert worker_runs == [sentinel.id]                 # the rolled-back job never ran
    assert queue.get_job("rolled-back") is None
    assert sum(queue.get_job_counts().values()) == 1     # the sentinel alone, completed


def test_a_rolled_back_savepoint_drops_its_job_only(order_model, qname, worker_runs):
    queue = get_queue(qname)
    with transaction.atomic():
        kept = order_model.objects.create(item="kept")
        add_on_commit(qname, "pay", {"order": kept.pk}, job_id="kept")
        try:
            with transaction.atomic():
                add_on_commit(qname, "pay", {"order": -2}, job_id="dropped")
                raise ValueError("inner")
        except ValueError:
            pass
    wait_until(lambda: queue.get_job_state("kept") == "completed", GUARD)
    _sentinel_done(queue, worker_runs)
    assert "dropped" not in worker_runs and queue.get_job("dropped") is None


def test_outside_a_transaction_the_job_is_added_at_once(qname):
    add_on_commit(qname, "pay", {"order": 1}, job_id="now", delay=60)
    assert get_queue(qname).get_job_state("now") == "delayed"


def test_bad_arguments_raise_at_the_call_and_nothing_is_added(qname):
    queue = get_queue(qname)
    with transaction.atomic():
        with pytest.raises(errors.UnknownOption, match="did you mean 'attempts'"):
            add_on_commit(qname, "pay", {"order": 1}, attempt=3)
        with pytest.raises(TypeError):
            add_on_commit(qname, "pay", {"order": {1, 2}})          # not JSON
        with pytest.raises(errors.InvalidArgument):
            add_on_commit("bad:name", "pay", {})
        with pytest.raises(errors.InvalidArgumentType):
            add_on_commit(qname, "pay", {}, robust="yes")
        with pytest.raises(errors.InvalidArgument):
            emit_on_commit("bad:event", {})
        with pytest.raises(TypeError):
            emit_on_commit("ok", {"when": object()})
    assert sum(queue.get_job_counts().values()) == 0


def test_the_data_is_copied_at_the_call(qname):
    data = {"items": ["a"]}
    with transaction.atomic():
        add_on_commit(qname, "pay", data, job_id="copied")
        data["items"].append("changed later")
    assert get_queue(qname).get_job("copied").data == {"items": ["a"]}


def test_emit_on_commit_reaches_the_subscriber_and_never_when_rolled_back(namespace):
    events = orijs_django.get_events()
    received = []
    seen = threading.Event()

    def handler(message):
        received.append(message.payload["n"])
        if message.payload["n"] == "last":
            seen.set()

    event = f"order.paid.{namespace}"
    events.subscribe(event, handler)
    with transaction.atomic():
        emit_on_commit(event, {"n": 1})
        assert received == []
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            emit_on_commit(event, {"n": 2})
            raise RuntimeError("rolled back")
    emit_on_commit(event, {"n": "last"})            # outside a transaction: at once
    assert seen.wait(GUARD)
    wait_until(lambda: 1 in received, GUARD, "the committed event")
    assert sorted(map(str, received)) == ["1", "last"]   # never the rolled-back one
    event_queue = events.queue_manager.get_queue(event)
    wait_until(lambda: event_queue.get_job_counts()["completed"] == 2, GUARD)
    assert sum(event_queue.get_job_counts().values()) == 2      # never added


def test_emit_on_commit_keeps_the_meta_of_the_call(namespace):
    from orijs_sync.events import propagation_context
    events = orijs_django.get_events()
    metas = []
    events.subscribe(f"meta.{namespace}", lambda message: metas.append(message.meta))
    with transaction.atomic():
        with propagation_context({"requestId": "r-1"}):
            emit_on_commit(f"meta.{namespace}", {})
    wait_until(lambda: metas, GUARD, "the event")
    assert metas[0]["requestId"] == "r-1"


def test_settings_are_checked_with_clear_errors(redis_url):
    with override_settings(ORIJS_SYNC={"conection": redis_url}):
        with pytest.raises(ImproperlyConfigured, match="did you mean 'connection'"):
            orijs_django.get_hub()
    with override_settings(ORIJS_SYNC={"events": {"queue_prefx": "e"}}):
        with pytest.raises(ImproperlyConfigured, match=r"ORIJS_SYNC\['events'\].*queue_prefix"):
            orijs_django.check_settings()
    with override_settings(ORIJS_SYNC={"workflows": {"stall_interval": 1}}):
        with pytest.raises(ImproperlyConfigured, match=r"ORIJS_SYNC\['workflows'\].*5"):
            orijs_django.get_hub()
    with override_settings(ORIJS_SYNC={"prefix": 3}):
        with pytest.raises(ImproperlyConfigured, match=r"ORIJS_SYNC\['prefix'\]"):
            orijs_django.get_hub()
    with override_settings(ORIJS_SYNC={"connection": 12}):
        with pytest.raises(ImproperlyConfigured, match=r"ORIJS_SYNC\['connection'\]"):
            orijs_django.get_hub()


def test_a_changed_setting_gives_a_new_hub(redis_url):
    before = orijs_django.get_hub()
    with override_settings(ORIJS_SYNC={"connection": redis_url, "prefix": "other"}):
        assert orijs_django.get_hub().prefix == "other"
    assert before.closed
    assert orijs_django.get_hub().prefix == "bull"
    assert orijs_django.get_hub() is orijs_django.get_hub()


def test_a_forked_child_adds_with_the_parents_hub(qname):
    queue = get_queue(qname)
    queue.add("before-fork", {})                 # the pool has a socket open
    pid = os.fork()
    if pid == 0:                                  # the child: add, then leave at once
        code = 1
        try:
            add_on_commit(qname, "from-child", {"pid": os.getpid()}, job_id="child")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert queue.get_job("child").data["pid"] == pid
    assert queue.get_job_counts()["waiting"] == 2


def _manage(*args, env, **kw):
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=str(PROJECT),
                            env=subprocess_env(env), **kw)


def test_the_worker_command_runs_a_job_and_exits_0_on_sigterm(project, order_model, qname,
                                                              namespace, tmp_path):
    order = order_model.objects.create(item="pen")
    queue = get_queue(qname)
    job = queue.add("pay", {"order": order.pk})
    with open(tmp_path / "worker.log", "w+") as log:
        proc = _manage("orijs_worker", qname, "shop.tasks:mark_paid", "--concurrency", "2",
                       "--name", f"w-{namespace}", env=project, stdout=log, stderr=log)
        try:
            wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD,
                       "the worker command to run the job")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(GUARD) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        log.seek(0)
        output = log.read()
    assert queue.get_job(job.id).returnvalue == {"order": order.pk, "updated": 1}
    order.refresh_from_db()
    assert order.paid is True                     # the subprocess's Django wrote it
    assert f"job {job.id} (pay) of {qname} completed" in output


def test_the_worker_command_takes_the_new_worker_options(project, order_model, qname):
    order = order_model.objects.create(item="ink")
    queue = get_queue(qname)
    job = queue.add("pay", {"order": order.pk})
    proc = _manage("orijs_worker", "-Q", f"{qname}=shop.tasks:mark_paid", "--log-format",
                   "json", "--shutdown-timeout", "5", env=project, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: queue.get_job_state(job.id) == "completed", GUARD,
                   "the worker command to run the job")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    done = [line for line in lines if line.get("job_id") == job.id]
    assert done and done[0]["queue"] == qname and done[0]["job_name"] == "pay"
    refused = _manage("orijs_worker", qname, "shop.tasks:mark_paid", "--processes", "2",
                      env=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and "--processes: this command runs its handlers" in err


def test_the_worker_command_reports_a_bad_handler_with_status_2(project, qname):
    proc = _manage("orijs_worker", qname, "no_colon_here", env=project,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "module:function" in err


def test_the_worker_command_has_the_cli_worker_options():
    from orijs_sync.cli.main import build_parser
    from orijs_sync.contrib.django.management.commands.orijs_worker import Command

    def options(parser):
        return {opt for action in parser._actions for opt in action.option_strings} | \
            {action.dest for action in parser._actions if not action.option_strings}

    cli = build_parser()
    worker = next(a for a in cli._actions if a.dest == "command").choices["worker"]
    ours = options(Command().create_parser("manage.py", "orijs_worker"))
    # --json: the CLI's output switch, given to every command; a worker prints no result
    assert options(worker) - {"-h", "--help", "--json"} <= ours
    assert {"--url", "--prefix"} <= ours


def test_manage_py_test_runs_on_a_throwaway_redis(project):
    proc = _manage("test", "shop", "-v", "2", env=project, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "test_the_run_has_its_own_redis" in err and "OK" in err
    url = re.search(r"THROWAWAY (\S+)", out).group(1)
    assert url != project["ORIJS_TEST_REDIS_URL"]
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        with pytest.raises(redis.exceptions.ConnectionError):   # stopped after the run
            client.ping()
    finally:
        client.close()
