"""``orijs-sync worker`` run as a user would (a subprocess, real signals, real Redis):
handler forms, several queues, the import path, logging, the banner, warm and cold
shutdown, exit statuses."""
from __future__ import annotations

import json
import socket

import pytest
from cli_helpers import Running, run_cli

from orijs_sync import Queue
from orijs_sync.cli.logs import mask_url
from orijs_sync.testing import wait_until

TASKS = '''
import time
from orijs_sync import Tasks

tasks = Tasks(prefix="{prefix}")


@tasks.task(queue="{q}-mail")
def send(to: str) -> str:
    if to == "bad":
        raise ValueError(f"cannot send to {{to}}")
    return "sent " + to


@tasks.task(queue="{q}-img")
def resize(n: int) -> int:
    return n * 10


def double(job):
    return job.data["n"] * 2


def sleepy(job):
    time.sleep(job.data["sleep"])
    return "woke"


ROUTES = {{"up": lambda job: job.data["s"].upper(), "down": lambda job: job.data["s"].lower()}}
'''


@pytest.fixture
def app(tmp_path, qname, namespace):
    """A module of handlers and tasks in the command's current folder only."""
    (tmp_path / f"app_{namespace}.py").write_text(TASKS.format(q=qname, prefix="bull"))
    return f"app_{namespace}"


def done(queue, job):
    return queue.get_job_state(job.id) in ("completed", "failed")


def test_a_module_of_the_current_folder_imports_without_pythonpath(queue, redis_url, qname,
                                                                   tmp_path, app):
    job = queue.add("x", {"n": 21})
    with Running("worker", qname, f"{app}:double", cwd=tmp_path, redis_url=redis_url) as w:
        wait_until(lambda: done(queue, job), 60, "the job to run")
        w.terminate()
        assert w.wait() == 0
    assert queue.get_job(job.id).returnvalue == 42


def test_path_adds_a_folder_to_import_from(queue, redis_url, qname, tmp_path, app):
    other = tmp_path / "elsewhere"
    other.mkdir()
    job = queue.add("x", {"n": 4})
    with Running("worker", qname, f"{app}:double", "--path", str(tmp_path), cwd=other,
                 redis_url=redis_url) as w:
        wait_until(lambda: done(queue, job), 60, "the job to run")
        w.terminate()
        assert w.wait() == 0
    assert queue.get_job(job.id).returnvalue == 8
    refused = run_cli("worker", qname, f"{app}:double", cwd=other, redis_url=redis_url,
                      code=2)                      # without --path: not importable
    assert "cannot import module" in refused.stderr and "Traceback" not in refused.stderr


def test_a_module_of_tasks_serves_every_queue_its_tasks_declare(redis_url, qname, tmp_path,
                                                                app):
    with Queue(f"{qname}-mail", redis_url) as mail, Queue(f"{qname}-img", redis_url) as img:
        sent, bad, resized = mail.add("send", {"to": "x"}), mail.add("send", {"to": "bad"}), \
            img.add("resize", {"n": 3})
        with Running("worker", app, cwd=tmp_path, redis_url=redis_url) as w:
            wait_until(lambda: done(mail, sent) and done(mail, bad) and done(img, resized),
                       60, "the tasks to run")
            w.terminate()
            assert w.wait() == 0
            log = w.log()
        assert mail.get_job(sent.id).returnvalue == "sent x"
        assert mail.get_job(bad.id).failed_reason == "cannot send to bad"
        assert img.get_job(resized.id).returnvalue == 30
    assert f"queue {qname}-mail: tasks send ({app})" in log
    assert f"queue {qname}-img: tasks resize ({app})" in log


def test_several_queues_with_a_mapping_and_a_function(redis_url, qname, tmp_path, app):
    with Queue(f"{qname}-a", redis_url) as qa, Queue(f"{qname}-b", redis_url) as qb:
        up, down, doubled = qa.add("up", {"s": "x"}), qa.add("down", {"s": "Y"}), \
            qb.add("any", {"n": 5})
        with Running("worker", "-Q", f"{qname}-a={app}:ROUTES", "--queue",
                     f"{qname}-b={app}:double", cwd=tmp_path, redis_url=redis_url) as w:
            wait_until(lambda: all(done(q, j) for q, j in
                                   ((qa, up), (qa, down), (qb, doubled))), 60, "jobs run")
            w.terminate()
            assert w.wait() == 0
        assert (qa.get_job(up.id).returnvalue, qa.get_job(down.id).returnvalue,
                qb.get_job(doubled.id).returnvalue) == ("X", "y", 10)


@pytest.mark.parametrize("args, says", [
    (["QUEUE", "no_colon_here"], "module:function"),
    (["QUEUE", "os:no_such_thing"], "has no no_such_thing"),
    (["os:getcwd"], "needs a queue"),
    (["QUEUE", "os"], "no @tasks.task function"),
    (["-Q", "no-equals-sign"], "QUEUE=HANDLER"),
    ([], "name what to run"),
    (["QUEUE", "os:getcwd", "--shutdown-timeout", "-1"], "shutdown_timeout"),
])
def test_usage_errors_exit_2_without_a_traceback(redis_url, tmp_path, args, says):
    proc = run_cli("worker", *args, cwd=tmp_path, redis_url=redis_url, code=2)
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_option_exits_2(redis_url, tmp_path):
    proc = run_cli("worker", "q", "os:getcwd", "--no-such-option", cwd=tmp_path,
                   redis_url=redis_url, code=2)
    assert "unrecognized arguments" in proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_redis_exits_3_and_the_banner_masks_the_password(tmp_path, app, qname):
    url = f"redis://someone:s3cret-pw@127.0.0.1:{free_port()}/0"
    proc = run_cli("--url", url, "worker", qname, f"{app}:double", "--connect-timeout",
                   "0.5", cwd=tmp_path, code=3)
    assert "did not answer within 0.5s" in proc.stderr
    assert "redis redis://someone:***@127.0.0.1:" in proc.stderr
    assert "s3cret-pw" not in proc.stderr and "Traceback" not in proc.stderr


def test_mask_url_hides_the_password_alone_or_with_a_user():
    assert mask_url("redis://:pw@host:6379/0") == "redis://:***@host:6379/0"
    assert mask_url("rediss://user:pw@host:6380/2") == "rediss://user:***@host:6380/2"
    assert mask_url("redis://host:6379/0") == "redis://host:6379/0"


def test_banner_and_json_log_lines_carry_the_job_fields(queue, redis_url, qname, tmp_path,
                                                         app):
    bad = queue.add("send", {"n": 1})
    with Running("worker", qname, f"{app}:sleepy", "--log-format", "json", "--concurrency",
                 "3", "--name", "night", cwd=tmp_path, redis_url=redis_url) as w:
        wait_until(lambda: done(queue, bad), 60, "the job to fail")   # no "sleep" key
        w.terminate()
        assert w.wait() == 0
        lines = [json.loads(line) for line in w.log().splitlines()]
    failure = next(line for line in lines if line.get("job_id") == bad.id and
                   line["level"] == "ERROR")
    assert {"time", "level", "logger", "message", "queue", "job_name", "attempt",
            "worker", "exc_info"} <= set(failure)
    assert (failure["queue"], failure["job_name"], failure["attempt"], failure["worker"],
            failure["logger"]) == (qname, "send", 1, "night", "orijs_sync.worker")
    messages = [line["message"] for line in lines]
    assert f"queue {qname}: {app}:sleepy" in messages
    assert "concurrency 3 per queue, on threads; shutdown timeout none" in messages
    assert any(m.startswith("orijs-sync ") and "worker for 1 queue" in m for m in messages)


def test_log_level_warning_hides_the_info_lines(queue, redis_url, qname, tmp_path, app):
    job = queue.add("x", {"n": 1})
    with Running("worker", qname, f"{app}:double", "--log-level", "warning", cwd=tmp_path,
                 redis_url=redis_url) as w:
        wait_until(lambda: done(queue, job), 60, "the job to run")
        w.terminate()
        assert w.wait() == 0
        assert "INFO" not in w.log()


def _running_a_sleepy_job(queue, qname, tmp_path, app, redis_url, *more):
    job = queue.add("nap", {"sleep": 600})
    w = Running("worker", qname, f"{app}:sleepy", *more, cwd=tmp_path, redis_url=redis_url)
    wait_until(lambda: queue.get_job_state(job.id) == "active" or w.proc.poll() is not None,
               60, "the job to start")
    return job, w


def assert_back_in_wait(queue, job):
    """Moved back by the command itself, before it exited: no stalled check involved."""
    assert queue.get_job_state(job.id) == "waiting"
    back = queue.get_job(job.id)
    assert back.attempts_made == 0 and back.failed_reason is None
    assert queue.get_job_counts("active")["active"] == 0


def test_a_second_signal_moves_the_running_job_back_to_wait_before_exiting(
        queue, redis_url, qname, tmp_path, app):
    job, w = _running_a_sleepy_job(queue, qname, tmp_path, app, redis_url)
    with w:
        w.terminate()
        w.wait_for_log("warm shutdown")
        assert queue.get_job_state(job.id) == "active"       # warm: still running
        w.terminate()
        assert w.wait() == 0
        assert_back_in_wait(queue, job)
        assert f"job {job.id} (nap) cut off, moved back to wait" in w.log()


def test_the_shutdown_timeout_moves_the_running_job_back_to_wait(queue, redis_url, qname,
                                                                 tmp_path, app):
    job, w = _running_a_sleepy_job(queue, qname, tmp_path, app, redis_url,
                                   "--shutdown-timeout", "0.5")
    with w:
        w.terminate()
        assert w.wait() == 0
        assert_back_in_wait(queue, job)
        assert "cold shutdown (0.5 s passed)" in w.log()


def test_a_warm_shutdown_lets_the_running_job_finish(queue, redis_url, qname, tmp_path, app):
    job = queue.add("nap", {"sleep": 1})
    with Running("worker", qname, f"{app}:sleepy", cwd=tmp_path, redis_url=redis_url) as w:
        wait_until(lambda: queue.get_job_state(job.id) == "active", 60, "the job to start")
        w.terminate()
        assert w.wait() == 0
    assert queue.get_job(job.id).returnvalue == "woke"


def test_process_mode_a_second_signal_kills_the_child_and_gives_the_job_back(
        queue, redis_url, qname, tmp_path, app):
    job, w = _running_a_sleepy_job(queue, qname, tmp_path, app, redis_url, "--processes", "1")
    with w:
        w.terminate()
        w.wait_for_log("warm shutdown")
        w.terminate()
        assert w.wait() == 0
        assert_back_in_wait(queue, job)
        assert "stopping child process" in w.log()
