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
    base = dashboard_server(board)
    status, page = _get(base + "/queues")
    assert status == 200
    assert 'href="/queues/emails"' in page
    assert "paused" in page
    status, page = _get(base + "/queues/emails")
    assert status == 200
    assert "Global concurrency" in page


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
