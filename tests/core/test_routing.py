"""A processor given as {job_name: function}: jobs routed by name, unknown names failed."""
from __future__ import annotations

import pytest

from orijs_sync import Worker, errors
from orijs_sync.testing import wait_until


def test_jobs_are_routed_by_name_and_an_unknown_name_fails_for_good(queue, redis_url, qname):
    routes = {"resize": lambda job: f"resized {job.data['img']}",
              "email": lambda job: f"mailed {job.data['to']}"}
    a = queue.add("resize", {"img": "cat.png"})
    b = queue.add("email", {"to": "x@example.com"})
    c = queue.add("transcode", {}, attempts=3)
    with Worker(qname, routes, redis_url, drain_delay=1).start():
        wait_until(lambda: queue.get_job_counts("completed", "failed")
                   == {"completed": 2, "failed": 1}, timeout=30, what="all three finished")
    assert queue.get_job(a.id).returnvalue == "resized cat.png"
    assert queue.get_job(b.id).returnvalue == "mailed x@example.com"
    failed = queue.get_job(c.id)
    assert failed.failed_reason == ("no handler for job name 'transcode' in this worker "
                                    "(it handles 'email', 'resize')")
    assert failed.attempts_made == 1      # not retried: no attempt could succeed


@pytest.mark.parametrize("processor", [{}, {"a": "not callable"}, {1: print}, "fn", 42])
def test_bad_processors_are_refused(redis_url, qname, processor):
    # (None is a manual worker's: see test_manual_processing.py)
    with pytest.raises(errors.OrijsError):
        Worker(qname, processor, redis_url)
