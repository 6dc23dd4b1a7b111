"""Fixtures of the dashboard tests.

``dashboard_server(board)`` serves a ``Dashboard`` (or any WSGI app) from a threaded
wsgiref server on a free loopback port in a background thread and returns its base URL;
every server is shut down and its thread joined after the test. ``browser`` is a
headless Chromium driven by selenium (Debian's ``chromium`` and ``chromium-driver``),
quit after the test; skipped, saying why, only where they are not installed.
``board`` is a Dashboard on the test Redis with a prefix of the test's own.
"""
from __future__ import annotations

import shutil
import threading
from typing import Any, Callable, Iterator, List

import pytest

from orijs_sync.cli.dashboard_cmd import threaded_server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def dashboard_server() -> Iterator[Callable[[Any], str]]:
    started: List[Any] = []

    def serve(app: Any) -> str:
        server = threaded_server(app, log_requests=False)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                  name="dashboard-test-server", daemon=True)
        thread.start()
        started.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield serve
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(f"no browser: {CHROMIUM} and {CHROMEDRIVER} are needed "
                    "(Debian: apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def prefix(namespace: str) -> str:
    """A key prefix of this test's own (the namespace fixture deletes its keys after)."""
    return f"dash-{namespace}"


@pytest.fixture
def board(redis_url: str, prefix: str) -> Iterator[Any]:
    from orijs_sync.dashboard import Dashboard
    with Dashboard(redis_url, prefix=prefix, queue_list_ttl=0.0) as made:
        yield made
