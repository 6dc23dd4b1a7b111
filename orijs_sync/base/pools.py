"""Stopping thread pools within a deadline: ``stop(timeout)`` of the providers returns at
the deadline and says what is still running (Python cannot stop a running thread)."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List, Mapping, Optional


def deadline_of(timeout: Optional[float]) -> Optional[float]:
    """The monotonic deadline of a ``timeout`` in seconds (None: no deadline)."""
    return None if timeout is None else time.monotonic() + max(float(timeout), 0.0)


def remaining(deadline: Optional[float]) -> Optional[float]:
    """Seconds left before ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def join_threads(threads: List[threading.Thread], deadline: Optional[float]) -> List[str]:
    """Join the threads until the deadline; the names of those still alive."""
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(remaining(deadline))
    return [t.name for t in threads if t.is_alive() and t is not threading.current_thread()]


def shutdown_pools(pools: Mapping[str, ThreadPoolExecutor],
                   deadline: Optional[float]) -> List[str]:
    """Shut the pools down (queued work cancelled) and wait for their running work until
    the deadline. Returns the labels of the pools still running something."""
    for pool in pools.values():
        pool.shutdown(wait=False, cancel_futures=True)
    busy = []
    for label, pool in pools.items():
        # The executor keeps its threads in a private set: the only way to wait with a
        # deadline (shutdown(wait=True) has none).
        if join_threads(list(getattr(pool, "_threads", ())), deadline):
            busy.append(label)
    return busy
