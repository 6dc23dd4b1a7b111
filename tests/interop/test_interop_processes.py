"""Process mode seen from Node: progress and logs written by a handler in a child
process reach a Node QueueEvents and Node's getJobLogs as a thread's would."""
from __future__ import annotations

import os

from orijs_sync import Queue, Worker


def test_node_sees_progress_and_logs_written_in_a_child_process(node, redis_url, namespace,
                                                                 ready_file):
    name = f"proc-{namespace}"
    watcher = node.start("watchJob", queue=name, id="p-1", readyFile=str(ready_file))
    watcher.wait_for_file(ready_file)
    with Queue(name, connection=redis_url) as queue, \
            Worker(name, "interop_proc_handlers:reporting", connection=redis_url, processes=1):
        queue.add("report", {}, job_id="p-1")
        seen = watcher.result()
    assert seen["progress"] == [{"step": 25}, {"step": 50}, {"step": 100}]
    assert seen["returnvalue"] in ("reported", '"reported"')
    assert len(seen["logs"]) == 1 and seen["logs"][0].startswith("ran in ")
    assert seen["logs"][0] != f"ran in {os.getpid()}"
