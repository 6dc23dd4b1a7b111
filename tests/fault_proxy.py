"""A loopback TCP proxy between the library and the test's Redis that injects network
faults, each switchable at run time from the test:

- ``set_latency(seconds)``: every chunk read from then on is forwarded that much later
  (in each direction, so a round trip takes twice that more; order kept);
- ``hold()`` / ``release()``: a dropped network: connections stay open (new ones are
  accepted and connected too), but no byte is forwarded, either way, until released;
- ``cut()``: every connection is closed (both its sockets), at once;
- ``refuse(mode)`` / ``allow()``: new connections are refused: ``"closed"`` closes the
  listening socket (a connect gets ECONNREFUSED), ``"reset"`` accepts and closes each
  one at once; ``allow()`` listens again on the same port.

One thread runs a ``selectors`` loop over the listener and every socket; the test's calls
are handed to it (through a socket pair that wakes it) and return once it ran them, so
``cut()`` returns with every socket closed. The proxy binds 127.0.0.1 on a free port and
connects only to the upstream address it was given. ``stop()`` (or leaving the ``with``
block) ends the loop, joins its thread and closes every socket.
"""
from __future__ import annotations

import collections
import selectors
import socket
import threading
import time
from typing import Callable, Deque, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

CHUNK = 65536
MAX_BUFFERED = 1 << 20      # per direction: past it, the source is not read (back-pressure)
CALL_TIMEOUT = 10.0         # a control call the loop has not run by then is an error
CONNECT_TIMEOUT = 2.0       # upstream is a local Redis


class _Pipe:
    """One direction of a connection: bytes read from ``src``, due for ``dst`` at a time."""

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src, self.dst = src, dst
        self.chunks: Deque[Tuple[float, bytes]] = collections.deque()
        self.buffered = 0
        self.eof = False         # src said it will send no more
        self.shut = False        # dst was told so (after the buffer drained)

    def push(self, due: float, data: bytes) -> None:
        self.chunks.append((due, data))
        self.buffered += len(data)

    def due(self, now: float) -> bool:
        return bool(self.chunks) and self.chunks[0][0] <= now


class _Conn:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.pipes = (_Pipe(client, upstream), _Pipe(upstream, client))

    def sockets(self) -> Tuple[socket.socket, socket.socket]:
        return self.client, self.upstream


class FaultProxy:
    """``with FaultProxy(redis_port) as proxy:`` then point the library at ``proxy.url``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1", db: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.db = db
        self.port = 0
        self.latency = 0.0
        self.held = False
        self.refusing: Optional[str] = None
        self.accepted = 0            # connections accepted and connected upstream
        self.refused = 0             # accepted and closed at once ("reset" mode)
        self.cut_count = 0           # connections closed by cut()
        self._listener: Optional[socket.socket] = None
        self._conns: List[_Conn] = []
        self._owner: Dict[socket.socket, _Conn] = {}
        self._sel: Optional[selectors.BaseSelector] = None
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._calls: Deque[Tuple[Callable[[], None], threading.Event]] = collections.deque()
        self._calls_lock = threading.Lock()
        self._stopping = False
        self._thread: Optional[threading.Thread] = None
        self.loop_error: Optional[BaseException] = None

    @classmethod
    def before(cls, redis_url: str) -> "FaultProxy":
        """A proxy (not started) in front of the Redis at ``redis_url``."""
        parts = urlsplit(redis_url)
        return cls(parts.port or 6379, parts.hostname or "127.0.0.1")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{self.db}"

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> "FaultProxy":
        assert self._thread is None, "start() once"
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._listen()
        self._thread = threading.Thread(target=self._loop, name=f"fault-proxy-{self.port}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End the loop, join its thread, close every socket. Idempotent."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._stopping = True
            self._wake()
            thread.join(timeout)
            if thread.is_alive():
                raise RuntimeError(f"the fault proxy's thread did not end within {timeout}s")
        for conn in list(self._conns):
            self._close_conn(conn)
        if self._listener is not None:
            self._close_listener()
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._wake_r = self._wake_w = None
        if self._sel is not None:
            self._sel.close()
            self._sel = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults, from the test's thread ------------------------------------------------
    def set_latency(self, seconds: float) -> None:
        assert seconds >= 0
        self._call(lambda: setattr(self, "latency", float(seconds)))

    def hold(self) -> None:
        self._call(lambda: setattr(self, "held", True))

    def release(self) -> None:
        self._call(lambda: setattr(self, "held", False))

    def cut(self) -> int:
        """Close every connection now; returns how many there were."""
        before = len(self._conns)
        self._call(self._cut_all)
        return before

    def refuse(self, mode: str = "closed") -> None:
        if mode not in ("closed", "reset"):
            raise ValueError(f"refuse mode must be 'closed' or 'reset', not {mode!r}")
        self._call(lambda: self._refuse(mode))

    def allow(self) -> None:
        self._call(self._allow)

    def heal(self) -> None:
        """No fault at all: latency 0, released, accepting."""
        def run() -> None:
            self.latency = 0.0
            self.held = False
            self._allow()
        self._call(run)

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def _call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the loop's thread (no lock is needed for its state) and wait."""
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError(f"the fault proxy is not running (loop error: {self.loop_error!r})")
        done = threading.Event()
        with self._calls_lock:
            self._calls.append((fn, done))
        self._wake()
        if not done.wait(CALL_TIMEOUT):
            raise RuntimeError(f"the fault proxy's loop did not run a call within {CALL_TIMEOUT}s")

    def _wake(self) -> None:
        try:
            if self._wake_w is not None:
                self._wake_w.send(b"x")
        except OSError:        # the pair's buffer is full: the loop is awake anyway
            pass

    # -- the loop's own state changes --------------------------------------------------
    def _listen(self) -> None:
        assert self._sel is not None
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))      # 0 the first time: a free port
        listener.listen(128)
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ)

    def _close_listener(self) -> None:
        assert self._listener is not None
        if self._sel is not None:
            self._sel.unregister(self._listener)
        self._listener.close()
        self._listener = None

    def _refuse(self, mode: str) -> None:
        self.refusing = mode
        if mode == "closed" and self._listener is not None:
            self._close_listener()
        elif mode == "reset" and self._listener is None:
            self._listen()

    def _allow(self) -> None:
        self.refusing = None
        if self._listener is None:
            self._listen()

    def _cut_all(self) -> None:
        for conn in list(self._conns):
            self._close_conn(conn)
            self.cut_count += 1

    def _close_conn(self, conn: _Conn) -> None:
        if conn not in self._conns:
            return
        self._conns.remove(conn)
        for sock in conn.sockets():
            self._owner.pop(sock, None)
            if self._sel is not None:
                try:
                    self._sel.unregister(sock)
                except (KeyError, ValueError):
                    pass
            sock.close()

    # -- the loop ----------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stopping:
                self._run_calls()
                self._update_interest()
                assert self._sel is not None
                for key, events in self._sel.select(self._select_timeout()):
                    sock = key.fileobj
                    if sock is self._wake_r:
                        self._drain_wake()
                    elif sock is self._listener:
                        self._accept()
                    elif isinstance(sock, socket.socket):
                        conn = self._owner.get(sock)    # None: closed earlier in this round
                        if conn is not None and events & selectors.EVENT_READ:
                            self._read(conn, sock)
                self._flush_all()
            self._run_calls()      # a call made while stopping does not wait for nothing
        except BaseException as exc:  # noqa: BLE001 - kept for the test to see
            self.loop_error = exc
            raise

    def _run_calls(self) -> None:
        while True:
            with self._calls_lock:
                if not self._calls:
                    return
                fn, done = self._calls.popleft()
            try:
                fn()
            finally:
                done.set()

    def _drain_wake(self) -> None:
        assert self._wake_r is not None
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _select_timeout(self) -> float:
        if self.held:
            return 0.05
        now = time.monotonic()
        soonest = 0.05
        for conn in self._conns:
            for pipe in conn.pipes:
                if pipe.chunks:
                    soonest = min(soonest, max(pipe.chunks[0][0] - now, 0.0))
        return soonest

    def _update_interest(self) -> None:
        """Read a socket unless held, at EOF or its pipe's buffer is full; write when its
        incoming pipe has due bytes the last send could not take."""
        assert self._sel is not None
        for conn in self._conns:
            out_of = {pipe.src: pipe for pipe in conn.pipes}
            into = {pipe.dst: pipe for pipe in conn.pipes}
            for sock in conn.sockets():
                reading, writing = out_of[sock], into[sock]
                mask = 0
                if not self.held and not reading.eof and reading.buffered < MAX_BUFFERED:
                    mask |= selectors.EVENT_READ
                if not self.held and writing.chunks and writing.due(time.monotonic()):
                    mask |= selectors.EVENT_WRITE
                self._set_mask(sock, mask)

    def _set_mask(self, sock: socket.socket, mask: int) -> None:
        assert self._sel is not None
        try:
            current = self._sel.get_key(sock).events
        except KeyError:
            current = 0
        if mask == current:
            return
        if current == 0:
            self._sel.register(sock, mask)
        elif mask == 0:
            self._sel.unregister(sock)
        else:
            self._sel.modify(sock, mask)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            if self.refusing == "reset":
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=CONNECT_TIMEOUT)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, upstream)
            self._conns.append(conn)
            self._owner[client] = self._owner[upstream] = conn
            self.accepted += 1

    def _read(self, conn: _Conn, sock: socket.socket) -> None:
        pipe = conn.pipes[0] if sock is conn.client else conn.pipes[1]
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_conn(conn)
            return
        if data:
            pipe.push(time.monotonic() + self.latency, data)
        else:
            pipe.eof = True

    def _flush_all(self) -> None:
        if self.held:
            return
        now = time.monotonic()
        for conn in list(self._conns):
            for pipe in conn.pipes:
                if not self._flush(conn, pipe, now):
                    break      # the connection was closed
            else:
                if all(p.shut for p in conn.pipes):
                    self._close_conn(conn)

    def _flush(self, conn: _Conn, pipe: _Pipe, now: float) -> bool:
        """Send ``pipe``'s due bytes; False if the connection was closed meanwhile."""
        while pipe.due(now):
            due, data = pipe.chunks[0]
            try:
                sent = pipe.dst.send(data)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                self._close_conn(conn)
                return False
            pipe.buffered -= sent
            if sent < len(data):
                pipe.chunks[0] = (due, data[sent:])
                return True
            pipe.chunks.popleft()
        if pipe.eof and not pipe.chunks and not pipe.shut:
            pipe.shut = True
            try:
                pipe.dst.shutdown(socket.SHUT_WR)
            except OSError:
                self._close_conn(conn)
                return False
        return True
