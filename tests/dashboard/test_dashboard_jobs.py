"""Jobs of a state (pages, search) and a job's page, clicked through in a real browser,
with data from Python producers and workers."""
from __future__ import annotations

from dash_http import Client

from orijs_sync import FlowProducer, Queue, Worker
from orijs_sync.testing import wait_until


def _fail(job):
    job.log("first line")
    job.log("second line")
    job.update_progress({"done": 3, "of": 4})
    raise ValueError("card declined")


def test_failed_job_page_in_browser(board, dashboard_server, browser, redis_url, prefix):
    with Queue("billing", connection=redis_url, prefix=prefix) as q:
        job = q.add("charge", {"amount": 12}, attempts=1)
        with Worker("billing", _fail, connection=redis_url, prefix=prefix, drain_delay=1,
                    metrics={"max_data_points": 60}).start():
            wait_until(lambda: q.get_job_state(job.id) == "failed", what="job failed")
            base = dashboard_server(board)
            browser.get(base + "/queues/billing")
            # the metrics the worker wrote are drawn; the worker is listed while it runs
            assert browser.find_elements("css selector", "svg.chart rect.failed")
            assert "1 connected" in browser.find_element("tag name", "main").text
        browser.find_element("css selector", "a.card[href$='/failed']").click()
        browser.find_element("link text", job.id).click()
        main = browser.find_element("tag name", "main").text
        assert "card declined" in browser.find_element("css selector", "pre.failed-reason").text
        assert "ValueError" in browser.find_element("css selector", "pre.stacktrace").text
        assert browser.find_element("css selector", "pre.logs").text.splitlines() == [
            "second line", "first line"]     # newest first
        assert '"done": 3' in browser.find_element("css selector", ".progress").text
        assert '"amount": 12' in browser.find_element("css selector", "pre.data").text
        assert "1 made" in main
        assert " UTC" in main                     # timestamps shown as dates


def test_completed_and_delayed_jobs(board, dashboard_server, redis_url, prefix):
    with Queue("mail", connection=redis_url, prefix=prefix) as q:
        done = q.add("send", {"to": "x"})
        with Worker("mail", lambda j: {"sent": True}, connection=redis_url, prefix=prefix,
                    drain_delay=1).start():
            wait_until(lambda: q.get_job_state(done.id) == "completed")
        later = q.add("remind", {}, delay=3600)
    client = Client(dashboard_server(board))
    status, _, page = client.get(f"/queues/mail/jobs/{done.id}")
    assert status == 200
    assert "Return value" in page and "&#34;sent&#34;: true" in page
    status, _, page = client.get("/queues/mail/delayed")
    assert status == 200 and f'href="/queues/mail/jobs/{later.id}"' in page
    status, _, page = client.get(f"/queues/mail/jobs/{later.id}")
    assert "Promote" in page and "runs after" in page


def test_pages_of_a_state(board, dashboard_server, redis_url, prefix):
    with Queue("many", connection=redis_url, prefix=prefix) as q:
        q.add_bulk([{"name": f"n{i}", "data": {}, "opts": {"job_id": f"j{i:03d}"}}
                    for i in range(60)])
    client = Client(dashboard_server(board))
    status, _, first = client.get("/queues/many/wait")
    assert status == 200 and "60 jobs" in first and "page 1 of 3" in first
    # wait lists the next job to run first: the oldest
    assert first.index('jobs/j000"') < first.index('jobs/j024"')
    assert 'jobs/j025"' not in first
    _, _, third = client.get("/queues/many/wait?page=3")
    assert "page 3 of 3" in third and 'jobs/j059"' in third and 'jobs/j050"' in third
    assert 'jobs/j049"' not in third and third.index('j050"') < third.index('j059"')
    _, _, beyond = client.get("/queues/many/wait?page=999")     # clamped to the last
    assert "page 3 of 3" in beyond


def test_search_by_id_and_name(board, dashboard_server, redis_url, prefix):
    with Queue("find", connection=redis_url, prefix=prefix) as q:
        q.add("alpha", {}, job_id="known")
        q.add("beta", {})
        q.add("Alphabet", {})
    client = Client(dashboard_server(board))
    status, headers, _ = client.get("/queues/find/wait?id=known")
    assert status == 303 and headers["Location"].endswith("/queues/find/jobs/known")
    status, headers, _ = client.get("/queues/find/wait?id=missing")
    assert status == 303
    _, _, page = client.get("/queues/find/wait")       # the flash cookie is shown once
    assert "No job &#39;missing&#39;" in page
    assert "No job &#39;missing&#39;" not in client.get("/queues/find/wait")[2]
    _, _, page = client.get("/queues/find/wait?name=ALPHA")
    assert "2 jobs matching" in page and ">beta<" not in page
    assert "newest 1000 jobs" in page


def test_flow_tree_links(board, dashboard_server, browser, redis_url, prefix):
    with FlowProducer(connection=redis_url, prefix=prefix) as flows:
        node = flows.add({"name": "order", "queue_name": "orders", "data": {},
                          "children": [{"name": "pick", "queue_name": "steps"},
                                       {"name": "pack", "queue_name": "steps"}]})
    base = dashboard_server(board)
    browser.get(f"{base}/queues/orders/jobs/{node.job.id}")
    assert "waiting-children" in browser.find_element("tag name", "h1").text
    children = browser.find_elements("css selector", "li.child-unprocessed a")
    assert sorted(a.text for a in children) == sorted(
        f"{prefix}:steps:{c.job.id}" for c in node.children)
    children[0].click()
    browser.find_element("css selector", "a.parent").click()
    assert browser.current_url.endswith(f"/queues/orders/jobs/{node.job.id}")
