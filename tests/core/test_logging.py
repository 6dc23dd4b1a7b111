"""What the library logs about jobs: a failed attempt at WARNING with its traceback, a
job failed for good at ERROR, a completion at DEBUG, start and stop at INFO, each with
structured fields; and it never configures logging nor prints."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

import proc_handlers_log  # noqa: F401  (importable by children: see conftest's sys.path)
from orijs_sync import Worker, errors
from orijs_sync.groups import GroupQueue, GroupWorker

GUARD = 30.0
FIELDS = ("queue", "job_id", "job_name", "attempt", "worker")


def flaky(job: Any) -> str:
    if job.data.get("fail"):
        raise ValueError(f"cannot send to {job.data['to']}")
    return "sent"


def records(caplog: pytest.LogCaptureFixture, logger: str) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def test_failures_completions_start_and_stop_are_logged(queue, events, redis_url, caplog):
    caplog.set_level(logging.DEBUG, logger="orijs_sync")
    with Worker(queue.name, flaky, connection=redis_url, worker_name="mailer"):
        failing = queue.add("send", {"fail": True, "to": "x"}, attempts=2, backoff=0.01)
        with pytest.raises(errors.JobFailed):
            failing.wait_until_finished(events, timeout=GUARD)
        queue.add("send", {"to": "y"}).wait_until_finished(events, timeout=GUARD)
    lines = records(caplog, "orijs_sync.worker")
    retried, final = [r for r in lines if getattr(r, "job_id", None) == failing.id]
    assert retried.levelno == logging.WARNING and "retried in 0.01 s" in retried.getMessage()
    assert final.levelno == logging.ERROR and "failed for good" in final.getMessage()
    for record, attempt in ((retried, 1), (final, 2)):
        assert "ValueError: cannot send to x" in record.getMessage()
        assert record.exc_info and record.exc_info[0] is ValueError     # the traceback
        assert (record.queue, record.job_name, record.attempt, record.worker) == \
            (queue.name, "send", attempt, "mailer")
    completed = [r for r in lines if r.levelno == logging.DEBUG and "completed" in r.getMessage()]
    assert len(completed) == 1 and all(hasattr(completed[0], f) for f in FIELDS)
    info = [r.getMessage() for r in lines if r.levelno == logging.INFO]
    assert any("started: concurrency 1" in m for m in info)
    assert any(m.startswith(f"worker for queue {queue.name} closed") for m in info)


def test_a_failure_in_a_child_process_logs_the_childs_traceback(queue, events, redis_url,
                                                                 caplog):
    caplog.set_level(logging.WARNING, logger="orijs_sync")
    with Worker(queue.name, "proc_handlers_log:fails", connection=redis_url, processes=1):
        job = queue.add("x", {})
        with pytest.raises(errors.JobFailed):
            job.wait_until_finished(events, timeout=GUARD)
    [line] = [r for r in records(caplog, "orijs_sync.worker")
              if getattr(r, "job_id", None) == job.id]
    assert "in fails" in line.getMessage() and "proc_handlers_log.py" in line.getMessage()


def test_group_job_failures_are_logged(redis_url, namespace, caplog):
    caplog.set_level(logging.DEBUG, logger="orijs_sync")
    gq = GroupQueue(f"g-{namespace}", connection=redis_url, max_attempts=1, keep_failed=5)

    def handler(job: Any) -> None:
        raise RuntimeError(f"group job of {job.group_id} broke")

    try:
        gq.add(group_id="g1", data={})
        with GroupWorker(gq, handler, concurrency=1):
            assert gq.wait_for_empty(GUARD)
    finally:
        gq.close()
    [line] = [r for r in records(caplog, "orijs_sync.groups") if r.levelno == logging.ERROR]
    assert "group job of g1 broke" in line.getMessage() and line.group_id == "g1"
    assert line.queue == gq.name and line.attempt == 1


def test_the_library_configures_no_logging_and_prints_nothing(queue, events, redis_url,
                                                              capsys):
    root, ours = logging.getLogger(), logging.getLogger("orijs_sync")
    before = (list(root.handlers), list(ours.handlers), root.level, ours.level)
    with Worker(queue.name, flaky, connection=redis_url):
        queue.add("send", {"to": "y"}).wait_until_finished(events, timeout=GUARD)
    assert (list(root.handlers), list(ours.handlers), root.level, ours.level) == before
    out = capsys.readouterr()
    assert out.out == ""
