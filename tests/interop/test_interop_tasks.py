"""A task is a job name: a Node producer adding a job of that name and data reaches the
Python function; Node reads what a Python task adds as a plain BullMQ job."""
from __future__ import annotations

from orijs_sync import QueueEvents, Tasks


def test_a_node_producer_reaches_a_python_task(node, redis_url, namespace):
    queue = f"tasks-{namespace}"
    with Tasks(connection=redis_url) as tasks:
        @tasks.task(queue=queue)
        def send_welcome(user_id: int, greeting: str = "hello") -> str:
            return f"{greeting} {user_id}"

        added = node("add", queue=queue, name="send_welcome", data={"user_id": 5})
        with QueueEvents(queue, connection=redis_url) as events, tasks.worker(queue):
            job = tasks.queue(queue).get_job(added["id"])
            assert job.wait_until_finished(events, timeout=30) == "hello 5"


def test_node_reads_what_a_python_task_adds_as_a_plain_job(node, redis_url, namespace):
    queue = f"tasks-{namespace}"
    with Tasks(connection=redis_url) as tasks:
        @tasks.task(queue=queue, attempts=2)
        def resize(width: int) -> None:
            raise AssertionError("only added here")

        job = resize.add(width=640)
        seen = node("getJob", queue=queue, id=job.id)
    assert (seen["name"], seen["data"], seen["opts"]["attempts"]) == ("resize", {"width": 640}, 2)
