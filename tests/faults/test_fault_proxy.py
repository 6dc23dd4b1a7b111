"""The fault proxy itself, with plain sockets and redis-py: each fault does what it says,
switched at run time, and stop() leaves no thread and no socket."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import redis
from fault_helpers import Bounded, make_schedule, through
from fault_proxy import FaultProxy


def client_of(proxy: FaultProxy, redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(through(proxy, redis_url), socket_timeout=10,
                                socket_connect_timeout=2, retry_on_timeout=False)


def raw_ping(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(64)


def test_traffic_flows_and_latency_delays_it(proxy, redis_url):
    client = client_of(proxy, redis_url)
    try:
        client.set("fault-proxy-big", b"x" * 300_000)      # larger than one chunk
        assert client.strlen("fault-proxy-big") == 300_000
        client.delete("fault-proxy-big")
        proxy.set_latency(0.2)
        began = time.monotonic()
        assert client.ping()
        assert time.monotonic() - began >= 0.4              # 0.2 s each way
        proxy.set_latency(0.0)
    finally:
        client.close()


def test_hold_keeps_connections_open_and_forwards_nothing_until_released(proxy, redis_url):
    client = client_of(proxy, redis_url)
    try:
        assert client.ping()
        proxy.hold()
        pinging = Bounded("ping", client.ping)
        connecting = Bounded("new connection", lambda: raw_ping(proxy.port))
        assert not pinging.wait(0.5) and not connecting.wait(0.5)   # held, not failed
        assert proxy.open_connections == 2
        proxy.release()
        assert pinging.finish(5) and connecting.finish(5)
        assert pinging.outcome is True and connecting.outcome == b"+PONG\r\n"
    finally:
        proxy.release()
        client.close()


def test_cut_closes_every_connection(proxy, redis_url):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(64) == b"+PONG\r\n"
        assert proxy.cut() == 1
        assert proxy.open_connections == 0 and proxy.cut_count == 1
        assert sock.recv(64) == b""                         # closed under the client
    assert raw_ping(proxy.port) == b"+PONG\r\n"              # new connections work


@pytest.mark.parametrize("mode", ["closed", "reset"])
def test_refusals_until_allowed_on_the_same_port(proxy, redis_url, mode):
    port = proxy.port
    proxy.refuse(mode)
    if mode == "closed":
        with pytest.raises(ConnectionRefusedError):
            raw_ping(port)
    else:
        with pytest.raises((ConnectionResetError, AssertionError)):
            reply = raw_ping(port)
            assert reply != b"", "accepted and closed: no reply"
        assert proxy.refused >= 1
    proxy.allow()
    assert proxy.port == port and raw_ping(port) == b"+PONG\r\n"


def test_stop_joins_its_thread_and_closes_its_sockets(redis_url):
    before = set(threading.enumerate())
    with FaultProxy.before(redis_url) as proxy:
        assert raw_ping(proxy.port) == b"+PONG\r\n"
        listening = proxy.port
    assert set(threading.enumerate()) <= before
    with pytest.raises(ConnectionRefusedError):
        raw_ping(listening)
    proxy.stop()                                             # idempotent


def test_the_schedule_is_fixed_by_its_seed_and_bounded():
    first, again = make_schedule(7), make_schedule(7)
    assert first == again and first != make_schedule(8)
    assert sorted(f.kind for f in first) == ["cut", "cut", "hold", "hold", "latency",
                                             "latency", "refuse", "refuse"]
    assert all(1 <= f.seconds <= 3 for f in first if f.kind == "hold")
    assert all(2 <= f.seconds <= 3 for f in first if f.kind == "refuse")
    assert {f.mode for f in first if f.kind == "refuse"} == {"closed", "reset"}
    assert sum(f.seconds + f.calm for f in first) < 30
