"""Every action clicked in a real browser (the confirm dialog accepted or dismissed),
its result shown and checked in Redis; a job that moved meanwhile is refused with a
message naming its state now."""
from __future__ import annotations

from dash_http import Client

from orijs_sync import Queue, Worker
from orijs_sync.testing import wait_until


def _boom(job):
    raise RuntimeError("no")


def _failed_job(redis_url, prefix, queue="acts"):
    q = Queue(queue, connection=redis_url, prefix=prefix)
    job = q.add("task", {"n": 1})
    with Worker(queue, _boom, connection=redis_url, prefix=prefix, drain_delay=1).start():
        wait_until(lambda: q.get_job_state(job.id) == "failed")
    return q, job


def _click(browser, label, accept=True):
    browser.find_element("xpath", f"//form[contains(@class,'action')]//button[normalize-space()='{label}']").click()
    alert = browser.switch_to.alert
    assert alert.text                       # the question asked
    alert.accept() if accept else alert.dismiss()


def _flash(browser):
    return browser.find_element("css selector", ".flash").text


def test_retry_confirmed_and_dismissed(board, dashboard_server, browser, redis_url, prefix):
    q, job = _failed_job(redis_url, prefix)
    base = dashboard_server(board)
    browser.get(f"{base}/queues/acts/jobs/{job.id}")
    _click(browser, "Retry", accept=False)
    assert q.get_job_state(job.id) == "failed"           # dismissed: nothing sent
    _click(browser, "Retry")
    assert "moved from failed back to waiting" in _flash(browser)
    assert q.get_job_state(job.id) == "waiting"
    q.close()


def test_retry_of_a_job_that_moved_meanwhile(board, dashboard_server, browser, redis_url,
                                             prefix):
    q, job = _failed_job(redis_url, prefix)
    base = dashboard_server(board)
    browser.get(f"{base}/queues/acts/jobs/{job.id}")
    q.get_job(job.id).retry()                              # someone else retried it
    _click(browser, "Retry")
    assert f"Cannot retry job {job.id}: it is waiting now" in _flash(browser)
    assert "flash-error" in browser.find_element("css selector", ".flash").get_attribute("class")
    q.close()


def test_promote_and_remove(board, dashboard_server, browser, redis_url, prefix):
    with Queue("acts", connection=redis_url, prefix=prefix) as q:
        later = q.add("later", {}, delay=3600)
        other = q.add("other", {})
        base = dashboard_server(board)
        browser.get(f"{base}/queues/acts/jobs/{later.id}")
        _click(browser, "Promote")
        assert "promoted" in _flash(browser)
        assert q.get_job_state(later.id) == "waiting"
        browser.get(f"{base}/queues/acts/jobs/{other.id}")
        _click(browser, "Remove")
        assert f"Job {other.id} removed." in _flash(browser)
        assert browser.current_url.endswith("/queues/acts")
        assert q.get_job(other.id) is None


def test_promote_of_a_job_no_longer_delayed(board, dashboard_server, browser, redis_url, prefix):
    with Queue("acts", connection=redis_url, prefix=prefix) as q:
        later = q.add("later", {}, delay=3600)
        base = dashboard_server(board)
        browser.get(f"{base}/queues/acts/jobs/{later.id}")
        q.get_job(later.id).promote()
        _click(browser, "Promote")
        assert f"Cannot promote job {later.id}: it is waiting now" in _flash(browser)


def test_queue_actions(board, dashboard_server, browser, redis_url, prefix):
    q, failed = _failed_job(redis_url, prefix)
    for i in range(3):
        q.add("w", {"i": i})
    base = dashboard_server(board)
    browser.get(f"{base}/queues/acts")
    _click(browser, "Pause")
    assert "paused" in _flash(browser) and q.is_paused()
    _click(browser, "Resume")
    assert "resumed" in _flash(browser) and not q.is_paused()
    _click(browser, "Drain")
    assert "3 waiting job(s) removed" in _flash(browser)
    assert q.get_job_counts("waiting")["waiting"] == 0
    browser.find_element("css selector", "select[name=state] option[value=failed]").click()
    _click(browser, "Clean")
    assert "1 failed job(s) older than 0 s removed" in _flash(browser)
    assert q.get_job(failed.id) is None
    q.close()


def test_read_only_hides_and_refuses_actions(redis_url, prefix, dashboard_server):
    from orijs_sync.dashboard import Dashboard
    q, job = _failed_job(redis_url, prefix)
    with Dashboard(redis_url, prefix=prefix, read_only=True) as board:
        client = Client(dashboard_server(board))
        status, _, page = client.get(f"/queues/acts/jobs/{job.id}")
        assert status == 200 and "csrf_token" not in page and "Retry" not in page
        assert "read-only" in page
        _, _, queue_page = client.get("/queues/acts")
        assert "<form method=\"post\"" not in queue_page
        session = next(c.value for c in client.jar)
        status, _, page = client.post(f"/queues/acts/jobs/{job.id}/retry",
                                      {"csrf_token": board.signer.csrf_token(session)})
        assert status == 403 and "read-only" in page
    assert q.get_job_state(job.id) == "failed"
    q.close()
