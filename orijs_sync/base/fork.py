"""Fork safety: what each long-lived object does in a child process after ``fork()``.

A forked child inherits copies of every object but none of the threads, and its
sockets are the parent's sockets. Each long-lived object of the library registers
here (``track``) and implements ``_after_fork_in_child()``, which
``os.register_at_fork`` calls in the child, in its only thread, before anything
else runs there. The hook resets the object's *own* fields only (objects are
visited in no set order): fresh locks (one held by a parent thread at fork time
would stay locked forever), fresh connection pools, no threads (they restart on
first use where the object restarts them at all), and the parent's pending state
dropped unsettled (the parent settles its Futures itself; a child never does,
never renews the parent's locks, never writes the parent's outcomes).

``multiprocessing``'s ``fork`` start method and gunicorn's workers fork with
``os.fork()``, so they run these hooks too; ``spawn`` starts a fresh interpreter
and inherits nothing.
"""
from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any, Protocol

log = logging.getLogger(__name__)

__all__ = ["track", "ForkAware"]


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


_registry_lock = threading.Lock()     # guards _objects; held across fork() itself
_objects: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every child forked while ``obj`` lives."""
    with _registry_lock:
        _objects.add(obj)


def _before() -> None:
    _registry_lock.acquire()


def _after_in_parent() -> None:
    _registry_lock.release()


def _after_in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for obj in list(_objects):
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001 - one object must not break the others
            log.exception("after fork: resetting %r failed", obj)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                        after_in_child=_after_in_child)
