"""Loads the Lua scripts under ``orijs_sync/lua/`` and runs them with EVALSHA.

Each ``lua/<name>.lua`` is one atomic operation. A line ``--- @include "helper"``
pulls in ``lua/includes/helper.lua`` (recursively, each helper once), so shared
functions are written once. ``redis.Script`` falls back to loading the script
on ``NOSCRIPT`` (after a Redis restart or ``SCRIPT FLUSH``).
"""
from __future__ import annotations

import functools
import re
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import redis

from ..base import fork
from .connection import send_raw as _send
from .connection import side_failed, translate

_INCLUDE = re.compile(r'^---\s*@include\s+"([\w/-]+)"\s*$', re.MULTILINE)
# Package data beside this package (a directory of scripts, not a module): the same path in
# a checkout, an editable install and an installed wheel.
_LUA = Path(__file__).resolve().parents[1] / "lua"


@functools.lru_cache(maxsize=None)
def source(name: str) -> str:
    """The script's full text with every include expanded once."""
    seen: Set[str] = set()

    def expand(text: str) -> str:
        def replace(match: "re.Match[str]") -> str:
            include = match.group(1)
            if include in seen:
                return ""
            seen.add(include)
            return expand((_LUA / "includes" / f"{include}.lua").read_text())
        return _INCLUDE.sub(replace, text)

    return expand((_LUA / f"{name}.lua").read_text())


class Scripts:
    """The scripts registered on one client, created on first use."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._scripts: Dict[str, Any] = {}
        self._lock = threading.Lock()
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()     # the scripts themselves (sha, text) stay valid

    def get(self, name: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            with self._lock:
                script = self._scripts.get(name)
                if script is None:
                    script = self._client.register_script(source(name))
                    self._scripts[name] = script
        return script

    def run(self, name: str, keys: Sequence[Any], args: Sequence[Any],
            client: Optional[Any] = None) -> Any:
        if client is not None and hasattr(client, "run_script"):   # a cluster pipeline: EVAL
            return client.run_script(source(name), keys, args)
        try:
            return self.get(name)(keys=list(keys), args=list(args),
                                  client=client or self._client)
        except redis.exceptions.RedisError as exc:   # e.g. NOSCRIPT once more after loading
            raise translate(exc, getattr(client or self._client, "address", "?")) from exc

    def run_many(self, calls: Sequence[Tuple[str, Sequence[Any], Sequence[Any]]]) -> List[Any]:
        """Many ``(name, keys, args)`` calls in one pipelined round trip: each call's
        reply, or its error reply as the library's error (redis-py's as ``__cause__``).
        On one Redis each goes as EVALSHA alone (no SCRIPT EXISTS first); the calls of a
        script Redis lost (NOSCRIPT: a restart, SCRIPT FLUSH) are sent again once it is
        loaded. On a cluster, EVAL (its pipeline refuses EVALSHA). A failure of the
        whole pipeline (a connection error...) is raised: which calls ran is unknown."""
        replies = self._send_many(calls)
        lost = [i for i, reply in enumerate(replies)
                if isinstance(reply, redis.exceptions.NoScriptError)]
        if lost:
            for name in {calls[i][0] for i in lost}:
                self._client.script_load(source(name))
            for i, reply in zip(lost, self._send_many([calls[i] for i in lost])):
                replies[i] = reply
        address = getattr(self._client, "address", "?")
        return [_translated(reply, address) for reply in replies]

    def _send_many(self, calls: Sequence[Tuple[str, Sequence[Any], Sequence[Any]]]) -> List[Any]:
        pipe = self._client.pipeline(transaction=False)
        for name, keys, args in calls:
            if hasattr(pipe, "run_script"):            # a cluster pipeline: EVAL
                pipe.run_script(source(name), keys, args)
            else:
                pipe.evalsha(self.get(name).sha, len(keys), *keys, *args)
        return list(pipe.execute(raise_on_error=False))

    def run_direct(self, conn: Any, name: str, keys: Sequence[Any], args: Sequence[Any],
                   address: str, side: Optional[Sequence[Any]] = None) -> Any:
        """EVALSHA on one raw connection (see ``RedisConnection.direct_connection``),
        loading the script on NOSCRIPT. A failed send (a stale connection) is retried
        once on a new connection, as the command never reached Redis; a failed read is
        not (its outcome is unknown). Failures raise ``errors.ConnectionError``.
        ``side``: see ``RedisConnection.run_script``."""
        script = self.get(name)
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            _send(conn, *([command] if side is None else [side, command]))
            if side is not None:
                try:
                    conn.read_response()
                except redis.exceptions.ResponseError as exc:
                    side_failed(side, translate(exc, address))
            try:
                return conn.read_response()
            except redis.exceptions.NoScriptError:
                _send(conn, ("SCRIPT", "LOAD", script.script))
                conn.read_response()
                _send(conn, command)
                return conn.read_response()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            conn.disconnect()
            raise translate(exc, address) from exc
        except redis.exceptions.RedisError as exc:   # an error reply: the connection is fine
            raise translate(exc, address) from exc


def _translated(reply: Any, address: str) -> Any:
    """A pipelined reply, its redis-py error as the library's (the original as cause)."""
    if isinstance(reply, redis.exceptions.RedisError):
        error = translate(reply, address)
        error.__cause__ = reply
        return error
    return reply
