"""Jobs added and processed by Node BullMQ (a flow too) render on the dashboard: the
interop driver of tests/interop (reused, not copied) writes them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

INTEROP = Path(__file__).resolve().parents[1] / "interop" / "conftest.py"


@pytest.fixture
def node(redis_url):
    spec = importlib.util.spec_from_file_location("interop_helpers", INTEROP)
    assert spec and spec.loader
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    helpers.check_node_setup()
    driver = helpers.NodeDriver(redis_url)
    yield driver
    driver.close()


def test_node_jobs_and_flow_render(node, board, dashboard_server, browser, prefix):
    tree = node("addFlow", queue="node-orders", prefix=prefix, name="order",
                data={"from": "node", "total": 7},
                children=[{"name": "charge", "queue": "node-steps", "data": {"n": 1}},
                          {"name": "fail-ship", "queue": "node-steps",
                           "data": {"message": "courier <b>down</b>"}}])
    node("work", queue="node-steps", prefix=prefix, count=2)
    base = dashboard_server(board)
    browser.get(f"{base}/queues/node-orders/jobs/{tree['id']}")
    assert '"from": "node"' in browser.find_element("css selector", "pre.data").text
    links = {a.text: a for a in browser.find_elements("css selector", "ul.children a")}
    charge, ship = (f"{prefix}:node-steps:{child}" for child in tree["children"])
    assert set(links) == {charge, ship}
    processed = browser.find_element("css selector", "li.child-processed").text
    assert charge in processed and '"echo"' in processed          # the child's result
    links[ship].click()
    assert "courier <b>down</b>" in browser.find_element("css selector",
                                                           "pre.failed-reason").text
    assert "failed" in browser.find_element("tag name", "h1").text
    browser.find_element("css selector", "a.parent").click()
    assert browser.current_url.endswith(f"/queues/node-orders/jobs/{tree['id']}")
    browser.get(f"{base}/queues")
    names = [a.text for a in browser.find_elements("css selector", "table.queues td:first-child a")]
    assert names == ["node-orders", "node-steps"]
