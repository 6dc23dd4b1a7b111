"""The documentation site builds (mkdocs --strict, API reference from the docstrings), the
README links it, and nothing in the repository points outside it."""
from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("quickstart.md", "recipes/flask-gunicorn.md", "recipes/django.md", "recipes/scripts.md",
         "compatibility.md",
         "threading.md", "tuning.md", "guarantees.md", "reference.md", "architecture.md",
         "benchmarks.md", "cli.md", "monitoring.md")


def test_mkdocs_builds_strict_with_the_api_reference(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(tmp_path)], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    reference = (tmp_path / "reference" / "index.html").read_text()
    for documented in ("add_bulk", "get_metrics", "get_workers", "wait_until_finished",
                       "update_progress", "get_job_logs", "GroupQueue", "InProcessEventProvider",
                       "redis_url", "Tasks", "JobOptions", "run_at", "finished_at", "next_at"):
        assert documented in reference
    for role in (":class:", ":meth:", ":func:", ":mod:", ":attr:"):
        assert role not in reference, f"a raw Sphinx role {role} shows in the reference"
    index = (tmp_path / "search" / "search_index.json").read_text()
    for name in ("update_progress", "get_job_logs", "jitter", "processes", "job_timeout"):
        assert name in index, f"search finds nothing for {name}"
    for page in PAGES:
        assert (ROOT / "docs" / page).is_file(), page
    anchors = {doc["location"].partition("#")[2] for doc in json.loads(index)["docs"]}
    missing = [name for name in public_methods() if name not in anchors]
    assert not missing, f"not in the API reference (a docstring missing?): {missing}"


def public_methods():
    """``module.Class.name`` of every public method and property of the main classes, as
    the reference renders them (mkdocstrings leaves out a member without a docstring)."""
    from orijs_sync import FlowProducer, Job, Queue, QueueEvents, Worker
    from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
    for cls, path in ((Queue, "orijs_sync.queue.Queue"), (Worker, "orijs_sync.worker.Worker"),
                      (Job, "orijs_sync.job.Job"),
                      (QueueEvents, "orijs_sync.queue_events.QueueEvents"),
                      (FlowProducer, "orijs_sync.flow_producer.FlowProducer"),
                      (GroupQueue, "orijs_sync.groups.GroupQueue"),
                      (GroupWorker, "orijs_sync.groups.GroupWorker"),
                      (GroupJob, "orijs_sync.groups.GroupJob")):
        for name in dir(cls):
            member = inspect.getattr_static(cls, name)
            if not name.startswith("_") and (callable(getattr(cls, name))
                                             or isinstance(member, property)):
                yield f"{path}.{name}"


def test_readme_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert "docs/index.md" in readme and "mkdocs" in readme


def test_nothing_refers_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=str(ROOT), capture_output=True, text=True,
                           check=True, timeout=60).stdout.split()
    outside = re.compile(r"\bshared/[A-Z]|\(issue \d+\)|\bissue \d+\b")
    found = []
    for name in files:
        path = ROOT / name
        if path.suffix not in (".py", ".md", ".js", ".lua", ".cfg", ".toml", ".yml") or \
                name == "tests/core/test_docs.py":
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if outside.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []
