"""``orijs_sync.connection``, the import path users and the docs know: the connection
options and clients, re-exported from the Redis layer, where they live and where a test
patches them (``orijs_sync.store.connection``, ``orijs_sync.store.connect``)."""
from __future__ import annotations

from .base.validate import DECODING_ERRORS
from .store.connect import ConnectionOwner, as_connection
from .store.connection import (
    ACL_COMMANDS,
    BLOCKING_MARGIN,
    DEFAULT_SOCKET_TIMEOUT,
    REDIS_PY_ERRORS,
    BlockingClient,
    Client,
    ConnectionLike,
    RedisConnection,
    refused,
    renew_pool,
    send_raw,
    side_failed,
    text_options,
    translate,
)

__all__ = [
    "ACL_COMMANDS", "BLOCKING_MARGIN", "DECODING_ERRORS", "DEFAULT_SOCKET_TIMEOUT", "REDIS_PY_ERRORS",
    "BlockingClient", "Client", "ConnectionLike", "ConnectionOwner", "RedisConnection", "as_connection",
    "refused", "renew_pool", "send_raw", "side_failed", "text_options", "translate",
]
