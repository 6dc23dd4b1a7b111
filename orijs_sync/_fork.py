"""Fork safety: what each long-lived object does in a child process after ``fork()``.

A forked child inherits copies of every object but none of the threads, and its
sockets are the parent's sockets. Each long-lived object of the library registers
here (:func:`track`) and implements ``_after_fork_in_child()``, which
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
from typing import Any, Dict, Optional, Protocol

log = logging.getLogger(__name__)

__all__ = ["track", "fresh_lock", "ForkAware", "pid"]


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


_registry_lock = threading.Lock()     # guards _objects; held across fork() itself
_objects: "weakref.WeakSet[Any]" = weakref.WeakSet()
_pid = os.getpid()


def pid() -> int:
    """The current process id as of the last fork (cheap; no system call)."""
    return _pid


def track(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every child forked while ``obj`` lives."""
    with _registry_lock:
        _objects.add(obj)


def fresh_lock(old: Any) -> Any:
    """A new, released lock of the same kind as ``old`` (Lock, RLock, Condition, Event)."""
    if isinstance(old, threading.Condition):
        return threading.Condition()
    if isinstance(old, threading.Event):
        return threading.Event()
    if isinstance(old, type(threading.RLock())):
        return threading.RLock()
    return threading.Lock()


def reset_locks(obj: Any, *names: str) -> None:
    """Replace each named lock attribute of ``obj`` by a fresh one."""
    for name in names:
        setattr(obj, name, fresh_lock(getattr(obj, name)))


def _before() -> None:
    _registry_lock.acquire()


def _after_in_parent() -> None:
    _registry_lock.release()


def _after_in_child() -> None:
    global _registry_lock, _pid
    _registry_lock = threading.Lock()
    _pid = os.getpid()
    objects = list(_objects)
    failures: Dict[str, Optional[BaseException]] = {}
    for obj in objects:
        try:
            obj._after_fork_in_child()
        except Exception as exc:  # noqa: BLE001 - one object must not break the others
            failures[repr(obj)] = exc
    for what, exc in failures.items():
        log.error("after fork: resetting %s failed: %s", what, exc)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                        after_in_child=_after_in_child)
