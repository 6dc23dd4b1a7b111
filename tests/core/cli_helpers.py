"""Running ``orijs-sync`` as a user does, in a subprocess: ``python -P -m orijs_sync``
(``-P``: the current folder is not put on ``sys.path`` by Python, as with the installed
console script; only the command itself may put it there)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from orijs_sync.testing import wait_until

ROOT = str(Path(__file__).resolve().parents[2])
COMMAND = [sys.executable, "-P", "-m", "orijs_sync"]


def cli_env(redis_url: Optional[str] = None, **extra: str) -> Dict[str, str]:
    """The environment: this checkout's package only on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=ROOT, **extra)
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    return env


def run_cli(*args: str, redis_url: Optional[str] = None, cwd: Any = None,
            code: Optional[int] = 0) -> "subprocess.CompletedProcess[str]":
    proc = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=90,
                          cwd=cwd, env=cli_env(redis_url))
    if code is not None:
        assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


class Running:
    """A long-running command (worker, events, workflows), its stderr in a file."""

    def __init__(self, *args: str, cwd: Path, redis_url: Optional[str] = None) -> None:
        self.log_path = cwd / f"cli-{len(list(cwd.glob('cli-*.log')))}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([*COMMAND, *args], cwd=cwd, env=cli_env(redis_url),
                                     stdout=subprocess.DEVNULL, stderr=self._log)

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, text: str, timeout: float = 60) -> None:
        wait_until(lambda: text in self.log() or self.proc.poll() is not None, timeout,
                   f"{text!r} in the command's log")
        assert text in self.log(), self.log()

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def __enter__(self) -> "Running":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
