"""orijs_sync.contrib.flask with a real Flask app: views that add a job and that emit and
wait for the answer (a Worker and a subscriber running in the test), the config checked,
the provider stopped at exit, and a real gunicorn --preload whose master used the
extension before forking its workers."""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from urllib.parse import urlparse

import pytest
from contrib_helpers import ROOT, subprocess_env

from orijs_sync import Worker, errors
from orijs_sync.events import BullMQEventProvider
from orijs_sync.testing import _free_port, wait_until

flask = pytest.importorskip("flask")

from orijs_sync.contrib.flask import OrijsSync  # noqa: E402

GUARD = 30.0


def make_app(orijs, qname, event, **config):
    app = flask.Flask(__name__)
    app.config.update(config)
    orijs.init_app(app)

    @app.post("/orders/<int:n>")
    def add_order(n):
        job = orijs.queue(qname).add("double", {"n": n})
        return flask.jsonify(job=job.id)

    @app.post("/ask/<int:n>")
    def ask(n):
        return flask.jsonify(orijs.events.emit(event, {"n": n}).result(timeout=5))

    return app


@pytest.fixture
def subscriber(redis_url):
    provider = BullMQEventProvider(redis_url).start()
    yield provider
    provider.stop(timeout=10)


def test_views_add_a_job_and_emit_and_wait_for_the_answer(redis_url, qname, namespace,
                                                          queue, subscriber):
    event = f"order.asked.{namespace}"
    subscriber.subscribe(event, lambda message: {"twice": message.payload["n"] * 2,
                                                 "pid": os.getpid()})
    orijs = OrijsSync()
    app = make_app(orijs, qname, event, ORIJS_SYNC_URL=redis_url)
    client = app.test_client()
    with Worker(qname, lambda job: job.data["n"] + 1, connection=redis_url):
        ids = [client.post(f"/orders/{n}").get_json()["job"] for n in range(3)]
        wait_until(lambda: all(queue.get_job_state(i) == "completed" for i in ids), GUARD)
    assert [queue.get_job(i).returnvalue for i in ids] == [1, 2, 3]
    answers = [client.post(f"/ask/{n}").get_json() for n in (4, 5)]
    assert answers == [{"twice": 8, "pid": os.getpid()}, {"twice": 10, "pid": os.getpid()}]
    with app.app_context():
        assert orijs.queue(qname) is orijs.queue(qname)       # one per process
        assert orijs.hub().events is orijs.events
    orijs.close(app, timeout=10)
    with app.app_context(), pytest.raises(errors.ShutdownError):
        orijs.queue(qname)


def test_the_connection_as_options_and_the_prefix(redis_url, namespace, r):
    parsed = urlparse(redis_url)
    orijs = OrijsSync()
    app = make_app(orijs, "q", "e", ORIJS_SYNC_CONNECTION={"host": parsed.hostname,
                                                          "port": parsed.port},
                   ORIJS_SYNC_PREFIX=namespace,
                   ORIJS_SYNC_DEFAULT_JOB_OPTIONS={"attempts": 4})
    try:
        with app.app_context():
            job = orijs.queue("q").add("x", {})
        assert r.exists(f"{namespace}:q:{job.id}")
        assert json.loads(r.hget(f"{namespace}:q:{job.id}", "opts"))["attempts"] == 4
    finally:
        orijs.close(app)


@pytest.mark.parametrize("config, error, message", [
    ({"ORIJS_SYNC_PREFX": "x"}, errors.UnknownOption, "did you mean 'ORIJS_SYNC_PREFIX'"),
    ({"ORIJS_SYNC": {"prefix": "x"}}, errors.UnknownOption, "ORIJS_SYNC_URL"),
    ({"ORIJS_SYNC_URL": "redis://a", "ORIJS_SYNC_CONNECTION": {}}, errors.InvalidArgument,
     "give one of them"),
    ({"ORIJS_SYNC_URL": 6379}, errors.InvalidArgumentType, r"ORIJS_SYNC_URL'\] must be"),
    ({"ORIJS_SYNC_URL": "nope://x"}, errors.InvalidArgument, r"ORIJS_SYNC_URL'\]"),
    ({"ORIJS_SYNC_PREFIX": ""}, errors.InvalidArgument, r"ORIJS_SYNC_PREFIX'\]"),
    ({"ORIJS_SYNC_DEFAULT_JOB_OPTIONS": {"atempts": 2}}, errors.UnknownOption, "attempts"),
    ({"ORIJS_SYNC_EVENTS": {"default_timeout": -1}}, errors.InvalidArgument,
     r"ORIJS_SYNC_EVENTS'\]: default_timeout"),
    ({"ORIJS_SYNC_WORKFLOWS": {"retries": 2}}, errors.UnknownOption, r"ORIJS_SYNC_WORKFLOWS"),
])
def test_the_config_is_checked_by_init_app(config, error, message):
    app = flask.Flask(__name__)
    app.config.update(config)
    with pytest.raises(error, match=message):
        OrijsSync().init_app(app)
    assert "orijs_sync" not in app.extensions


def test_misuse_is_refused(redis_url):
    app = flask.Flask(__name__)
    app.config["ORIJS_SYNC_URL"] = redis_url
    orijs = OrijsSync()
    with pytest.raises(errors.InvalidStateError, match="no Flask app"):
        orijs.queue("q")
    with pytest.raises(errors.InvalidStateError, match="not set up"):
        orijs.hub(app)
    with pytest.raises(errors.InvalidArgumentType):
        orijs.init_app("app")
    orijs.init_app(app)
    with pytest.raises(errors.InvalidStateError, match="already set up"):
        orijs.init_app(app)
    with app.app_context(), pytest.raises(errors.InvalidArgument):
        orijs.queue("bad:name")
    bound = OrijsSync(flask.Flask("bound", root_path=str(ROOT)))
    assert bound.queue("q").name == "q"        # outside any app context: its own app
    bound.close()
    orijs.close(app)


def test_the_event_provider_is_stopped_at_exit(redis_url, tmp_path):
    script = tmp_path / "app_exit.py"
    script.write_text(textwrap.dedent(f"""
        import atexit
        import flask
        from orijs_sync.contrib.flask import OrijsSync
        from orijs_sync.testing import orijs_threads

        made = {{}}

        def after_the_extension():        # registered first: runs after its exit hook
            print("AT EXIT", made["events"]._state, len(orijs_threads()), flush=True)

        atexit.register(after_the_extension)
        app = flask.Flask("exit")
        app.config["ORIJS_SYNC_URL"] = {redis_url!r}
        orijs = OrijsSync(app)
        made["events"] = orijs.events
        print("RUNNING", made["events"]._state, len(orijs_threads()) > 0, flush=True)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env=subprocess_env({}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["RUNNING started True", "AT EXIT stopped 0"]


def _request(port, method, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"null")
    finally:
        conn.close()


def _wait_for_gunicorn(proc, port):
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            return _request(port, "GET", "/ping")
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"gunicorn did not answer (exit status {proc.poll()})")


def test_gunicorn_preload_workers_use_the_masters_extension(redis_url, namespace, queue, qname,
                                                           subscriber):
    pytest.importorskip("gunicorn")
    event = f"ask.{namespace}"
    subscriber.subscribe(event, lambda message: {"to": message.payload["pid"]})
    port = _free_port()
    env = subprocess_env({"ORIJS_TEST_REDIS_URL": redis_url, "ORIJS_TEST_QUEUE": qname,
                          "ORIJS_TEST_EVENT": event})
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{port}",
                             "-w", "2", "-k", "gthread", "--threads", "4", "--preload",
                             "--graceful-timeout", "20", "--log-level", "warning",
                             "--chdir", str(ROOT / "tests" / "contrib"), "flask_wsgi:app"],
                            env=env)
    try:
        _wait_for_gunicorn(proc, port)
        asked = [_request(port, "POST", "/ask") for _ in range(12)]
        added = [_request(port, "POST", "/add") for _ in range(12)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(GUARD) == 0                # workers' exit hooks did not hang
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    pids = {body["pid"] for _, body in asked + added}
    assert proc.pid not in pids
    assert all(status == 200 and body["answer"] == {"to": body["pid"]} for status, body in asked)
    jobs = {job.name: job for job in queue.get_jobs(["waiting"], 0, -1)}
    assert queue.get_job_counts()["waiting"] == 13          # 12 from workers, 1 from master
    assert jobs["from-master"].data["pid"] == proc.pid
    assert {queue.get_job(body["job"]).data["pid"] for _, body in added} <= pids
