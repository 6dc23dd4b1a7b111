"""A handler the process-mode interop test runs in a child process, by import name
(this folder is on the test run's sys.path, which children inherit)."""
from __future__ import annotations

import os

from orijs_sync.job import Job


def reporting(job: Job) -> str:
    for step in (25, 50, 100):
        job.update_progress({"step": step})
    job.log(f"ran in {os.getpid()}")
    return "reported"
