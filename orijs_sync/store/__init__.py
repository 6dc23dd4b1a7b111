"""The Redis layer: what the user passes as ``connection=`` becomes the clients each
component needs, and the Lua scripts run on them.

- ``connection``: URL / dict / ``redis.Redis`` -> ``RedisConnection`` (pools, blocking
  clients, timeouts, errors that name the address); re-exported as ``orijs_sync.connection``;
- ``cluster``: Redis Cluster and Sentinel on redis-py's own clients, hash-tag checks;
- ``connect``: ``as_connection`` (whatever ``connection=`` takes -> the right kind of
  ``RedisConnection``) and ``ConnectionOwner``, above both so neither imports the other;
- ``scripts``: loading ``orijs_sync/lua/`` (package data) and running it with EVALSHA;
- ``workers_list``: worker connections named as BullMQ names them, and listing them.

May import: ``orijs_sync.errors``, ``orijs_sync.base``, and each other. Nothing
about jobs or queues.
"""
