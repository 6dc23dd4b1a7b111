"""Running a Node script that stands in for a TypeScript OriJS service (tests/events,
tests/workflows) with the real Node BullMQ of tests/interop/node_modules on NODE_PATH.
Each script prints one JSON line: ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": ...}``."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping

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


@contextlib.contextmanager
def node_process(script: Path, command: str, args: Mapping[str, Any]
                 ) -> Iterator["subprocess.Popen[str]"]:
    """The script running in the background; killed (by its own handle) if still
    running when the block ends."""
    proc = subprocess.Popen(node_command(script, command, args), env=node_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
