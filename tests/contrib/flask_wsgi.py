"""The module test_flask.py hands gunicorn --preload: the extension is set up and used
(a queue add, the event provider started) at import, in gunicorn's master, before the
workers are forked. ORIJS_TEST_REDIS_URL, ORIJS_TEST_QUEUE and ORIJS_TEST_EVENT
configure it."""
from __future__ import annotations

import os

from flask import Flask, jsonify

from orijs_sync.contrib.flask import OrijsSync

QUEUE = os.environ["ORIJS_TEST_QUEUE"]
EVENT = os.environ["ORIJS_TEST_EVENT"]

orijs = OrijsSync()
app = Flask(__name__)
app.config["ORIJS_SYNC_URL"] = os.environ["ORIJS_TEST_REDIS_URL"]
orijs.init_app(app)

with app.app_context():                       # used before the fork
    orijs.queue(QUEUE).add("from-master", {"pid": os.getpid()})
    assert orijs.events.stats() is not None      # started here, in the master


@app.get("/ping")
def ping():
    return jsonify(pid=os.getpid())


@app.post("/add")
def add():
    job = orijs.queue(QUEUE).add("from-worker", {"pid": os.getpid()})
    return jsonify(job=job.id, pid=os.getpid())


@app.post("/ask")
def ask():
    answer = orijs.events.emit(EVENT, {"pid": os.getpid()}).result(timeout=10)
    return jsonify(answer=answer, pid=os.getpid())
