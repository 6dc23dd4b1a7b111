"""One cron dialect, BullMQ's: the patterns our job schedulers and both event providers
read give the same next run as Node's cron-parser (which BullMQ uses; 6 fields = seconds
first)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from orijs_sync.job_scheduler import cron_next_millis

HERE = Path(__file__).resolve().parent     # cron-parser is in node_modules here

PATTERNS = ["30 5 * * * *", "*/15 * * * * *", "0 0 12 * * 1", "5 4 * * *", "0 */2 * * *",
            "15,45 10 3 * * *"]
AFTER = [1767225600000, 1767225600000 + 1234567, 1780000000123]   # 2026-01-01T00:00Z...


def _node_next(pattern: str, after: int) -> int:
    script = ("const p = require('cron-parser');"
              "const [pattern, after] = JSON.parse(process.argv[1]);"
              "const it = p.parseExpression(pattern, {currentDate: new Date(after), tz: 'UTC'});"
              "console.log(it.next().getTime());")
    out = subprocess.run([shutil.which("node") or "node", "-e", script,
                          json.dumps([pattern, after])], cwd=HERE, capture_output=True,
                         text=True, timeout=60, check=True)
    return int(out.stdout.strip())


def test_next_runs_match_nodes_cron_parser():
    for pattern in PATTERNS:
        for after in AFTER:
            assert cron_next_millis(pattern, after, tz="UTC") == _node_next(pattern, after), \
                (pattern, after)
