"""The module you hand gunicorn: a Flask app whose event provider is made at import time.

    gunicorn -w 4 -k gthread --threads 8 --preload examples.wsgi:app     # the web tier
    python -m examples.wsgi subscriber                                   # the order service

``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``) and ``ORIJS_QUEUE_PREFIX`` (default
``event``) configure both. The provider is created and started here, at import:
with ``--preload`` that happens once in gunicorn's master and every worker process
inherits it by ``fork()``; the provider notices and gives each worker its own
connections and events thread on its first ``emit`` (nothing to write in a
``post_fork`` hook). Without ``--preload`` each worker imports this module itself.
``sync`` and ``gthread`` workers both work: ``emit(...).result(timeout=5)`` blocks
only the request's thread.

``POST /orders`` emits ``order.created`` and answers with the subscriber's result
(see ``examples/flask_app.py``); ``GET /ping`` answers without Redis (a baseline).
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Any

from flask import jsonify

from examples.flask_app import create_app, handle_order_created
from orijs_sync.events import BullMQEventProvider

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE_PREFIX = os.environ.get("ORIJS_QUEUE_PREFIX", "event")


def _make_provider() -> BullMQEventProvider:
    provider = BullMQEventProvider(REDIS_URL, queue_prefix=QUEUE_PREFIX,
                                   default_job_options={"attempts": 1})
    atexit.register(provider.stop, timeout=10)   # each process stops its own copy
    return provider


def subscriber() -> None:
    """Run the ``order.created`` subscriber until SIGTERM/SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with _make_provider() as service:
        service.subscribe("order.created", handle_order_created)
        print("READY", flush=True)
        stop.wait()


if __name__ == "__main__":
    if sys.argv[1:] != ["subscriber"]:
        sys.exit("usage: python -m examples.wsgi subscriber")
    subscriber()
else:
    provider = _make_provider().start()
    app = create_app(provider)

    @app.get("/ping")
    def ping() -> Any:
        return jsonify(ok=True, pid=os.getpid())
