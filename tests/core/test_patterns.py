"""Every page of docs/patterns/ (BullMQ's guide patterns, in Python) holds an example
that runs: its Python blocks, joined, run as a script against the test Redis (the
cluster page against the session's cluster)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "docs" / "patterns").glob("*.md") if p.stem != "index")
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_every_pattern_of_the_guide_has_a_page():
    assert {p.stem for p in PAGES} >= {
        "bulk-across-queues", "manual-processing", "named-processor", "flows", "idempotent-jobs", "throttle-jobs",
        "process-step-jobs", "fail-fast", "stop-retrying", "timeout-jobs",
        "timeout-child-processes", "redis-cluster"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_the_pattern_example_runs(page: Path, redis_url: str, tmp_path: Path,
                                  request: pytest.FixtureRequest) -> None:
    code = "\n".join(BLOCK.findall(page.read_text()))
    assert code.strip(), f"{page.name} has no Python example"
    env = dict(os.environ, REDIS_URL=redis_url)
    if page.stem == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        env["REDIS_CLUSTER_NODES"] = ",".join(f"{n['host']}:{n['port']}"
                                              for n in cluster.startup_nodes)
    script = tmp_path / f"{page.stem.replace('-', '_')}.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}\n{done.stderr}"
