"""A Flask app whose view emits an event and returns the handler's result.

    python examples/flask_app.py            # uses $REDIS_URL, else starts a redis-server
    curl -X POST localhost:5000/orders -H 'Content-Type: application/json' \
         -d '{"id": 1, "items": ["book"]}'
    open http://localhost:5000/jobs/                  # the dashboard, mounted under /jobs

The view is plain synchronous code: ``provider.emit(...).result(timeout=5)``
blocks the request thread until a subscriber (in this process here, or in any
other process or OriJS service on the same Redis) has handled the event.
The request id is put in the propagation context, so it travels in the
event's ``meta`` and into any event the handler emits.
"""
from __future__ import annotations

import uuid
from typing import Any, Dict

from flask import Flask, jsonify, request

from orijs_sync import errors
from orijs_sync.events import BullMQEventProvider, EventMessage, propagation_context


def create_app(provider: Any, dashboard: Any = None) -> Flask:
    """The app; ``provider`` is a started BullMQEventProvider (or InProcessEventProvider).
    A ``dashboard`` (``orijs_sync.dashboard.Dashboard``) is served under ``/jobs``."""
    app = Flask(__name__)
    if dashboard is not None:
        dashboard.mount(app, "/jobs")   # werkzeug's DispatcherMiddleware around app.wsgi_app

    @app.post("/orders")
    def create_order() -> Any:
        order = request.get_json(silent=True)
        if not isinstance(order, dict) or "id" not in order:
            return jsonify(error="send a JSON object with an 'id'"), 400
        request_id = request.headers.get("X-Request-Id") or str(uuid.uuid4())
        try:
            with propagation_context({"requestId": request_id}):
                result = provider.emit("order.created", order).result(timeout=5)
        except errors.JobFailed as exc:
            return jsonify(error=exc.failed_reason), 422
        except TimeoutError:
            return jsonify(error="no answer from the order service in time"), 504
        except errors.OrijsError as exc:
            return jsonify(error=str(exc)), 503
        return jsonify(result), 201

    return app


def handle_order_created(message: EventMessage) -> Dict[str, Any]:
    """The subscriber: runs on a worker thread; its return value is the view's answer."""
    order = message.payload
    if not order.get("items"):
        raise ValueError("an order needs at least one item")
    return {"orderId": order["id"], "status": "accepted", "items": len(order["items"]),
            "requestId": message.meta.get("requestId")}


def main() -> None:
    from orijs_sync.dashboard import Dashboard
    from orijs_sync.testing import local_redis

    with local_redis() as url, BullMQEventProvider(url) as provider, Dashboard(url) as board:
        provider.subscribe("order.created", handle_order_created)
        create_app(provider, board).run(port=5000, threaded=True)


if __name__ == "__main__":
    main()
