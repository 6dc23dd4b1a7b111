"""Connection options -> ``redis.Redis`` clients, with errors that name the address.

Accepted forms for ``connection``: a URL string (``"redis://127.0.0.1:6379/0"``),
a dict of ``redis.Redis`` keyword options, an existing ``redis.Redis`` (its pool
options are reused; the library opens its own connections so that it can decode
replies and block without starving the caller), or ``None`` for localhost.
"""
from __future__ import annotations

import logging
import socket
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

import redis
from redis.client import Pipeline

from .. import errors
from ..base import fork
from ..base.validate import DECODING_ERRORS  # defined there: checks use it too
from . import workers_list

log = logging.getLogger("orijs_sync.connection")   # the logger name users know (the module moved)

# A cluster is also a list of URLs or a redis.cluster.RedisCluster (see cluster.py).
ConnectionLike = Union[str, Mapping[str, Any], Sequence[Any], redis.Redis, "RedisConnection",
                       "redis.cluster.RedisCluster", None]

_REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# A cluster that cannot serve the slot now (down, failing over, a slot no primary
# covers) fails as a lost connection does: errors.ConnectionError, worth trying again.
_UNREACHABLE = _REDIS_ERRORS + (redis.exceptions.ClusterError, redis.exceptions.TryAgainError,
                                redis.exceptions.SlotNotCoveredError)
# What translate() takes: redis-py's errors, and its cluster's own (not RedisErrors).
REDIS_PY_ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)
# What redis-py adds to a pool's connection_kwargs for that pool alone: never copied.
_POOL_INTERNALS = frozenset({"himport_registry", "maint_notifications_pool_handler",
                             "maint_notifications_config", "orig_host_address",
                             "orig_socket_timeout", "orig_socket_connect_timeout",
                             "event_dispatcher"})
# Every command the library sends (its Lua scripts' included), for an ACL user limited
# to what it needs: ``ACL SETUSER app on >pw ~bull:* -@all +bzpopmin +del ...``.
ACL_COMMANDS = (
    "bzpopmin", "client|list", "client|setname", "del", "evalsha", "exec", "exists", "get",
    "hdel", "hello", "hexists", "hget", "hgetall", "hincrby", "hkeys", "hlen", "hmget",
    "hscan", "hset", "incr", "llen", "lpos", "lpush", "lrange", "lrem", "ltrim", "multi",
    "persist", "pexpire", "ping", "pttl", "rename", "rpoplpush", "rpush", "sadd", "scan",
    "scard",
    "script|exists", "script|load", "select", "set", "sismember", "smembers", "srem",
    "sscan", "xadd", "xread", "xrevrange", "xtrim", "zadd", "zcard", "zpopmin", "zrange",
    "zrangebyscore", "zrem", "zremrangebyrank", "zrevrange", "zrevrangebyscore", "zscore")
_SSL_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_ca_path",
                "ssl_ca_data", "ssl_check_hostname", "ssl_password", "ssl_min_version",
                "ssl_ciphers")

# Seconds an ordinary call may wait for Redis's answer, unless the connection options set
# ``socket_timeout``: a Redis that keeps the connection open but stops answering must not
# hang a thread for ever. Blocking calls get their block time plus a margin instead.
DEFAULT_SOCKET_TIMEOUT = 10.0
BLOCKING_MARGIN = 5.0

class _Packer:
    """Packs a command with hiredis directly when redis-py's own steps (splitting a
    command name that holds a space, copying bytearrays) have nothing to do, else with
    redis-py's hiredis packer. Both encode text strictly: a command carrying text
    decoded from bytes that are not UTF-8 (a job id) is packed again with that text
    encoded back to its bytes. Commands of valid text cost nothing more."""

    def __init__(self) -> None:
        self._hiredis: Any = redis.connection.HiredisRespSerializer()
        import hiredis  # made only when redis-py found it (HIREDIS_AVAILABLE)
        self._pack_command: Callable[[Tuple[Any, ...]], bytes] = hiredis.pack_command

    def pack(self, *args: Any) -> List[bytes]:
        try:
            first = args[0]
            if isinstance(first, str) and " " not in first:
                try:    # redis-py's own steps (splitting "CLIENT LIST", bytearray) skipped
                    return [self._pack_command(args)]
                except TypeError:   # what redis-py converts, or turns into a DataError
                    pass
            return cast(List[bytes], self._hiredis.pack(*args))
        except UnicodeEncodeError:
            raw = [arg.encode("utf-8", DECODING_ERRORS) if isinstance(arg, str) else arg
                   for arg in args]
            return cast(List[bytes], self._hiredis.pack(*raw))


def text_options(kwargs: Dict[str, Any], *, packer: bool = True) -> None:
    """The options every client of the library gets: text replies, decoded and encoded
    back losslessly (``DECODING_ERRORS``). ``packer=False`` for a cluster client,
    which does not pass ``command_packer`` on to its nodes."""
    kwargs["decode_responses"] = True
    kwargs.setdefault("encoding_errors", DECODING_ERRORS)
    if packer and redis.utils.HIREDIS_AVAILABLE:   # the pure-Python packer uses encoding_errors
        kwargs.setdefault("command_packer", _Packer())


def translate(exc: Exception, address: str) -> errors.OrijsError:
    """The library's error for a redis-py one (which the caller keeps as ``__cause__``):
    every error a public call raises derives from ``errors.OrijsError``. One Redis
    and a cluster alike: ``exc`` is one of ``REDIS_PY_ERRORS``."""
    if isinstance(exc, _UNREACHABLE):
        return errors.ConnectionError(f"Redis at {address} failed: {exc}")
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return refused(exc, address)
    return errors.RedisError(f"Redis at {address} answered: {exc}")


def send_raw(conn: Any, *commands: Sequence[Any]) -> None:
    """Send ``commands`` in one write on a raw connection; a failed send (a connection
    Redis closed) is sent again once on a new one, as nothing reached Redis."""
    # one command: packed alone (pack_commands' chunking would copy it once more)
    packed = conn.pack_command(*commands[0]) if len(commands) == 1 else \
        conn.pack_commands(commands)
    try:
        _connected(conn).send_packed_command(packed)
    except (redis.exceptions.ConnectionError, OSError):
        conn.disconnect()
        _connected(conn).send_packed_command(packed)


def side_failed(command: Sequence[Any], exc: BaseException) -> None:
    log.warning("could not write side key %s (%s): %s", command[1], command[0], exc)


def _connected(conn: Any) -> Any:
    """``conn``, connected through its own ``connect()``: a Sentinel-managed connection
    asks the sentinels for the primary there (a bare send would skip that)."""
    if getattr(conn, "_sock", None) is None:
        conn.connect()
    return conn


def _address(kwargs: Mapping[str, Any]) -> str:
    """``[user@]host:port/db`` (the user when credentials are given: ``default`` for a
    password alone), for error messages."""
    if kwargs.get("path"):
        where = f"unix://{kwargs['path']}"
    else:
        host, port = kwargs.get("host", "localhost"), kwargs.get("port", 6379)
        where = f"{host}:{port}/{kwargs.get('db', 0)}"
    if kwargs.get("username") or kwargs.get("password"):
        return f"{kwargs.get('username') or 'default'}@{where}"
    return where


def refused(exc: redis.exceptions.NoPermissionError, address: str) -> errors.PermissionDenied:
    """An ACL refusal (NOPERM), naming the address and the user."""
    return errors.PermissionDenied(f"Redis at {address} refused: {exc} (the commands the "
                                   "library needs: orijs_sync.connection.ACL_COMMANDS)")


class _TranslatingPipeline(Pipeline):
    address = "?"

    def execute(self, raise_on_error: bool = True) -> Any:
        try:
            return super().execute(raise_on_error)
        except redis.exceptions.RedisError as exc:
            raise translate(exc, self.address) from exc


class Client(redis.Redis):
    """A ``redis.Redis`` whose errors are the library's: connection failures raise
    ``errors.ConnectionError``, error replies ``errors.RedisError``."""

    address = "?"
    make_pool: Callable[[], redis.ConnectionPool]     # a new pool of the same options

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except redis.exceptions.NoScriptError:
            raise     # redis-py's Script loads the script and runs it again (scripts.py)
        except redis.exceptions.RedisError as exc:
            raise translate(exc, self.address) from exc

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        pipe = _TranslatingPipeline(self.connection_pool, self.response_callbacks,
                                    transaction, shard_hint)
        pipe.address = self.address
        return pipe


class RedisConnection:
    """Owns the connection pool shared by one component, and makes blocking clients.

    Thread-safe: ``client`` is a pooled ``redis.Redis``; each blocking role asks
    ``blocking_client`` for a client with a connection of its own. A cluster or a
    Sentinel is a subclass (``orijs_sync.store.cluster``), made by
    ``orijs_sync.store.connect.as_connection``.
    """

    is_cluster = False      # keys of one queue must share a slot; no direct connections

    def __init__(self, connection: ConnectionLike = None, *,
                 max_connections: Optional[int] = None) -> None:
        self._kwargs, self._connection_class = self._resolve(connection)
        if max_connections is not None:
            self._kwargs["max_connections"] = max_connections
        self.address = _address(self._kwargs)
        self.client = self._make_client(dict(self._kwargs))
        self._closed = False
        self._local = threading.local()
        self._direct_lock = threading.Lock()           # guards _direct and _free
        self._direct: List[redis.connection.AbstractConnection] = []
        self._free: List[redis.connection.AbstractConnection] = []   # leased ones, back
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: new pool, no direct connections; the parent's sockets are
        closed here without a shutdown (which would cut the parent's connections)."""
        self._direct_lock = threading.Lock()
        self._local = threading.local()
        direct, self._direct, self._free = self._direct, [], []
        for conn in direct:
            _drop(conn)
        renew_pool(self.client)

    @staticmethod
    def _resolve(connection: ConnectionLike) -> "tuple[Dict[str, Any], Any]":
        if isinstance(connection, RedisConnection):
            return dict(connection._kwargs), connection._connection_class
        if connection is None:
            return {"host": "127.0.0.1", "port": 6379}, redis.Connection
        if isinstance(connection, str):
            return RedisConnection._resolve_options({"url": connection})
        if isinstance(connection, redis.Redis):
            pool = connection.connection_pool
            return ({k: v for k, v in pool.connection_kwargs.items() if k not in _POOL_INTERNALS},
                    pool.connection_class)
        if isinstance(connection, Mapping):
            return RedisConnection._resolve_options(dict(connection))
        raise errors.InvalidArgumentType(f"connection must be a URL, a dict of options or a redis.Redis, "
                                   f"not {type(connection).__name__}")

    @staticmethod
    def _resolve_options(kwargs: Dict[str, Any]) -> "tuple[Dict[str, Any], Any]":
        """A dict of ``redis.Redis`` options (``url`` too): ``ssl=True`` or any ``ssl_*``
        option means TLS (``rediss://``), as ``redis.Redis(ssl=True, ...)`` does."""
        connection_class = kwargs.pop("connection_class", None)
        if "url" in kwargs:
            merged = redis.connection.parse_url(kwargs.pop("url"))  # type: ignore[no-untyped-call]
            connection_class = connection_class or merged.pop("connection_class", None)
            merged.pop("connection_class", None)
            merged.update(kwargs)
            kwargs = merged
        use_ssl = kwargs.pop("ssl", False) or any(k in kwargs for k in _SSL_OPTIONS)
        if connection_class is None:
            connection_class = redis.SSLConnection if use_ssl else redis.Connection
        return kwargs, connection_class

    def __reduce__(self) -> Any:
        """Pickled as its options (for ``multiprocessing`` spawn): the other process
        opens its own connections."""
        return (RedisConnection, (dict(self._kwargs, connection_class=self._connection_class),))

    def _make_client(self, kwargs: Dict[str, Any]) -> Client:
        text_options(kwargs)
        if kwargs.get("socket_timeout") is None:
            kwargs["socket_timeout"] = DEFAULT_SOCKET_TIMEOUT
        kwargs.setdefault("socket_connect_timeout", 5)
        kwargs.setdefault("health_check_interval", 30)
        max_connections = kwargs.pop("max_connections", None)
        connection_class = self._connection_class

        def make_pool() -> redis.ConnectionPool:
            return redis.ConnectionPool(connection_class=connection_class,
                                        max_connections=max_connections, **dict(kwargs))

        return self._client_on(make_pool)

    def _client_on(self, make_pool: Callable[[], redis.ConnectionPool]) -> Client:
        client = Client(connection_pool=make_pool())
        client.address = self.address
        client.make_pool = make_pool
        return client

    def blocking_client(self, longest_block: float,
                        client_name: Optional[str] = None) -> "BlockingClient":
        """A client for blocking commands of up to ``longest_block`` seconds: its socket
        timeout leaves them that long plus a margin (redis-py's default would cut
        a longer block short). ``client_name``: set by ``CLIENT SETNAME`` on each of its
        connections (a server refusing it leaves them unnamed)."""
        kwargs = dict(self._kwargs, max_connections=1)
        if client_name:
            kwargs["redis_connect_func"] = workers_list.naming_connect_func(
                client_name, kwargs.get("redis_connect_func"))
        timeout = kwargs.get("socket_timeout")
        if timeout is None or timeout < longest_block + BLOCKING_MARGIN:
            kwargs["socket_timeout"] = longest_block + BLOCKING_MARGIN
        return BlockingClient(self._make_client(kwargs))

    def direct_connection(self) -> redis.connection.AbstractConnection:
        """The calling thread's own connection, for hot paths that skip redis-py's
        client layer. Only for long-lived threads of a bounded set (a worker's): each
        thread keeps its connection until ``close()``."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._new_direct()
        return cast(redis.connection.AbstractConnection, conn)

    def _new_direct(self) -> redis.connection.AbstractConnection:
        """A raw connection of this pool's options, closed with this connection."""
        pool = self.client.connection_pool
        conn = pool.connection_class(**pool.connection_kwargs)
        with self._direct_lock:
            self._direct.append(conn)
        return cast(redis.connection.AbstractConnection, conn)

    def run_script(self, scripts: Any, name: str, keys: List[str], args: List[Any], *,
                   side: Optional[Sequence[Any]] = None) -> Any:
        """One script call on a raw connection leased for it, skipping redis-py's client
        and pool layers (about 45 µs a call: the hot calls of objects any thread shares,
        such as ``Queue.add``). With ``max_connections`` set, through the client, whose
        pool keeps that bound; on a cluster, through the cluster client.

        ``side``: a plain command writing a best-effort side key, sent before the script
        in the same write (no round trip of its own); its error is logged, not raised."""
        if self.is_cluster or self._kwargs.get("max_connections") is not None:
            if side is not None:
                try:
                    self.client.execute_command(*side)
                except (errors.OrijsError, redis.exceptions.RedisError) as exc:
                    side_failed(side, exc)   # a cluster client's errors are redis-py's
            return scripts.run(name, keys, args)
        conn = self._lease()
        try:
            return scripts.run_direct(conn, name, keys, args, self.address, side=side)
        finally:
            with self._direct_lock:
                if self._closed:
                    conn.disconnect()  # type: ignore[no-untyped-call]
                else:
                    self._free.append(conn)

    def _lease(self) -> redis.connection.AbstractConnection:
        """A connection of the free list (one found closed by Redis is reconnected on
        use, as redis-py's pool does), or a new one."""
        with self._direct_lock:
            conn = self._free.pop() if self._free else None
        if conn is None:
            return self._new_direct()
        if getattr(conn, "_sock", None) is not None:
            try:
                stale = conn.can_read(timeout=0)
            except (redis.exceptions.ConnectionError, OSError):
                stale = True
            if stale:      # nothing is owed on a free connection: data means it is dead
                conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    def ping(self) -> None:
        self.client.ping()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.connection_pool.disconnect()
            with self._direct_lock:
                direct, self._direct, self._free = self._direct, [], []
            for conn in direct:
                conn.disconnect()  # type: ignore[no-untyped-call]


class BlockingClient:
    """One connection for blocking commands, which another thread may interrupt.

    ``interrupt()`` shuts the socket down, so a ``BZPOPMIN``/``XREAD BLOCK`` in
    progress returns at once with a connection error; the owner, seeing its stop
    event set, exits instead of retrying.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._lock = threading.Lock()     # guards _interrupted and _conn
        self._interrupted = False
        self._conn: Optional[redis.connection.AbstractConnection] = None   # see call()
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._interrupted = False
        self._conn = None
        renew_pool(self.client)

    def bzpopmin(self, keys: List[str], timeout: float) -> Optional[List[str]]:
        """``BZPOPMIN``: ``[key, member, score]`` as Redis sent them, or None."""
        reply = self.call("BZPOPMIN", *keys, timeout)
        return list(reply) if reply else None

    def xread(self, streams: Mapping[str, str], block_ms: int,
              count: int) -> List[Tuple[str, List[Tuple[str, Any]]]]:
        """``XREAD COUNT .. BLOCK .. STREAMS``: each stream's entries, their fields as Redis
        sent them (a flat list, or a map in RESP3): most entries are looked at for their
        event alone (``entry_event``), and only those wanted are made dicts
        (``as_fields``)."""
        reply = self.call("XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS",
                          *streams.keys(), *streams.values())
        if not reply:
            return []
        return list(reply.items()) if isinstance(reply, dict) else reply

    def call(self, *command: Any) -> Any:
        """One command on this client's one connection, its reply as parsed off the wire:
        no client layer between (about 50 µs a call less than through ``client``, on the
        path of every job a worker waits for and every event a reader waits for). The
        connection is the pool's, held in use, so ``interrupt()`` cuts it; a connection
        error closes it (the next call opens another) and raises the library's error."""
        conn = self._connection()
        try:
            send_raw(conn, command)
            return conn.read_response()
        except _REDIS_ERRORS as exc:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise translate(exc, self.client.address) from exc
        except redis.exceptions.RedisError as exc:
            raise translate(exc, self.client.address) from exc

    def _connection(self) -> redis.connection.AbstractConnection:
        with self._lock:
            conn = self._conn
        if conn is not None:
            return conn
        try:
            conn = self.client.connection_pool.get_connection()
        except redis.exceptions.RedisError as exc:
            raise translate(exc, self.client.address) from exc
        with self._lock:
            self._conn = conn
        return conn

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            for sock in self._sockets():
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _sockets(self) -> List[socket.socket]:
        """The sockets of the blocking calls in progress."""
        pool = self.client.connection_pool
        return [sock for sock in (getattr(conn, "_sock", None)
                                  for conn in list(getattr(pool, "_in_use_connections", ())))
                if sock is not None]

    def take_interrupt(self) -> bool:
        """True once after ``interrupt()``: the error that followed was ours."""
        with self._lock:
            interrupted, self._interrupted = self._interrupted, False
            return interrupted

    def close(self) -> None:
        self.client.connection_pool.disconnect()


def as_fields(raw: Any) -> Dict[str, str]:
    """A stream entry's (or a hash's) fields as a dict: from a flat list (RESP2, or a
    cluster pipeline's ``HSCAN``), a map (RESP3), or none (a deleted entry)."""
    if not raw:
        return {}
    if isinstance(raw, dict):
        return raw
    return dict(zip(raw[::2], raw[1::2]))      # replies are decoded (decode_responses)


def entry_event(raw: Any) -> str:
    """A stream entry's ``event`` field, without making a dict of it (BullMQ writes that
    field first): an events thread looks at every entry, and wants few."""
    if raw and not isinstance(raw, dict) and raw[0] == "event":
        return str(raw[1])
    return as_fields(raw).get("event", "")


def _drop(conn: Any) -> None:
    """Close a connection inherited from the parent: redis-py skips the socket shutdown
    in a process other than the one that opened it, so the parent's stays up."""
    try:
        conn.disconnect()
    except Exception:  # noqa: BLE001 - only our copy of the descriptor is at stake
        pass


def renew_pool(client: Client) -> None:
    """Give ``client`` a new, empty pool of the same options (in a forked child)."""
    old = client.connection_pool
    client.connection_pool = client.make_pool()
    for conn in [*getattr(old, "_available_connections", ()),
                 *getattr(old, "_in_use_connections", ())]:
        _drop(conn)
