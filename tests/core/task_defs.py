"""Tasks declared at a module's top level, as an application declares them: imported by
name in child processes (process mode) and reached by Node producers by job name."""
from __future__ import annotations

import os

from orijs_sync import Tasks

tasks = Tasks()         # configured by the tests (Tasks.configure), as an app's settings do
QUEUE = "tasks-demo"


@tasks.task(queue=QUEUE, attempts=2)
def send_welcome(user_id: int, greeting: str = "hello") -> str:
    return f"{greeting} {user_id}"


@tasks.task(queue=QUEUE, name="reports.build")
def build_report(month: str) -> dict:
    return {"month": month, "pid": os.getpid()}
