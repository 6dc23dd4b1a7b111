"""Redis Cluster and Sentinel behind ``connection=``, on redis-py's own engines.

Cluster (``redis.cluster.RedisCluster``): a list of ``redis://`` URLs, a dict with
``startup_nodes`` (``[{"host": ..., "port": ...}]`` or ``(host, port)`` pairs, plus any
connection option), or an existing ``RedisCluster``. redis-py routes each command and
script to the node owning its slot and follows ``MOVED``/``ASK``; scripts reload on
``NOSCRIPT``. Every key of one queue must share a slot (BullMQ's rule): the
``{prefix}:{name}:`` part of its keys must hold a hash tag (``prefix="{orders}"`` or a
``{...}`` name), which ``check_queue`` enforces. The events thread reads every node
at once on one thread: one ``XREAD BLOCK`` per node, for the streams that node owns,
multiplexed with ``select`` (``NodeStreams``).

Sentinel: a dict with ``sentinels`` (``[(host, port), ...]``) and ``service_name`` (and
``sentinel_kwargs`` for the sentinels' own options); every connection asks the
sentinels for the primary when it connects, so after a failover each component's next
reconnect reaches the new primary.
"""
from __future__ import annotations

import contextlib
import logging
import select
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.crc import key_slot
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from .. import errors
from ..base import fork
from . import workers_list
from .connection import (
    _POOL_INTERNALS,
    REDIS_PY_ERRORS,
    BlockingClient,
    RedisConnection,
    text_options,
    translate,
)

log = logging.getLogger(__name__)

_SENTINEL_KEYS = ("sentinels", "service_name", "sentinel_kwargs")
# What redis-py keeps in a cluster's connection options for itself: never copied.
_CLUSTER_INTERNALS = frozenset({"host", "port", "connection_pool", "retry", "redis_connect_func",
                                "event_dispatcher", "decode_responses"})


def connection_class_for(connection: Any) -> Optional[type]:
    """The RedisConnection subclass that ``connection`` describes, None for a plain Redis."""
    if isinstance(connection, RedisCluster):
        return ClusterConnection
    if isinstance(connection, (list, tuple)):
        return ClusterConnection
    if isinstance(connection, Mapping):
        if "startup_nodes" in connection:
            return ClusterConnection
        if "sentinels" in connection:
            return SentinelConnection
    return None


def hash_tag(prefix: str, name: str) -> Optional[str]:
    """The hash tag every key ``{prefix}:{name}:...`` hashes by, or None when the keys
    of that queue would spread over many slots (Redis's rule: the first ``{``, then the
    first ``}`` after it, with something between)."""
    base = f"{prefix}:{name}:"
    start = base.find("{")
    end = base.find("}", start + 1) if start >= 0 else -1
    return base[start + 1:end] if start >= 0 and end > start + 1 else None


def is_cluster(connection: Any) -> bool:
    """Whether ``connection`` (anything ``connection=`` takes) is a Redis Cluster."""
    if isinstance(connection, RedisConnection):
        return connection.is_cluster
    return connection_class_for(connection) is ClusterConnection


def check_queue(connection: Any, prefix: str, name: str) -> None:
    """On a cluster, refuse a queue whose keys would not all share one slot (before
    any connection is made)."""
    if is_cluster(connection) and hash_tag(prefix, name) is None:
        raise errors.CrossSlotError(
            f"queue {name!r} with prefix {prefix!r} cannot run on a Redis Cluster: its keys "
            f"would spread over several hash slots. Put a hash tag in the prefix or the "
            f"name, as BullMQ requires: prefix='{{{prefix}}}' or a name like '{{{name}}}'")


def check_flow(queues: Sequence[Tuple[str, str]]) -> None:
    """On a cluster, every job of a flow (parents and children) must be in one slot."""
    slots = {(prefix, name): key_slot(f"{prefix}:{name}:".encode()) for prefix, name in queues}
    if len(set(slots.values())) > 1:
        listed = ", ".join(f"{p}:{n} (slot {s})" for (p, n), s in slots.items())
        raise errors.CrossSlotError(
            f"a flow on a Redis Cluster must keep all its queues in one hash slot, as "
            f"BullMQ requires: give every queue of the flow the same hash tag (e.g. "
            f"prefix='{{flows}}' for all of them); these differ: {listed}")


@contextlib.contextmanager
def _translated(address: str) -> Iterator[None]:
    """redis-py's errors as the library's, naming the cluster (``translate``, as on one
    Redis); NOSCRIPT passes, for redis-py's Script to load the script and run it again."""
    try:
        yield
    except redis.exceptions.NoScriptError:
        raise
    except REDIS_PY_ERRORS as exc:
        raise translate(exc, address) from exc


class ClusterClient(RedisCluster):
    """A ``RedisCluster`` whose failures raise the library's errors, naming the cluster."""

    address = "cluster"

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with _translated(self.address):
            return super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        pipe.__class__ = _ClusterPipeline
        pipe.address = self.address
        return pipe

    def xread(self, streams: Any, count: Any = None, block: Any = None,  # type: ignore[override]
              noack: bool = False, claim_min_idle_time: Any = None) -> Any:
        reader = getattr(self, "node_streams", None)
        if reader is None or block is None:
            return super().xread(streams, count=count, block=block)
        return reader.read(streams, block, count or 1000)


class _ClusterPipeline(ClusterPipeline):
    address = "cluster"

    def execute(self, raise_on_error: bool = True) -> Any:
        with _translated(self.address):
            return super().execute(raise_on_error)

    def run_script(self, source: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """EVAL, not EVALSHA, inside a cluster pipeline: a node that never saw the
        script (after a failover or a resharding) runs it all the same."""
        return self.execute_command("EVAL", source, len(keys), *keys, *args)


def _startup_nodes(connection: Any) -> Tuple[List[ClusterNode], Dict[str, Any]]:
    """(startup nodes, other options) of a list of URLs or a ``startup_nodes`` dict."""
    if isinstance(connection, (list, tuple)):
        connection = {"startup_nodes": list(connection)}
    options = dict(connection)
    nodes = []
    for node in options.pop("startup_nodes"):
        if isinstance(node, str):
            parsed = redis.connection.parse_url(node)
            for key in ("username", "password"):
                if parsed.get(key):
                    options.setdefault(key, parsed[key])
            if parsed.get("connection_class") is redis.SSLConnection:
                options.setdefault("ssl", True)
            nodes.append(ClusterNode(parsed.get("host", "127.0.0.1"), parsed.get("port", 6379)))
        elif isinstance(node, ClusterNode):
            nodes.append(ClusterNode(node.host, node.port))
        elif isinstance(node, Mapping):
            nodes.append(ClusterNode(node["host"], int(node.get("port", 6379))))
        else:
            host, port = node
            nodes.append(ClusterNode(host, int(port)))
    if not nodes:
        raise ValueError("a cluster connection needs at least one startup node")
    return nodes, options


class ClusterConnection(RedisConnection):
    """A Redis Cluster: ``client`` is a ``ClusterClient`` (thread-safe, routing by
    slot); blocking roles get a cluster client of their own."""

    is_cluster = True
    _nodes: List[ClusterNode]
    _options: Dict[str, Any]

    def __init__(self, connection: Any = None, *, max_connections: Optional[int] = None) -> None:
        if isinstance(connection, ClusterConnection):
            nodes, options = list(connection._nodes), dict(connection._options)
        elif isinstance(connection, RedisCluster):
            nodes = [ClusterNode(n.host, n.port) for n in connection.get_nodes()]
            options = {k: v for k, v in connection.nodes_manager.connection_kwargs.items()
                       if k not in _CLUSTER_INTERNALS}
        else:
            nodes, options = _startup_nodes(connection)
        if max_connections is not None:
            options["max_connections"] = max_connections
        self._nodes, self._options = nodes, options
        self._kwargs, self._connection_class = options, redis.Connection
        self.address = "cluster " + ",".join(f"{n.host}:{n.port}" for n in nodes)
        self.client = self._make_cluster(dict(options))  # type: ignore[assignment]
        self._closed = False
        self._local = threading.local()
        self._direct_lock = threading.Lock()
        self._direct: List[Any] = []
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """redis-py's pools notice the new PID and open new connections in the child."""
        self._direct_lock = threading.Lock()
        self._local = threading.local()

    def __reduce__(self) -> Any:
        return (ClusterConnection, ({"startup_nodes": [(n.host, n.port) for n in self._nodes],
                                     **self._options},))

    def _make_cluster(self, options: Dict[str, Any], **more: Any) -> ClusterClient:
        options.update(more)
        text_options(options, packer=False)
        options.setdefault("socket_connect_timeout", 5)
        client = ClusterClient(startup_nodes=list(self._nodes), **options)
        client.address = self.address
        return client

    def blocking_client(self, longest_block: float,
                        client_name: Optional[str] = None) -> BlockingClient:
        """A cluster client of its own whose sockets wait ``longest_block`` plus a
        margin, which never retries (an interrupted block must return at once);
        ``client_name`` is set on each node connection it opens, as on one Redis."""
        timeout = self._options.get("socket_timeout")
        if timeout is None or timeout < longest_block + 5:
            timeout = longest_block + 5
        more: Dict[str, Any] = {}
        if client_name:
            more["redis_connect_func"] = workers_list.naming_connect_func(
                client_name, self._options.get("redis_connect_func"))
        client = self._make_cluster(dict(self._options), socket_timeout=timeout,
                                    retry=Retry(NoBackoff(), 0), **more)
        blocking = ClusterBlockingClient(client)  # type: ignore[arg-type]
        client.node_streams = NodeStreams(client, blocking)  # type: ignore[attr-defined]
        return blocking

    def direct_connection(self) -> Any:
        raise errors.OrijsError("a cluster connection has no single direct connection: "
                                "run scripts through connection.client")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.close()


class ClusterBlockingClient(BlockingClient):
    """A blocking cluster client: ``interrupt()`` cuts every node's socket."""

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._interrupted = False

    def _sockets(self) -> List[Any]:
        sockets = []
        for node in self.client.get_nodes():  # type: ignore[attr-defined]
            pool = getattr(node.redis_connection, "connection_pool", None)
            sockets += [getattr(c, "_sock", None)
                        for c in list(getattr(pool, "_in_use_connections", ()))]
        reader = getattr(self.client, "node_streams", None)
        if reader is not None:
            sockets += reader.sockets()
        return [s for s in sockets if s is not None]

    def bzpopmin(self, keys: List[str], timeout: float) -> Optional[List[str]]:
        popped: Any = self.client.bzpopmin(keys, timeout=timeout)
        return [str(part) for part in popped] if popped else None

    def xread(self, streams: Mapping[str, str], block_ms: int, count: int) -> Any:
        """Through the cluster client, which reads every node owning some streams."""
        return self.client.xread(cast(Any, streams), block=block_ms, count=count) or []

    def call(self, *command: Any) -> Any:
        return self.client.execute_command(*command)

    def close(self) -> None:
        reader = getattr(self.client, "node_streams", None)
        if reader is not None:
            reader.close()
        self.client.close()


class NodeStreams:
    """``XREAD BLOCK`` on every node at once, from one thread: each node owning some of
    the streams gets one request on a connection of its own; ``read`` returns the
    replies that arrive first and leaves the others pending for the next call."""

    def __init__(self, client: ClusterClient, owner: ClusterBlockingClient) -> None:
        self.client, self.owner = client, owner
        self._conns: Dict[str, Any] = {}           # node name -> its connection
        self._pending: Dict[str, bool] = {}        # node name -> a request is out
        self._lock = threading.Lock()              # guards _conns for sockets()/close()

    def _connection(self, node: ClusterNode) -> Any:
        conn = self._conns.get(node.name)
        if conn is None:
            kwargs = dict(self.client.nodes_manager.connection_kwargs, host=node.host,
                          port=node.port)
            for key in ("connection_pool", "retry", "redis_connect_func", *_POOL_INTERNALS):
                kwargs.pop(key, None)
            ssl = kwargs.pop("ssl", False)
            conn_class = kwargs.pop("connection_class", None) or (
                redis.SSLConnection if ssl else redis.Connection)
            if not issubclass(conn_class, redis.SSLConnection):
                kwargs = {k: v for k, v in kwargs.items() if not k.startswith("ssl_")}
            conn = conn_class(**kwargs)
            with self._lock:
                self._conns[node.name] = conn
        return conn

    def _by_node(self, streams: Mapping[str, str]) -> Dict[str, Tuple[ClusterNode, Dict[str, str]]]:
        groups: Dict[str, Tuple[ClusterNode, Dict[str, str]]] = {}
        for key, last in streams.items():
            node = self.client.get_node_from_key(key)
            groups.setdefault(node.name, (node, {}))[1][key] = last
        return groups

    def read(self, streams: Mapping[str, str], block_ms: int, count: int) -> List[Any]:
        try:
            for name, (node, group) in self._by_node(streams).items():
                if not self._pending.get(name):
                    self._connection(node).send_command(
                        "XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS",
                        *group.keys(), *group.values())
                    self._pending[name] = True
            return self._collect(block_ms / 1000.0 + 1.0)
        except (redis.exceptions.RedisError, OSError) as exc:
            self._reset()
            if self.owner.take_interrupt():
                return []           # woken on purpose: read again with the new streams
            self._refresh_slots(exc)
            if isinstance(exc, (redis.exceptions.ResponseError, redis.exceptions.ClusterError)):
                return []           # MOVED/ASK/CLUSTERDOWN: the slots were read again
            raise errors.ConnectionError(f"Redis at {self.client.address} failed: {exc}") from exc

    def _refresh_slots(self, cause: BaseException) -> None:
        """Read the cluster's slot map again (after a resharding or a failover)."""
        log.info("events: %s; reading the cluster's slots again", cause)
        try:
            self.client.nodes_manager.initialize()
        except redis.exceptions.RedisError as exc:
            log.info("events: the cluster's slots are not readable yet: %s", exc)

    def _collect(self, timeout: float) -> List[Any]:
        waiting = {self._conns[name]._sock: name for name, out in self._pending.items() if out}
        if not waiting:
            return []
        ready, _, _ = select.select(list(waiting), [], [], timeout)
        replies: List[Any] = []
        for sock in ready:
            name = waiting[sock]
            reply = self._conns[name].read_response()
            self._pending[name] = False
            if isinstance(reply, dict):     # RESP3 answers a map
                reply = list(reply.items())
            replies += list(reply or ())      # fields as sent: see as_fields
        return replies

    def _reset(self) -> None:
        """Drop every connection (their requests' replies are unknown): the next read
        sends new ones."""
        with self._lock:
            conns, self._conns = self._conns, {}
        self._pending = {}
        for conn in conns.values():
            conn.disconnect()

    def sockets(self) -> List[Any]:
        with self._lock:
            return [getattr(c, "_sock", None) for c in self._conns.values()]

    def close(self) -> None:
        self._reset()


class _PrimaryConnection(SentinelManagedConnection):
    """A Sentinel-managed connection that also leaves a primary refusing writes for want
    of replicas (``NOREPLICAS``, with ``min-replicas-to-write``): after a failover the
    old primary says so until the sentinels demote it, and the next connection asks
    the sentinels again (redis-py does this for ``READONLY`` only)."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except redis.exceptions.ResponseError as exc:
            if not str(exc).startswith("NOREPLICAS") or not self.connection_pool.is_master:
                raise
            self.disconnect()
            raise redis.exceptions.ConnectionError(f"the primary refuses writes: {exc}") from exc


class _PrimarySSLConnection(_PrimaryConnection, redis.SSLConnection):
    pass


class SentinelConnection(RedisConnection):
    """A primary found through Sentinel: every new connection asks the sentinels."""

    def __init__(self, connection: Any = None, *, max_connections: Optional[int] = None) -> None:
        if not isinstance(connection, RedisConnection):
            options = dict(connection)
            if not options.get("sentinels") or not options.get("service_name"):
                raise ValueError("a Sentinel connection needs 'sentinels' "
                                 "([(host, port), ...]) and 'service_name'")
        super().__init__(connection, max_connections=max_connections)
        sentinels = ",".join(f"{h}:{p}" for h, p in self._kwargs["sentinels"])
        self.address = f"sentinel {self._kwargs['service_name']} via {sentinels}"
        self.client.address = self.address

    def __reduce__(self) -> Any:
        return (SentinelConnection, (dict(self._kwargs),))

    def _make_client(self, kwargs: Dict[str, Any]) -> Any:
        sentinel_options = {k: kwargs.pop(k, None) for k in _SENTINEL_KEYS}
        text_options(kwargs)
        kwargs.setdefault("socket_connect_timeout", 5)
        kwargs.setdefault("health_check_interval", 30)
        max_connections = kwargs.pop("max_connections", None)
        sentinel_kwargs = dict(sentinel_options["sentinel_kwargs"] or {})
        sentinel_kwargs.setdefault("socket_timeout", 2)
        sentinel_kwargs.setdefault("socket_connect_timeout", 2)
        manager = Sentinel([tuple(s) for s in sentinel_options["sentinels"]],
                           sentinel_kwargs=sentinel_kwargs)
        service = sentinel_options["service_name"]
        ssl = issubclass(self._connection_class, redis.SSLConnection)
        kwargs["connection_class"] = _PrimarySSLConnection if ssl else _PrimaryConnection

        def make_pool() -> redis.ConnectionPool:
            return SentinelConnectionPool(service, manager, max_connections=max_connections,
                                          **dict(kwargs))

        return self._client_on(make_pool)
