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
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import redis

__all__ = ["RedisServer", "ClusterServers", "SentinelServers", "redis_for_tests", "local_redis",
           "wait_until", "orijs_threads", "stop_processes"]


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
        so ``restart`` (after ``halt`` or ``kill``) brings every
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
        self._proc = subprocess.Popen(self._command(self._dir.name),
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

    def _command(self, directory: str) -> List[str]:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly \
            else ["--appendonly", "no"]
        return [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", *persistence, "--dir", directory,
                "--daemonize", "no", "--loglevel", "warning", *self.args]

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    def kill(self) -> None:
        """Kill -9 the server (fault tests); ``restart`` brings it back."""
        self.halt(kill=True)

    def halt(self, kill: bool = False) -> None:
        """Stop the server process (SIGTERM, or SIGKILL with ``kill``) but keep its
        port and data dir for ``restart``: a Redis outage, for fault tests."""
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


# A replica's first sync starts at once (Redis waits 5 s by default for more replicas).
_QUICK_SYNC = ("--repl-diskless-sync-delay", "0")


def _replicas_linked(replicas: Sequence[RedisServer]) -> bool:
    for server in replicas:
        client = redis.Redis(port=server.port, socket_timeout=2, decode_responses=True)
        try:
            if client.info("replication").get("master_link_status") != "up":
                return False
        finally:
            client.close()
    return True


class ClusterServers:
    """A Redis Cluster of ``primaries`` primaries (each with ``replicas`` replicas) on free
    loopback ports, made with ``redis-cli --cluster create``; a context manager that
    stops every server it started by PID. ``startup_nodes`` is what ``connection=`` takes."""

    def __init__(self, primaries: int = 3, replicas: int = 0, *, node_timeout: float = 2.0,
                 timeout: float = 60.0) -> None:
        self.primaries, self.replicas = primaries, replicas
        self.node_timeout, self.timeout = node_timeout, timeout
        self.servers: List[RedisServer] = []

    @property
    def startup_nodes(self) -> List[Dict[str, Any]]:
        return [{"host": "127.0.0.1", "port": s.port} for s in self.servers]

    @property
    def urls(self) -> List[str]:
        return [s.url for s in self.servers]

    def start(self) -> "ClusterServers":
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(int(self.node_timeout * 1000)),
                "--cluster-require-full-coverage", "no", *_QUICK_SYNC]
        try:
            for _ in range(self.primaries * (1 + self.replicas)):
                self.servers.append(RedisServer(args=args).start())
            cli = shutil.which("redis-cli") or "redis-cli"
            subprocess.run([cli, "--cluster", "create",
                            *[f"127.0.0.1:{s.port}" for s in self.servers],
                            "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                           check=True, timeout=self.timeout, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
            wait_until(self.healthy, self.timeout, "the cluster to agree on every slot", 0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def healthy(self) -> bool:
        """Every node up, knowing every other, all slots served, every replica linked."""
        for server in self.servers:
            if server.pid is None:
                continue
            client = redis.Redis(port=server.port, socket_timeout=2, decode_responses=True)
            try:
                info = client.cluster("info")
                replication = client.info("replication")
            except redis.exceptions.RedisError:
                return False
            finally:
                client.close()
            if info.get("cluster_state") != "ok" or int(info["cluster_slots_ok"]) != 16384:
                return False
            if replication["role"] == "slave" and replication["master_link_status"] != "up":
                return False
        return True

    def _client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=5, decode_responses=True)

    def owner_port(self, slot: int) -> int:
        """The port of the primary serving ``slot`` now (as the first node answering says)."""
        for server in self.servers:
            client = self._client(server.port)
            try:
                ranges = client.execute_command("CLUSTER", "SLOTS")
            except redis.exceptions.ConnectionError:
                continue            # a node killed by the test
            finally:
                client.close()
            for first, last, primary, *_ in ranges:
                if first <= slot <= last:
                    return int(primary[1])
        raise LookupError(f"no node serves slot {slot}")

    def move_slot(self, slot: int, to_port: int) -> None:
        """Reshard one slot to the primary at ``to_port``, keys included, as
        ``redis-cli --cluster reshard`` does (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE)."""
        src, dst = self._client(self.owner_port(slot)), self._client(to_port)
        try:
            src_id, dst_id = src.execute_command("CLUSTER", "MYID"), dst.execute_command(
                "CLUSTER", "MYID")
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while True:
                keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
                if not keys:
                    break
                src.execute_command("MIGRATE", "127.0.0.1", to_port, "", 0, 5000, "REPLACE",
                                    "KEYS", *keys)
            for client in (dst, src):
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        finally:
            src.close()
            dst.close()

    def server_at(self, port: int) -> RedisServer:
        return next(s for s in self.servers if s.port == port)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers = []

    def __enter__(self) -> "ClusterServers":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Sentinel(RedisServer):
    """A ``redis-server --sentinel`` watching one primary."""

    def __init__(self, primary_port: int, service_name: str, down_after: float) -> None:
        super().__init__()
        self.primary_port, self.service_name, self.down_after = (primary_port, service_name,
                                                                  down_after)

    def _command(self, directory: str) -> List[str]:
        conf = os.path.join(directory, "sentinel.conf")
        name = self.service_name
        with open(conf, "w") as handle:
            handle.write(f"sentinel monitor {name} 127.0.0.1 {self.primary_port} 2\n"
                         f"sentinel down-after-milliseconds {name} {int(self.down_after * 1000)}\n"
                         f"sentinel failover-timeout {name} 10000\n"
                         f"sentinel parallel-syncs {name} 1\n")
        return [self.binary, conf, "--sentinel", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", directory, "--daemonize", "no", "--loglevel", "warning"]


class SentinelServers:
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels (quorum 2) on free
    loopback ports; a context manager that stops every server it started by PID."""

    def __init__(self, *, replicas: int = 1, sentinels: int = 3, service_name: str = "mymaster",
                 down_after: float = 1.0, timeout: float = 60.0,
                 primary_args: Sequence[str] = ()) -> None:
        self.service_name, self.timeout = service_name, timeout
        self.primary_args = list(primary_args)
        self.n_replicas, self.n_sentinels, self.down_after = replicas, sentinels, down_after
        self.servers: List[RedisServer] = []
        self.sentinels: List[RedisServer] = []

    @property
    def sentinel_addresses(self) -> List[Tuple[str, int]]:
        return [("127.0.0.1", s.port) for s in self.sentinels]

    @property
    def connection(self) -> Dict[str, Any]:
        """What ``connection=`` takes for this set."""
        return {"sentinels": self.sentinel_addresses, "service_name": self.service_name}

    def start(self) -> "SentinelServers":
        try:
            primary = RedisServer(args=[*_QUICK_SYNC, *self.primary_args]).start()
            self.servers.append(primary)
            for _ in range(self.n_replicas):
                self.servers.append(RedisServer(
                    args=["--replicaof", "127.0.0.1", str(primary.port), *_QUICK_SYNC]).start())
            for _ in range(self.n_sentinels):
                self.sentinels.append(
                    _Sentinel(primary.port, self.service_name, self.down_after).start())
            wait_until(self.ready, self.timeout, "sentinels to see the replicas and each other",
                       0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def _ask(self, sentinel: RedisServer, *args: str) -> object:
        client = redis.Redis(port=sentinel.port, socket_timeout=2, decode_responses=True)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def ready(self) -> bool:
        name = self.service_name
        try:
            return _replicas_linked(self.servers[1:]) and all(
                len(self._ask(s, "SENTINEL", "REPLICAS", name)) >= self.n_replicas  # type: ignore
                and len(self._ask(s, "SENTINEL", "SENTINELS", name)) >= self.n_sentinels - 1  # type: ignore
                for s in self.sentinels)
        except redis.exceptions.RedisError:
            return False

    def primary_port(self) -> int:
        """The port the first sentinel names as the primary now."""
        reply = self._ask(self.sentinels[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                          self.service_name)
        return int(reply[1])  # type: ignore[index]

    def primary(self) -> RedisServer:
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def failover(self, kill: bool = False) -> int:
        """``SENTINEL FAILOVER`` (or, with ``kill``, kill -9 the primary and let the
        sentinels notice); returns the new primary's port once it answers as one."""
        old = self.primary_port()
        if kill:
            self.primary().kill()
        else:
            self._ask(self.sentinels[0], "SENTINEL", "FAILOVER", self.service_name)

        def moved() -> bool:
            port = self.primary_port()
            if port == old:
                return False
            client = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
            try:
                return bool(client.info("replication")["role"] == "master")
            finally:
                client.close()
        wait_until(moved, self.timeout, "the sentinels to promote a replica", 0.05)
        return self.primary_port()

    def stop(self) -> None:
        for server in [*self.sentinels, *self.servers]:
            server.stop()
        self.sentinels, self.servers = [], []

    def __enter__(self) -> "SentinelServers":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cluster_supported() -> bool:
    """Whether ``redis-server`` and ``redis-cli`` here can make a cluster."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if not server or not cli:
        return False
    try:
        with RedisServer(server, args=["--cluster-enabled", "yes"]) as probe:
            client = redis.Redis(port=probe.port, decode_responses=True)
            try:
                return client.info("cluster").get("cluster_enabled") == 1
            finally:
                client.close()
    except (RuntimeError, redis.exceptions.RedisError):
        return False


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

    @pytest.fixture(scope="session")
    def redis_cluster() -> Iterator[ClusterServers]:
        """A throwaway 3-primary Redis Cluster for this session (skipped only when
        ``redis-server`` cannot run in cluster mode)."""
        if not cluster_supported():
            pytest.skip("this redis-server has no cluster support (--cluster-enabled)")
        with ClusterServers(3) as cluster:
            yield cluster

    @pytest.fixture
    def namespace(redis_url: str) -> Iterator[str]:
        """A unique token for this test's queue names; its keys are deleted afterwards."""
        token = f"t{uuid.uuid4().hex[:12]}"
        yield token
        delete_keys(redis_url, f"*{token}*")
