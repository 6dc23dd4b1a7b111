"""Running a Node script that stands in for a TypeScript OriJS service (tests/events,
tests/workflows) with the real Node BullMQ of tests/interop/node_modules on NODE_PATH.
Each script prints one JSON line: ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": ...}``."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Mapping

NODE_MODULES = Path(__file__).resolve().parent / "interop" / "node_modules"


def node_command(script: Path, command: str, args: Mapping[str, Any]) -> List[str]:
    node = shutil.which("node")
    assert node, "these tests need Node.js (`node` on PATH) and tests/interop's npm install"
    assert (NODE_MODULES / "bullmq").is_dir(), f"Node bullmq is missing in {NODE_MODULES}"
    return [node, str(script), command, json.dumps(args)]


def node_env() -> Dict[str, str]:
    return {**os.environ, "NODE_PATH": str(NODE_MODULES)}


def node_reply(stdout: str, stderr: str) -> Any:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, f"node printed nothing; stderr:\n{stderr}"
    reply = json.loads(lines[-1])
    assert reply["ok"], f"node failed: {reply.get('error')}\nstderr:\n{stderr}"
    return reply["result"]
