"""Interop tests: a real Node BullMQ (pinned in tests/interop/package.json) on the
same Redis as orijs_sync.

Nothing here is skipped: when ``node`` or the installed ``bullmq`` package is
missing, every interop test fails with a message saying how to install it
(``bash .ci/setup`` does: ``npm install --no-save`` in tests/interop).

The Node side is ``node/driver.js``; ``run_node(command, args, timeout)`` calls
it and returns its JSON result. Tests get it through the ``node`` fixture, whose
calls fill in the Redis URL.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional

import pytest

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "node" / "driver.js"
NODE_MODULES = HERE / "node_modules"
INSTALL_HINT = ("install it with `npm install --no-save` in tests/interop "
                "(`bash .ci/setup` does that)")


class NodeDriverError(AssertionError):
    """The Node driver failed (error reply, bad output, crash or timeout)."""


def _node_binary() -> str:
    node = shutil.which("node")
    if not node:
        pytest.fail("interop tests need Node.js: `node` is not on PATH "
                    "(Debian: apt-get install nodejs npm)", pytrace=False)
    return node


def check_node_setup() -> str:
    """Fail (never skip) unless node and the pinned bullmq are installed; returns node's path."""
    node = _node_binary()
    if not DRIVER.is_file():
        pytest.fail(f"the interop driver {DRIVER} is missing", pytrace=False)
    installed = NODE_MODULES / "bullmq" / "package.json"
    if not installed.is_file():
        pytest.fail(f"Node package bullmq is not installed in {NODE_MODULES}: {INSTALL_HINT}",
                    pytrace=False)
    wanted = json.loads((HERE / "package.json").read_text())["dependencies"]["bullmq"]
    have = json.loads(installed.read_text())["version"]
    if have != wanted:
        pytest.fail(f"tests/interop has bullmq {have} installed but package.json pins {wanted}: "
                    f"{INSTALL_HINT}", pytrace=False)
    return node


def _parse_reply(command: str, proc_stdout: str, proc_stderr: str, returncode: int) -> Any:
    lines = [line for line in proc_stdout.splitlines() if line.strip()]
    if not lines:
        raise NodeDriverError(f"node driver {command!r} printed nothing (exit {returncode}); "
                              f"stderr:\n{proc_stderr}")
    try:
        reply = json.loads(lines[-1])
    except ValueError as exc:
        raise NodeDriverError(f"node driver {command!r} printed non-JSON {lines[-1]!r} "
                              f"(exit {returncode}); stderr:\n{proc_stderr}") from exc
    if not reply.get("ok") or returncode != 0:
        raise NodeDriverError(f"node driver {command!r} failed (exit {returncode}): "
                              f"{reply.get('error')}\n{reply.get('stack') or ''}\n"
                              f"stderr:\n{proc_stderr}")
    return reply.get("result")


def _command_line(command: str, args: Mapping[str, Any], timeout: float) -> List[str]:
    payload = dict(args)
    # The driver's own guard fires first, so a hung command reports itself in JSON.
    payload.setdefault("timeout", max(timeout - 5.0, timeout * 0.8))
    return [_node_binary(), str(DRIVER), command, json.dumps(payload)]


def run_node(command: str, args: Optional[Mapping[str, Any]] = None, timeout: float = 60.0) -> Any:
    """Run ``node driver.js <command> '<json args>'``; return its result or raise."""
    cmd = _command_line(command, args or {}, timeout)
    try:
        proc = subprocess.run(cmd, cwd=str(HERE), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise NodeDriverError(f"node driver {command!r} did not exit within {timeout} s; "
                              f"stderr:\n{exc.stderr!r}") from exc
    return _parse_reply(command, proc.stdout, proc.stderr, proc.returncode)


class NodeProcess:
    """A driver command running in the background (``NodeDriver.start``)."""

    def __init__(self, command: str, cmd: List[str], timeout: float) -> None:
        self.command = command
        self.timeout = timeout
        self.proc = subprocess.Popen(cmd, cwd=str(HERE), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for_file(self, path: Path, timeout: float = 30.0) -> None:
        """Wait until the driver has written ``path`` (its readiness signal)."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate(timeout=10)
                raise NodeDriverError(f"node driver {self.command!r} exited before it was ready "
                                      f"(exit {self.proc.returncode}):\n{out}\n{err}")
            if time.monotonic() > deadline:
                self.kill()
                raise NodeDriverError(f"node driver {self.command!r} was not ready within "
                                      f"{timeout} s")
            time.sleep(0.02)

    def result(self) -> Any:
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise NodeDriverError(f"node driver {self.command!r} did not exit within "
                                  f"{self.timeout} s") from exc
        return _parse_reply(self.command, out, err, self.proc.returncode)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


class NodeDriver:
    """Calls the Node driver against one Redis; ``url`` is added to every call."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self._started: List[NodeProcess] = []

    def _args(self, args: Mapping[str, Any]) -> Dict[str, Any]:
        merged = {"url": self.redis_url}
        merged.update(args)
        return merged

    def __call__(self, command: str, timeout: float = 60.0, **args: Any) -> Any:
        return run_node(command, self._args(args), timeout=timeout)

    def start(self, command: str, timeout: float = 60.0, **args: Any) -> NodeProcess:
        """Start a command in the background; ``.result()`` waits for its reply."""
        process = NodeProcess(command, _command_line(command, self._args(args), timeout), timeout)
        self._started.append(process)
        return process

    def close(self) -> None:
        for process in self._started:
            process.kill()
        self._started.clear()


@pytest.fixture(scope="session")
def node_setup() -> str:
    """Node.js and the pinned bullmq are installed (fails the test otherwise)."""
    return check_node_setup()


@pytest.fixture
def node(node_setup: str, redis_url: str) -> Iterator[NodeDriver]:
    """The Node BullMQ driver bound to this session's Redis."""
    driver = NodeDriver(redis_url)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def ready_file() -> Iterator[Path]:
    """A path, not yet created, for a background driver's readiness signal."""
    with tempfile.TemporaryDirectory(prefix="orijs-interop-") as tmp:
        yield Path(tmp) / "ready"
