"""A loopback TCP proxy in front of a Redis that can turn into a network black hole.

``hold()``: every connection stays open but nothing is forwarded either way (what a
client sent waits in the proxy's socket buffers; a client writing gets no error, and
no reply ever comes). ``release()``: forwarding resumes, the held bytes first, so a
command sent during the hold reaches Redis late. ``close()`` stops and joins every
thread it started (a context manager calls it).
"""
from __future__ import annotations

import select
import socket
import threading
from typing import List, Optional
from urllib.parse import urlparse

POLL = 0.02   # seconds between looks at the hold flag and the stop flag


class BlackHole:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(POLL)
        self.port = int(self._listener.getsockname()[1])
        self._open = threading.Event()       # set: forwarding; clear: holding
        self._open.set()
        self._stop = threading.Event()
        self._lock = threading.Lock()        # guards _threads and _sockets
        self._threads: List[threading.Thread] = []
        self._sockets: List[socket.socket] = []
        self._start(self._accept, "blackhole-accept")

    @classmethod
    def before(cls, redis_url: str) -> "BlackHole":
        """A proxy in front of the Redis at ``redis_url``."""
        target = urlparse(redis_url)
        return cls(target.port or 6379, target.hostname or "127.0.0.1")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def _start(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            server = socket.create_connection(self.target, timeout=5)
            with self._lock:
                self._sockets += [client, server]
            self._start(self._pump, "blackhole-up", client, server)
            self._start(self._pump, "blackhole-down", server, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._stop.is_set():
            if not self._open.wait(POLL):
                continue                      # holding: leave the bytes where they are
            try:
                readable, _, _ = select.select([source], [], [], POLL)
                if not readable or not self._open.is_set():   # held meanwhile: not read
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
            except (OSError, ValueError):     # closed meanwhile (its fd is -1)
                break
        for sock in (source, sink):
            _shut(sock)

    def close(self, timeout: Optional[float] = 5.0) -> None:
        self._open.set()
        self._stop.set()
        self._listener.close()
        with self._lock:
            threads, sockets = list(self._threads), list(self._sockets)
        for sock in sockets:
            _shut(sock)
        for thread in threads:
            thread.join(timeout)

    def __enter__(self) -> "BlackHole":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
