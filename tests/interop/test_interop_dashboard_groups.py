"""The dashboard's group queue page on jobs added by Node GroupMQ (beside Python's): the
groups, their order, the job Node reserved running and, once its deadline passed with no
worker to give it back, its group shown stuck. The page is rendered by the Dashboard
itself (a WSGI call); tests/dashboard drives the same page in a browser."""
from __future__ import annotations

import io
import re
from wsgiref.util import setup_testing_defaults

import redis as redis_py
from test_interop_groups import gmq, gname  # noqa: F401 - the fixtures used here

from orijs_sync.dashboard import Dashboard, data_groups
from orijs_sync.groups import GroupQueue
from orijs_sync.testing import wait_until


def page(board, path):
    environ = {"PATH_INFO": path, "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    started = []
    body = b"".join(board(environ, lambda status, headers: started.append(status)))
    return started[0], body.decode()


def test_node_groupmq_jobs_on_the_group_page(gmq, redis_url, gname):  # noqa: F811
    added = gmq("add", jobs=[{"groupId": "node-a", "data": {"n": n}, "orderMs": 1000 + n}
                             for n in range(3)] + [{"groupId": "node-b", "data": {"n": 9}}],
                queueOpts={"jobTimeoutMs": 200})
    with GroupQueue(gname, connection=redis_url) as queue:
        python_job = queue.add(group_id="py-c", data={"n": 5})
    [taken] = gmq("reserve", queueOpts={"jobTimeoutMs": 200})
    assert taken["id"] == added[0]["id"]       # node-a's first job, by its order
    with Dashboard(redis_url) as board:
        status, html = page(board, f"/groups/{gname}")
        assert status.startswith("200")
        running = html.index(taken["id"])
        assert re.search(r'data-group="node-a"', html) and python_job.id in html
        assert html.index(added[1]["id"]) < html.index(added[2]["id"])   # in order
        assert html.index(added[3]["id"]) > 0 and running > 0
        client = redis_py.Redis.from_url(redis_url, decode_responses=True)
        try:      # no worker gives the job back: once its deadline passed, node-a is stuck
            wait_until(lambda: any(g.id == "node-a" for g in data_groups.read_group_queue(
                client, gname).stuck), timeout=30, what="node-a shown stuck")
        finally:
            client.close()
        status, html = page(board, f"/groups/{gname}")
        row = html[html.index('data-group="node-a"'):]
        row = row[:row.index("</tr>")]
        assert "lock expired" in row and taken["id"] in row
