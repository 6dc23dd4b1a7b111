"""Screenshots of the dashboard for the docs: fills a throwaway Redis with realistic data
(queues with jobs in every state, a flow, a group queue with a stuck group, a job
scheduler, an event type with a failing subscriber, a workflow whose last step failed
and was rolled back), serves the dashboard and saves PNGs of the main pages to docs/img/.

    python bench/dashboard_screenshots.py          # needs chromium and chromium-driver

Run by hand when the pages change; the PNGs are committed.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Dict
from wsgiref.simple_server import WSGIRequestHandler, make_server

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from orijs_sync import FlowProducer, Queue, Worker
from orijs_sync.dashboard import Dashboard
from orijs_sync.testing import local_redis, wait_until

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dashboard"))
from dash_orijs_data import (  # noqa: E402 - the tests' data makers
    fill_events,
    fill_groups,
    fill_scheduler,
    fill_workflow,
)

OUT = ROOT / "docs" / "img"


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - stdlib's name
        pass


def emails(job: Any) -> Any:
    if job.data["to"].endswith("invalid"):
        raise ValueError(f"mailbox {job.data['to']} does not exist")
    return {"sent": job.data["to"]}


def fetch_sales(job: Any) -> Any:
    if job.data["region"] == "apac":
        raise TimeoutError("sales API timed out after 30 s")
    return {"rows": 120, "region": job.data["region"]}


def fill_queues(url: str) -> str:
    """Jobs in emails (completed, failed, waiting, delayed) and a flow; returns the flow's
    parent job id."""
    with Queue("emails", connection=url) as queue:
        for n in range(12):
            queue.add("welcome", {"to": f"user{n}@example.{'invalid' if n % 5 == 0 else 'com'}"},
                      attempts=1)
        with Worker("emails", emails, connection=url, concurrency=4,
                    metrics={"max_data_points": 60}):
            wait_until(lambda: queue.get_completed_count() + queue.get_failed_count() >= 12)
        for n in range(4):
            queue.add("digest", {"to": f"team{n}@example.com"})
        queue.add("reminder", {"to": "ada@example.com"}, delay=3600)
    with FlowProducer(connection=url) as flows:
        parts = [{"name": "fetch-sales", "queue_name": "reports-parts",
                  "data": {"region": region}, "opts": {"attempts": 1}}
                 for region in ("eu", "us", "apac")]
        node = flows.add({"name": "render-report", "queue_name": "reports", "data": {"id": 42},
                          "children": parts})
    with Worker("reports-parts", fetch_sales, connection=url), \
            Queue("reports-parts", connection=url) as parts:
        wait_until(lambda: parts.get_completed_count() + parts.get_failed_count() >= 3)
    return str(node.job.id)


def fill(url: str) -> Dict[str, str]:
    made = {"flow": fill_queues(url)}
    fill_groups(url, "orders-by-customer")
    fill_scheduler(url, "nightly")
    fill_events(url, "invoice.paid", payload={"invoice": "INV-1042", "amount": 129.0})
    made["workflow"] = fill_workflow(url, "OrderWorkflow")
    return made


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with local_redis() as url, Dashboard(url, queue_list_ttl=0.0) as board:
        made = fill(url)
        server = make_server("127.0.0.1", 0, board, handler_class=Quiet)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
        thread.start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,860",
                    "--hide-scrollbars"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        pages = {"queues": "/queues", "job-flow": f"/queues/reports/jobs/{made['flow']}",
                 "groups": "/groups/orders-by-customer",
                 "workflow": f"/workflows/OrderWorkflow/{made['workflow']}",
                 "schedulers": "/schedulers", "events": "/events"}
        try:
            for name, path in pages.items():
                driver.set_window_size(1280, 860)
                driver.get(base + path)
                height = driver.execute_script(
                    "return Math.max(document.body.scrollHeight, "
                    "document.documentElement.scrollHeight)")
                driver.set_window_size(1280, min(max(int(height) + 140, 700), 1500))
                driver.save_screenshot(str(OUT / f"dashboard-{name}.png"))
                print(f"docs/img/dashboard-{name}.png: {path}")
        finally:
            driver.quit()
            server.shutdown()
            server.server_close()
            thread.join(10)


if __name__ == "__main__":
    main()
