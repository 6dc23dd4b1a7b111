"""What the waiters of one ``QueueEvents`` expect, and whether this process holds it.

An events thread reads its streams for two kinds of readers: listeners (``on``,
``on_event``), which want every event as soon as it is written, and waiters (a
``wait_for_job`` future, an ``emit`` future, a workflow handle), which want one
outcome. A waiter whose job a Worker of this process holds does not need the
thread: the Worker's write settles it (see ``engine.local``), and if the Worker lets the
job go unwritten (a retry, a lost lock, a close) it says so (``LOCAL.released``).

So with no listener, no ``catch_up`` under way, and every expectation *covered*
(one of the jobs it names is held by a Worker here, on the same server), the
thread rests: it reads what was written meanwhile every ``REST`` seconds instead
of after every event, and wakes at once when that stops being true. Nothing is
skipped: the stream position only moves when entries are read and delivered.
"""
from __future__ import annotations

import threading
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

from ..engine.local import LOCAL
from ..keys import QueueKeys

REST = 0.5      # seconds between reads of a resting events thread
SLOTS = 16      # resting threads read in turn: thread n in slot n % SLOTS of each REST


def rest_left(shard: int, now: float, rest: float = REST) -> float:
    """The seconds until ``shard``'s thread's next turn to read while resting (every
    ``rest`` seconds). The threads of a QueueEvents start together; resting as long
    each, they would read together, and their reads (each over many streams) would hold
    Redis and the interpreter for several milliseconds in a row every ``rest``, delaying
    whatever this process does then (an ``emit`` waited on). In turns, one at a time."""
    phase = rest * (shard % SLOTS) / SLOTS
    left = rest - (now - phase) % rest
    return left if left > 0.001 else rest


Cover = Tuple[str, str]     # (queue marker key, job id)


class Expectations:
    """The covers of each expectation (by its owner: a future, a pending result),
    and how many expectations name each cover. Its lock is a leaf: nothing is
    called under it."""

    def __init__(self, prefix: str, server: Optional[str]) -> None:
        self.prefix = prefix
        self.server = server         # None: no Worker here can cover anything
        self._lock = threading.Lock()
        self._covers: Dict[Hashable, List[Cover]] = {}
        self._named: Dict[Cover, int] = {}
        self._markers: Dict[str, str] = {}     # queue name -> its marker key

    def add(self, owner: Hashable, jobs: Sequence[Tuple[str, str]]) -> bool:
        """``owner`` expects an outcome that any of ``jobs`` ((queue name, job id))
        being held here brings; True when one is (no wake needed)."""
        covers = [(self._marker(queue), str(job_id)) for queue, job_id in jobs]
        with self._lock:
            self._drop_locked(owner)
            self._covers[owner] = covers
            for cover in covers:
                self._named[cover] = self._named.get(cover, 0) + 1
        return self._any_held(covers)

    def drop(self, owner: Hashable) -> None:
        if owner in self._covers:      # (a hint: most owners never expected anything)
            with self._lock:
                self._drop_locked(owner)

    def _drop_locked(self, owner: Hashable) -> None:
        for cover in self._covers.pop(owner, ()):
            left = self._named[cover] - 1
            if left:
                self._named[cover] = left
            else:
                del self._named[cover]

    def clear(self) -> None:
        with self._lock:
            self._covers.clear()
            self._named.clear()

    def names(self, marker: str, job_ids: Sequence[str]) -> bool:
        """Whether an expectation names one of these jobs of ``marker``'s queue."""
        if not self._named:
            return False
        with self._lock:
            return any((marker, job_id) in self._named for job_id in job_ids)

    def covered(self) -> bool:
        """Every expectation is covered (none: True)."""
        with self._lock:
            pending = list(self._covers.values())
        return all(self._any_held(covers) for covers in pending)

    def _any_held(self, covers: Sequence[Cover]) -> bool:
        if self.server is None:
            return False
        return any(LOCAL.holds(self.server, marker, job_id) for marker, job_id in covers)

    def _marker(self, queue: str) -> str:
        marker = self._markers.get(queue)
        if marker is None:
            marker = self._markers[queue] = QueueKeys(self.prefix, queue).marker
        return marker
