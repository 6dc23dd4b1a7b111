"""The queues list and a queue's page, over HTTP and in a real browser."""
from __future__ import annotations

import urllib.request

from orijs_sync import Queue


def _get(url: str) -> "tuple[int, str]":
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.status, reply.read().decode("utf-8")


def test_queues_list_shows_counts_and_links(board, dashboard_server, redis_url, prefix):
    with Queue("emails", connection=redis_url, prefix=prefix) as q:
        q.add("welcome", {"to": "a@example.com"})
        q.add("later", {}, delay=60)
        q.pause()
        q.set_global_concurrency(3)
        q.set_global_rate_limit(10, 1.5)
    base = dashboard_server(board)
    status, page = _get(base + "/queues")
    assert status == 200
    assert 'href="/queues/emails"' in page
    assert "paused" in page
    status, page = _get(base + "/queues/emails")
    assert status == 200
    assert '<dd class="concurrency">3</dd>' in page
    assert '<dd class="rate-limit">10 jobs per 1.5 s</dd>' in page
    assert "<dt>Paused</dt><dd>yes</dd>" in page


def test_mounted_under_script_name(board, dashboard_server, redis_url, prefix):
    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    with Queue("mounted", connection=redis_url, prefix=prefix) as q:
        q.add("x", {})

    def host(environ, start_response):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"host app"]
    base = dashboard_server(DispatcherMiddleware(host, {"/jobs": board}))
    status, page = _get(base + "/jobs/queues")
    assert status == 200
    assert 'href="/jobs/queues/mounted"' in page
    assert 'href="/jobs/static/dashboard.css"' in page
    status, css = _get(base + "/jobs/static/dashboard.css")
    assert status == 200 and "font" in css


def test_queues_list_in_browser(board, dashboard_server, browser, redis_url, prefix):
    with Queue("browsed", connection=redis_url, prefix=prefix) as q:
        q.add("one", {})
    base = dashboard_server(board)
    browser.get(base + "/")
    link = browser.find_element("link text", "browsed")
    link.click()
    assert browser.find_element("tag name", "h1").text.startswith("browsed")


def test_queue_directory_scans_in_the_background(redis_url, prefix):
    from orijs_sync.dashboard import Dashboard
    from orijs_sync.testing import wait_until
    with Queue("first", connection=redis_url, prefix=prefix) as q:
        q.add("x", {})
    with Dashboard(redis_url, prefix=prefix, queue_list_ttl=3600) as board:
        wait_until(lambda: board.queues.names() == ["first"], what="first pass")
        with Queue("second", connection=redis_url, prefix=prefix) as q:
            q.add("x", {})
        assert board.queues.names() == ["first"]            # cached until the next pass
        board.queues.forget()
        wait_until(lambda: board.queues.names() == ["first", "second"], what="second pass")
    with Dashboard(redis_url, prefix=prefix, queues=["second", "elsewhere"]) as board:
        assert board.queues.names() == ["elsewhere", "second"]


def test_queue_list_is_paginated(board, dashboard_server, redis_url, prefix, r):
    for i in range(120):
        r.hset(f"{prefix}:p{i:03d}:meta", "opts.maxLenEvents", 10000)
    base = dashboard_server(board)
    _, page = _get(base + "/queues")
    assert "120 under" in page and "page 1 of 3" in page
    assert 'href="/queues/p049"' in page and 'href="/queues/p050"' not in page
    _, page = _get(base + "/queues?page=3")
    assert 'href="/queues/p119"' in page and 'href="/queues/p099"' not in page


def test_without_jinja2_the_import_error_names_the_extra():
    import subprocess
    import sys
    code = ("import sys; sys.modules['jinja2'] = None\n"
            "try:\n    import orijs_sync.dashboard\n"
            "except ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert "pip install orijs-sync[dashboard]" in out.stdout, out.stderr


def test_a_forked_child_scans_on_its_own(redis_url, prefix):
    """gunicorn --preload: the Dashboard made in the parent serves in the child."""
    import os
    import signal

    from orijs_sync.dashboard import Dashboard
    from orijs_sync.testing import wait_until
    with Queue("forked", connection=redis_url, prefix=prefix) as q:
        q.add("x", {})
    with Dashboard(redis_url, prefix=prefix, queue_list_ttl=3600) as board:
        wait_until(lambda: board.queues.names() == ["forked"])
        board.queues._lock.acquire()          # held by a parent thread at fork time
        pid = os.fork()
        if pid == 0:                          # pragma: no cover - the child reports by exit code
            code = 1
            signal.alarm(20)                  # a lock left held would hang it: killed
            try:
                board.queues.forget()
                code = 0 if board.queues.names() == ["forked"] else 3
            finally:
                os._exit(code)
        board.queues._lock.release()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
