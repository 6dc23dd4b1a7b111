"""examples/groups_demo.py runs to its end on the test Redis."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_groups_demo_runs(redis_url):
    env = dict(os.environ, REDIS_URL=redis_url, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "groups_demo.py")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "every customer's orders ran in order, one at a time" in out.stdout
