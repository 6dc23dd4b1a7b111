"""The dashboard mounted in a Flask app (examples/flask_app.py, and the Flask extension's
``mount_dashboard``) and in the Django test project (``dashboard_urls``: staff only, its own
CSRF token under Django's CsrfViewMiddleware), each served by a real WSGI server and
driven by a browser."""
from __future__ import annotations

import importlib.util
import sys
import urllib.request
from pathlib import Path

import pytest
import redis
from dash_http import Client
from selenium.webdriver.common.by import By

from orijs_sync import Queue
from orijs_sync.dashboard import Dashboard

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "contrib"))
from contrib_helpers import restore_env, setup_django  # noqa: E402

flask = pytest.importorskip("flask")


def pause_from_the_queue_page(browser, url, r, prefix, qname):
    """Open the queue's page, press Pause, accept the dialog: the queue is paused."""
    browser.get(url)
    browser.find_element(By.CSS_SELECTOR, "form[data-confirm^='Pause'] button").click()
    browser.switch_to.alert.accept()
    browser.find_element(By.CSS_SELECTOR, ".flash")
    assert r.hexists(f"{prefix}:{qname}:meta", "paused")


@pytest.fixture
def r(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def example():
    spec = importlib.util.spec_from_file_location("flask_app_dash_example",
                                                  ROOT / "examples" / "flask_app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flask_example_serves_the_dashboard_under_jobs(example, redis_url, prefix, qname, r,
                                                       dashboard_server, browser):
    from orijs_sync.events import BullMQEventProvider
    with BullMQEventProvider(redis_url, prefix=prefix) as provider, \
            Dashboard(redis_url, prefix=prefix, queue_list_ttl=0.0) as board:
        provider.subscribe("order.created", example.handle_order_created)
        base = dashboard_server(example.create_app(provider, board))
        order = urllib.request.Request(f"{base}/orders", data=b'{"id": 7, "items": ["book"]}',
                                       headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(order, timeout=20) as reply:
            assert reply.status == 201
        Queue(qname, connection=redis_url, prefix=prefix).add("x", {}).queue.close()
        browser.get(f"{base}/jobs/")
        link = browser.find_element(By.LINK_TEXT, "event.order.created")
        assert link.get_attribute("href") == f"{base}/jobs/queues/event.order.created"
        browser.find_element(By.LINK_TEXT, "Events").click()
        assert browser.current_url == f"{base}/jobs/events"
        assert "order.created" in browser.find_element(By.CSS_SELECTOR, "table.events").text
        pause_from_the_queue_page(browser, f"{base}/jobs/queues/{qname}", r, prefix, qname)
        status, _, _ = Client(base).request(f"/jobs/queues/{qname}/resume", form={})
        assert status == 403     # no token


def test_flask_extension_mounts_the_dashboard_from_app_config(redis_url, prefix,
                                                              dashboard_server, browser):
    from orijs_sync.contrib.flask import OrijsSync
    app = flask.Flask("dash_ext")
    app.config.update(ORIJS_SYNC_URL=redis_url, ORIJS_SYNC_PREFIX=prefix,
                      ORIJS_SYNC_EVENTS={"queue_prefix": "ev"})
    orijs = OrijsSync(app)
    board = orijs.mount_dashboard(app, "/admin/jobs", read_only=True)
    try:
        assert (board.prefix, board.events_prefix, board.read_only) == (prefix, "ev", True)
        base = dashboard_server(app)
        browser.get(f"{base}/admin/jobs/events")
        assert "ev.*" in browser.find_element(By.TAG_NAME, "h1").text
        nav = browser.find_element(By.LINK_TEXT, "Groups").get_attribute("href")
        assert nav == f"{base}/admin/jobs/groups"
    finally:
        board.close()
        orijs.close(app)


def test_mount_refuses_a_bad_path(board):
    from orijs_sync import errors
    with pytest.raises(errors.InvalidArgument, match="path"):
        board.mount(flask.Flask("x"), "jobs/")


# -- Django ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def django_site(redis_url, tmp_path_factory):
    """The Django test project, set up once per process (as tests/contrib's django_env,
    whichever comes first)."""
    pytest.importorskip("django")
    env, saved = setup_django(redis_url, tmp_path_factory.mktemp("dj") / "db.sqlite3")
    yield env
    restore_env(saved)


@pytest.fixture
def users(django_site, namespace):
    from django.contrib.auth.models import User
    staff = User.objects.create_user(f"staff-{namespace}", password="pw", is_staff=True)
    plain = User.objects.create_user(f"plain-{namespace}", password="pw")
    yield staff, plain
    staff.delete()
    plain.delete()


def test_django_dashboard_is_for_staff_only(users):
    from django.test import Client as DjangoClient
    staff, plain = users
    anonymous = DjangoClient()
    reply = anonymous.get("/jobs/")
    assert reply.status_code == 302 and reply["Location"] == "/accounts/login/?next=/jobs/"
    signed_in = DjangoClient()
    signed_in.force_login(plain)
    assert signed_in.get("/jobs/").status_code == 403
    assert signed_in.get("/jobs/events").status_code == 403
    admin = DjangoClient()
    admin.force_login(staff)
    page = admin.get("/jobs/groups")
    assert page.status_code == 200 and b"Group queues" in page.content
    assert b'href="/jobs/events"' in page.content
    missing = admin.get("/jobs/groups/caf%C3%A9")      # a non-ASCII path, passed on as WSGI does
    assert missing.status_code == 404 and "No group queue &#39;café&#39;" in missing.content.decode()


def test_django_keeps_the_dashboards_own_csrf_check(users, redis_url, namespace, r):
    from django.test import Client as DjangoClient
    staff, _ = users
    qname = f"q-{namespace}"
    Queue(qname, connection=redis_url).add("x", {}).queue.close()
    admin = DjangoClient(enforce_csrf_checks=True)
    admin.force_login(staff)
    page = admin.get(f"/jobs/queues/{qname}")
    assert page.status_code == 200
    # without the dashboard's token: refused, although Django's own check is skipped
    assert admin.post(f"/jobs/queues/{qname}/pause").status_code == 403
    assert not r.hexists(f"bull:{qname}:meta", "paused")
    token = page.content.split(b'name="csrf_token" value="')[1].split(b'"')[0].decode()
    reply = admin.post(f"/jobs/queues/{qname}/pause", f"csrf_token={token}",
                       content_type="application/x-www-form-urlencoded")   # as a browser sends it
    assert reply.status_code == 303
    assert r.hexists(f"bull:{qname}:meta", "paused")


def test_django_dashboard_in_the_browser(users, redis_url, namespace, r, dashboard_server,
                                         browser):
    from django.core.wsgi import get_wsgi_application
    from django.test import Client as DjangoClient
    staff, _ = users
    qname = f"q-{namespace}"
    Queue(qname, connection=redis_url).add("x", {}).queue.close()
    base = dashboard_server(get_wsgi_application())
    browser.get(f"{base}/jobs/")
    assert browser.current_url == f"{base}/accounts/login/?next=/jobs/"
    client = DjangoClient()
    client.force_login(staff)
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value})
    pause_from_the_queue_page(browser, f"{base}/jobs/queues/{qname}", r, "bull", qname)
