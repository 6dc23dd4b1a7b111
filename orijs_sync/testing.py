"""A Redis for tests and first runs, and the pytest plugin that hands it out.

``redis_url`` fixture (session scope), in this order: ``REDIS_URL`` if set;
else a throwaway container through testcontainers when a Docker engine answers;
else a ``redis-server`` from PATH on a free loopback port in a temp dir, stopped
at the end. ``namespace`` gives each test a unique token for its queue names;
the keys holding it are deleted after the test, and nothing else is touched.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Callable, Iterator, List, Optional, Sequence

import redis

__all__ = ["RedisServer", "redis_for_tests", "local_redis", "wait_until", "orijs_threads",
           "stop_processes"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A ``redis-server`` child process on a free loopback port; a context manager.
    ``args`` are more ``redis-server`` options (``--tls-port``, ``--requirepass``...);
    ``password`` is what the readiness check authenticates with."""

    def __init__(self, binary: Optional[str] = None, port: Optional[int] = None, *,
                 args: Sequence[str] = (), password: Optional[str] = None,
                 appendonly: bool = False) -> None:
        """``appendonly=True``: every write is fsynced to an AOF before Redis replies,
        so :meth:`restart` (after :meth:`halt` or :meth:`kill`) brings every
        acknowledged write back, as a production Redis with AOF would."""
        found = binary or shutil.which("redis-server")
        if not found:
            raise RuntimeError("redis-server is not on PATH (install Debian's redis-server "
                               "package, or set REDIS_URL)")
        self.binary: str = found
        self.port = port or _free_port()
        self.args = list(args)
        self.password = password
        self.appendonly = appendonly
        self._dir: Optional["tempfile.TemporaryDirectory[str]"] = None
        self._proc: Optional["subprocess.Popen[bytes]"] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0, attempts: int = 5) -> "RedisServer":
        """Start the server; a port taken by another process between our probe and
        the server's bind is detected (the PID answering is not ours) and retried."""
        for attempt in range(attempts):
            if attempt:
                self.port = _free_port()
            if self._start_once(timeout):
                return self
        raise RuntimeError(f"redis-server did not start after {attempts} tries")

    def _start_once(self, timeout: float) -> bool:
        self._dir = tempfile.TemporaryDirectory(prefix="orijs-redis-")
        if self._launch(timeout):
            return True
        self.stop()
        return False

    def _launch(self, timeout: float) -> bool:
        """Run the server on ``self.port`` with the current data dir; True once it is ours."""
        assert self._dir is not None
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly \
            else ["--appendonly", "no"]
        self._proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", *persistence, "--dir", self._dir.name,
             "--daemonize", "no", "--loglevel", "warning", *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, password=self.password)
        try:
            while self._proc.poll() is None and time.monotonic() < deadline:
                try:
                    if int(client.info("server")["process_id"]) == self._proc.pid:
                        return True
                    break      # another process's server holds the port
                except redis.exceptions.ConnectionError:   # down, or still loading its AOF
                    time.sleep(0.02)
        finally:
            client.close()
        self.halt(kill=True)
        return False

    def kill(self) -> None:
        """Kill -9 the server (fault tests); :meth:`restart` brings it back."""
        self.halt(kill=True)

    def halt(self, kill: bool = False) -> None:
        """Stop the server process (SIGTERM, or SIGKILL with ``kill``) but keep its
        port and data dir for :meth:`restart`: a Redis outage, for fault tests."""
        if self._proc is None:
            return
        if kill:
            self._proc.kill()
        else:
            self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    def restart(self, timeout: float = 10.0) -> "RedisServer":
        """Start the server again on the same port with the same data dir (its AOF is
        reloaded with ``appendonly=True``); a running server is halted first."""
        if self._dir is None:
            raise RuntimeError("restart() needs a server that was started")
        self.halt()
        if not self._launch(timeout):
            raise RuntimeError(f"redis-server did not restart on port {self.port}")
        return self

    def stop(self) -> None:
        self.halt()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]
        client = docker.from_env(timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextlib.contextmanager
def redis_for_tests() -> Iterator[str]:
    """Yield a Redis URL: ``REDIS_URL``, else a container, else a local redis-server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    if _docker_answers():
        from testcontainers.redis import RedisContainer
        with RedisContainer("redis:7") as container:
            host = container.get_container_host_ip()
            port = container.get_exposed_port(6379)
            yield f"redis://{host}:{port}/0"
        return
    with RedisServer() as server:
        yield server.url


@contextlib.contextmanager
def local_redis(url: Optional[str] = None) -> Iterator[str]:
    """For demos: use ``url`` (or ``REDIS_URL``) when given, else start a redis-server."""
    url = url or os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with RedisServer() as server:
        yield server.url


def delete_keys(url: str, pattern: str) -> int:
    """Delete every key matching ``pattern`` (SCAN, never KEYS); returns the count."""
    client = redis.Redis.from_url(url)
    try:
        count = 0
        batch = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                count += client.delete(*batch)
                batch = []
        if batch:
            count += client.delete(*batch)
        return count
    finally:
        client.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition",
               interval: float = 0.01) -> None:
    """Poll until ``predicate()`` is true; raise ``AssertionError`` after ``timeout``
    seconds. For tests: the timeout is a guard against hangs, not a measurement."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stop_processes(procs: List["subprocess.Popen[bytes]"], timeout: float = 20.0) -> None:
    """SIGTERM the test's worker processes still running (a graceful close), wait for
    them, SIGKILL any that outlive ``timeout``. Only the given processes are touched."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def orijs_threads() -> List[threading.Thread]:
    """The live threads orijs_sync started (all are named ``orijs-...``)."""
    return [t for t in threading.enumerate() if t.name.startswith("orijs-")]


try:
    import pytest
except ImportError:  # pragma: no cover - the plugin needs pytest, the helpers above do not
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def redis_url() -> Iterator[str]:
        """The URL of a Redis for this test session."""
        with redis_for_tests() as url:
            yield url

    @pytest.fixture
    def namespace(redis_url: str) -> Iterator[str]:
        """A unique token for this test's queue names; its keys are deleted afterwards."""
        token = f"t{uuid.uuid4().hex[:12]}"
        yield token
        delete_keys(redis_url, f"*{token}*")
