"""The group queue, scheduler, events and workflow pages in a real browser, on data made
by the library's producers and workers (and Node GroupMQ's, in tests/interop), including
hostile text in a group id, a job's data, an event's payload and a step's result."""
from __future__ import annotations

import re

import pytest
from dash_orijs_data import XSS, fill_events, fill_groups, fill_scheduler, fill_workflow
from selenium.webdriver.common.by import By


def rows(browser, css):
    return browser.find_elements(By.CSS_SELECTOR, css)


def group_row(browser, gid):
    [row] = [r for r in rows(browser, "tr.group") if r.get_attribute("data-group") == gid]
    return row


def shown(text):
    """The hostile text is on the page as text (in JSON its quotes are escaped)."""
    return "<script>window.__xss=1</script>" in text and "<img src=x onerror=" in text


def assert_no_script_ran(browser):
    assert browser.execute_script("return window.__xss === undefined")
    assert rows(browser, "main script") == [] and rows(browser, "main img") == []


def test_group_queue_page_shows_groups_in_order_and_stuck_groups(
        redis_url, namespace, board, dashboard_server, browser):
    name = f"gq-{namespace}"
    ids = fill_groups(redis_url, name)
    base = dashboard_server(board)
    browser.get(f"{base}/groups")
    link = browser.find_element(By.LINK_TEXT, name)
    [listed] = [r for r in rows(browser, "table.groups tbody tr") if name in r.text]
    assert "2 stuck" in listed.text
    link.click()
    assert browser.find_element(By.CSS_SELECTOR, ".banner-stuck").text.startswith("2 stuck")
    customer = group_row(browser, "customer-1")
    order = [a.text for a in customer.find_elements(By.CSS_SELECTOR, "ol.waiting a")]
    assert order == [ids["c1-0"], ids["c1-1"], ids["c1-2"]]
    assert "stuck" not in customer.get_attribute("class")
    lock = group_row(browser, "stuck-lock")
    assert "stuck" in lock.get_attribute("class") and "lock expired" in lock.text
    assert ids["lock"] in lock.text          # its running job
    lost = group_row(browser, "stuck-lost")
    assert "not ready" in lost.text
    assert [r.get_attribute("data-group") for r in rows(browser, "tr.group")][:2] == \
        ["stuck-lock", "stuck-lost"]
    browser.find_element(By.LINK_TEXT, ids["failed"]).click()
    assert browser.find_element(By.CSS_SELECTOR, ".failed-reason").text == "card declined"
    assert "failed" in browser.find_element(By.CSS_SELECTOR, "dl.fields").text


def test_scheduler_page_shows_next_run_and_latest_runs(
        redis_url, namespace, prefix, board, dashboard_server, browser):
    qname = f"sq-{namespace}"
    first = fill_scheduler(redis_url, qname, prefix)
    browser.get(f"{dashboard_server(board)}/schedulers")
    [row] = rows(browser, "tr[data-scheduler='hourly-report']")
    assert "every 3600" in row.text
    next_run = row.find_element(By.CSS_SELECTOR, ".next-run").text
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", next_run)
    runs = row.find_elements(By.CSS_SELECTOR, "ul.runs li")
    assert [r.text.endswith(state) for r, state in zip(runs, ("delayed", "completed"))] == \
        [True, True]
    assert runs[0].text.startswith(next_run)
    row.find_elements(By.CSS_SELECTOR, "ul.runs a")[-1].click()     # the completed run
    assert first in browser.find_element(By.TAG_NAME, "h1").text


def test_events_page_shows_the_subscribers_queue_and_its_failure(
        redis_url, namespace, prefix, board, dashboard_server, browser):
    event = f"stock.{namespace}"
    fill_events(redis_url, event, prefix=prefix)
    browser.get(f"{dashboard_server(board)}/events")
    [row] = rows(browser, f"tr[data-event='{event}']")
    assert f"event.{event}" in row.text
    [failure] = rows(browser, "table.failures tbody tr")
    assert "no stock for {'sku': 'book'}" in failure.text and event in failure.text


def test_workflow_execution_step_by_step(redis_url, namespace, prefix, board,
                                         dashboard_server, browser):
    name = f"Order{namespace}"
    flow_id = fill_workflow(redis_url, name, prefix=prefix)
    browser.get(f"{dashboard_server(board)}/workflows")
    browser.find_element(By.LINK_TEXT, flow_id).click()
    steps = rows(browser, "tr.step")
    assert [s.get_attribute("data-step") for s in steps] == ["reserve", "charge", "ship"]
    assert [s.find_element(By.CSS_SELECTOR, ".state").text for s in steps] == \
        ["completed", "completed", "failed"]
    assert "LookupError" in steps[2].text and "out of stock" in steps[2].text
    assert '"reserved": 2' in steps[0].text and "rolled back" in steps[0].text
    assert "rolled back" not in steps[2].text
    assert browser.find_element(By.CSS_SELECTOR, ".failing-step").text == "ship"
    assert browser.find_element(By.CSS_SELECTOR, ".rolled-back").text.startswith(
        "charge, reserve")


@pytest.mark.parametrize("page", ["groups", "events", "workflows"])
def test_hostile_text_is_shown_as_text(page, redis_url, namespace, prefix, board,
                                       dashboard_server, browser):
    base = dashboard_server(board)
    if page == "groups":
        name = f"gq-{namespace}"
        ids = fill_groups(redis_url, name, hostile=True)
        browser.get(f"{base}/groups/{name}")
        assert XSS in group_row(browser, XSS).text
        browser.find_element(By.LINK_TEXT, ids["xss"]).click()
        assert shown(browser.find_element(By.CSS_SELECTOR, "pre.data").text)
    elif page == "events":
        fill_events(redis_url, f"x.{namespace}", payload=XSS, prefix=prefix)
        browser.get(f"{base}/events")
        assert shown(browser.find_element(By.CSS_SELECTOR, "table.failures").text)
    else:
        name = f"Xss{namespace}"
        flow_id = fill_workflow(redis_url, name, result=XSS, prefix=prefix)
        browser.get(f"{base}/workflows/{name}/{flow_id}")
        assert shown(browser.find_element(By.CSS_SELECTOR, "tr.step pre.result").text)
    assert_no_script_ran(browser)
