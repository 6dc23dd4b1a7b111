"""Escaping (in a real browser), CSRF, ``authorize``, a Redis outage, unexpected errors."""
from __future__ import annotations

import urllib.request

import pytest
from dash_http import Client, csrf_token

from orijs_sync import FlowProducer, Queue, Worker
from orijs_sync.dashboard import Dashboard, web
from orijs_sync.testing import RedisServer, wait_until

SCRIPT = "<script>window.__xss=1</script>"
IMG = '"><img src=x onerror="window.__xss=1">'
JS_LINK = "javascript:window.__xss=1"
PAYLOADS = (SCRIPT, IMG)


def _hostile(job):
    job.log(SCRIPT)
    job.log(IMG)
    job.update_progress(IMG)
    raise ValueError(f"reason {SCRIPT} {IMG}")


def _raw(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode("utf-8")


def _assert_inert(browser, url: str, *expected_texts: str) -> None:
    """Nothing ran, the markup holds no live payload, each text shows literally."""
    browser.get(url)
    assert browser.execute_script("return window.__xss") is None, url
    assert not browser.find_elements("css selector", "main script, main img"), url
    raw = _raw(url)
    for payload in PAYLOADS:
        assert payload not in raw, f"{url} holds {payload!r} unescaped"
    shown = browser.find_element("tag name", "body").text
    for text in expected_texts:
        assert text in shown, f"{url}: {text!r} not shown literally"
    for link in browser.find_elements("css selector", "a[href]"):
        assert not link.get_attribute("href").lower().startswith("javascript:"), url


def test_hostile_content_is_shown_as_text(board, dashboard_server, browser, redis_url, prefix, r):
    evil_queue = IMG        # a queue name is user content too
    with Queue(evil_queue, connection=redis_url, prefix=prefix) as q:
        job = q.add(SCRIPT, {"html": IMG, "link": JS_LINK}, job_id="javascript", attempts=1)
        done = q.add(IMG, {}, job_id=SCRIPT)
        with Worker(evil_queue, _hostile, connection=redis_url, prefix=prefix,
                    drain_delay=1).start():
            wait_until(lambda: q.get_job_state(job.id) == "failed"
                       and q.get_job_state(done.id) == "failed")
    with FlowProducer(connection=redis_url, prefix=prefix) as flows:
        node = flows.add({"name": IMG, "queue_name": evil_queue, "data": {},
                          "children": [{"name": SCRIPT, "queue_name": evil_queue,
                                        "opts": {"job_id": IMG}}]})
    # a hash written by another program: its parent key is a javascript: URL
    r.hset(f"{prefix}:{evil_queue}:handmade", mapping={
        "name": "handmade", "data": "{}", "opts": "{}", "timestamp": "1",
        "parentKey": JS_LINK, "parent": '{"id": "x", "queueKey": "javascript"}'})
    r.lpush(f"{prefix}:{evil_queue}:wait", "handmade")
    base = dashboard_server(board)
    client = Client(base)
    queue_url = client.get("/queues")[2].split('href="')[1:]
    page = next(h.split('"')[0] for h in queue_url if h.startswith("/queues/%"))
    _assert_inert(browser, base + "/queues", IMG)
    _assert_inert(browser, base + page, IMG)
    _assert_inert(browser, base + page + "/failed", SCRIPT, IMG, "javascript")
    _assert_inert(browser, base + page + "/failed?name=" + urllib.request.quote(SCRIPT), SCRIPT)
    browser.get(base + page + "/failed")
    browser.find_element("link text", "javascript").click()
    assert browser.execute_script("return window.__xss") is None
    job_url = browser.current_url
    assert job_url.startswith(base + "/queues/")             # not a javascript: URL
    _assert_inert(browser, job_url, SCRIPT, IMG, JS_LINK, f"reason {SCRIPT} {IMG}")
    assert SCRIPT in browser.find_element("css selector", "pre.logs").text
    assert IMG in browser.find_element("css selector", "pre.stacktrace").text
    browser.get(base + page + "/failed")
    browser.find_element("link text", SCRIPT).click()
    _assert_inert(browser, browser.current_url, IMG)
    # the flow: the parent lists a child whose id is hostile, the child links its parent
    browser.get(base + page + "/waiting-children")
    browser.find_element("link text", node.job.id).click()
    _assert_inert(browser, browser.current_url, IMG)
    browser.find_element("css selector", "li.child-unprocessed a").click()
    _assert_inert(browser, browser.current_url, SCRIPT)
    browser.get(base + page + "/wait")
    browser.find_element("link text", "handmade").click()
    _assert_inert(browser, browser.current_url, JS_LINK)
    assert not browser.find_elements("css selector", "a.parent")   # shown, not linked
    # a flash message quoting the search
    browser.get(base + page + "/wait?id=" + urllib.request.quote(SCRIPT + "x"))
    assert browser.execute_script("return window.__xss") is None
    assert SCRIPT + "x" in browser.find_element("css selector", ".flash").text


def test_pages_carry_a_content_security_policy(board, dashboard_server):
    _, headers, _ = Client(dashboard_server(board)).get("/queues")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"


# -- CSRF ----------------------------------------------------------------------------

@pytest.fixture
def failed_job(redis_url, prefix):
    q = Queue("csrf", connection=redis_url, prefix=prefix)
    job = q.add("x", {}, attempts=1)
    with Worker("csrf", _hostile, connection=redis_url, prefix=prefix, drain_delay=1).start():
        wait_until(lambda: q.get_job_state(job.id) == "failed")
    yield q, job
    q.close()


def test_post_without_the_pages_token_is_refused(board, dashboard_server, failed_job):
    q, job = failed_job
    client = Client(dashboard_server(board))
    status, _, page = client.get(f"/queues/csrf/jobs/{job.id}")
    assert status == 200 and client.jar                 # the session cookie is set
    token = csrf_token(page)
    path = f"/queues/csrf/jobs/{job.id}/retry"
    for form in ({}, {"csrf_token": ""}, {"csrf_token": "forged"},
                 {"csrf_token": token[:-1] + ("A" if token[-1] != "A" else "B")}):
        status, _, body = client.post(path, form)
        assert status == 403, form
        assert "CSRF token" in body
    other = Client(client.base)                          # a token of another session
    other_token = csrf_token(other.get(f"/queues/csrf/jobs/{job.id}")[2])
    assert client.post(path, {"csrf_token": other_token})[0] == 403
    fresh = Client(client.base)                          # no cookie at all
    assert fresh.post(path, {"csrf_token": token})[0] == 403
    # the right token from a page of another site (Origin says so)
    status, _, body = client.post(path, {"csrf_token": token},
                                  headers={"Origin": "https://evil.example"})
    assert status == 403 and "not this site" in body
    assert q.get_job_state(job.id) == "failed"           # nothing changed
    status, headers, _ = client.post(path, {"csrf_token": token},
                                     headers={"Origin": client.base})
    assert status == 303 and q.get_job_state(job.id) == "waiting"


def test_queue_actions_need_the_token_too(board, dashboard_server, redis_url, prefix):
    with Queue("csrfq", connection=redis_url, prefix=prefix) as q:
        q.add("x", {})
        client = Client(dashboard_server(board))
        client.get("/queues/csrfq")
        for action in ("pause", "drain", "clean"):
            assert client.post(f"/queues/csrfq/{action}", {"state": "wait"})[0] == 403
        assert not q.is_paused() and q.get_job_counts("waiting")["waiting"] == 1


# -- authorize -----------------------------------------------------------------------

def test_authorize_refusing_reads(redis_url, prefix, dashboard_server, failed_job):
    seen = []

    def authorize(environ, action=None):
        seen.append(action)
        return environ.get("HTTP_X_USER") == "admin"
    with Dashboard(redis_url, prefix=prefix, authorize=authorize) as board:
        client = Client(dashboard_server(board))
        for path in ("/", "/queues", "/queues/csrf", "/queues/csrf/failed"):
            assert client.get(path)[0] == 403, path
        status, _, page = client.request("/queues", headers={"X-User": "admin"})
        assert status == 200 and "csrf" in page
    assert None in seen


def test_authorize_refusing_writes_only(redis_url, prefix, dashboard_server, failed_job):
    q, job = failed_job
    asked = []

    def authorize(environ, action):
        asked.append(action)
        return action is None
    with Dashboard(redis_url, prefix=prefix, authorize=authorize) as board:
        client = Client(dashboard_server(board))
        status, _, page = client.get(f"/queues/csrf/jobs/{job.id}")
        assert status == 200 and "Retry" not in page      # no button it may not press
        token = board.signer.csrf_token(next(c.value for c in client.jar))
        status, _, page = client.post(f"/queues/csrf/jobs/{job.id}/retry",
                                      {"csrf_token": token})
        assert status == 403 and "You may not retry here" in page
        assert client.get("/queues/csrf")[0] == 200
        assert client.post("/queues/csrf/pause", {"csrf_token": token})[0] == 403
    assert "retry" in asked and "pause" in asked
    assert q.get_job_state(job.id) == "failed" and not q.is_paused()


def test_one_argument_authorize(redis_url, prefix, dashboard_server):
    with Dashboard(redis_url, prefix=prefix, authorize=lambda environ: False) as board:
        assert Client(dashboard_server(board)).get("/queues")[0] == 403


# -- failures ------------------------------------------------------------------------

@pytest.mark.parametrize("ttl", [0, 30])     # the queue list scanned per page, or cached
def test_redis_outage_shows_a_banner(dashboard_server, prefix, ttl):
    server = RedisServer().start()
    try:
        with Queue("down", connection=server.url, prefix=prefix) as q:
            job = q.add("x", {})
        with Dashboard(server.url, prefix=prefix, queue_list_ttl=ttl) as board:
            client = Client(dashboard_server(board))
            assert client.get("/queues")[0] == 200
            server.halt()
            for path in ("/queues", "/queues/down", "/queues/down/wait",
                         f"/queues/down/jobs/{job.id}"):
                status, _, page = client.get(path)
                assert status == 503, path
                assert "Redis is unreachable" in page
                assert "Traceback" not in page and "File \"" not in page
            server.restart()
            assert client.get("/queues")[0] == 200                 # back without a restart
    finally:
        server.stop()


def test_redis_down_from_the_start(dashboard_server):
    with RedisServer() as server:
        url = server.url
    with Dashboard(url) as board:
        status, _, page = Client(dashboard_server(board)).get("/queues")
    assert status == 503 and "Redis is unreachable" in page


def test_unexpected_error_is_a_500_without_traceback(board, dashboard_server, namespace,
                                                      caplog):
    path = f"/boom-{namespace}"

    def boom(req):
        raise KeyError("secret detail")
    web.route("GET", path)(boom)
    try:
        status, _, page = Client(dashboard_server(board)).get(path)
    finally:
        web.ROUTES[:] = [r for r in web.ROUTES if r.pattern != path]
    assert status == 500
    assert "secret detail" not in page and "Traceback" not in page
    assert any("secret detail" in (r.exc_text or "") or r.exc_info for r in caplog.records
               if r.name == "orijs_sync.dashboard")


def test_unknown_pages_and_methods(board, dashboard_server):
    client = Client(dashboard_server(board))
    assert client.get("/nothing")[0] == 404
    assert client.get("/static/../app.py")[0] == 404
    assert client.get("/queues/x/nostate")[0] == 404
    assert client.post("/queues", {})[0] == 405
