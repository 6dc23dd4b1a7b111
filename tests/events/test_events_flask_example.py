"""examples/flask_app.py through Flask's test client, against real Redis."""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flask_app.py"


@pytest.fixture(scope="module")
def flask_app_module():
    spec = importlib.util.spec_from_file_location("flask_app_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client(flask_app_module, bullmq_provider):
    provider = bullmq_provider(default_job_options={"attempts": 1})
    provider.subscribe("order.created", flask_app_module.handle_order_created)
    app = flask_app_module.create_app(provider)
    app.config["TESTING"] = True
    return app.test_client()


def test_view_returns_the_handler_result(client):
    reply = client.post("/orders", json={"id": 42, "items": ["book", "pen"]},
                        headers={"X-Request-Id": "req-1"})
    assert reply.status_code == 201
    assert reply.get_json() == {"orderId": 42, "status": "accepted", "items": 2,
                                "requestId": "req-1"}


def test_handler_failure_becomes_a_422(client):
    reply = client.post("/orders", json={"id": 43, "items": []})
    assert reply.status_code == 422
    assert reply.get_json() == {"error": "an order needs at least one item"}


def test_bad_request(client):
    assert client.post("/orders", json=[1]).status_code == 400


def test_concurrent_requests(client):
    replies = {}

    def call(n):
        replies[n] = client.post("/orders", json={"id": n, "items": ["x"]},
                                 headers={"X-Request-Id": f"r{n}"})

    threads = [threading.Thread(target=call, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: (r.status_code, r.get_json()["orderId"], r.get_json()["requestId"])
            for n, r in replies.items()} == {n: (201, n, f"r{n}") for n in range(20)}


def test_no_subscriber_gives_504(flask_app_module, bullmq_provider, namespace):
    provider = bullmq_provider(queue_prefix=f"{namespace}.nobody", default_timeout=0.3)
    app = flask_app_module.create_app(provider)
    reply = app.test_client().post("/orders", json={"id": 1, "items": ["x"]})
    assert reply.status_code == 504
