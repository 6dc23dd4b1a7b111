"""What ``connection=`` takes -> the ``RedisConnection`` for it (plain, or a Cluster
or Sentinel one from ``cluster``), and the base of the classes that take it.

Apart from ``connection`` so that neither ``connection`` nor ``cluster`` imports the
other back: ``cluster`` builds on ``connection``; this module uses both.
"""
from __future__ import annotations

from typing import Any, TypeVar

from .cluster import connection_class_for
from .connection import Client, ConnectionLike, RedisConnection

_Owner = TypeVar("_Owner", bound="ConnectionOwner")


class ConnectionOwner:
    """Base of the classes taking a ``connection``: they close it on ``close()`` (or at
    the end of a ``with`` block) only when they made it themselves."""

    connection: RedisConnection
    client: Client
    _owns_connection: bool

    def _use_connection(self, connection: ConnectionLike) -> None:
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.client = self.connection.client

    def close(self) -> None:
        """Close the connection this object made from a URL (one it was given is left open,
        for its owner to close); ``with`` blocks call it."""
        if self._owns_connection:
            self.connection.close()

    def __enter__(self: _Owner) -> _Owner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_connection(connection: ConnectionLike, **kwargs: Any) -> RedisConnection:
    if isinstance(connection, RedisConnection):
        return connection if not kwargs else type(connection)(connection, **kwargs)
    # a cluster or a Sentinel, else a plain one
    made: RedisConnection = (connection_class_for(connection) or RedisConnection)(
        connection, **kwargs)
    return made
