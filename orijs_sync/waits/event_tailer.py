"""The events thread of one shard of a ``QueueEvents``: one XREAD BLOCK at a time over
the streams dealt to that shard, handing what it reads to its owner."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .. import errors
from ..base.roles import Role

if TYPE_CHECKING:
    from ..queue_events import QueueEvents

READ_COUNT = 1000    # entries per stream per XREAD


class Tailer(Role):
    """Reads the streams of one shard, one XREAD BLOCK at a time."""

    name = "events-tailer"

    def __init__(self, owner: "QueueEvents", shard: int) -> None:
        super().__init__(owner._stop)
        self.owner = owner
        self.shard = shard
        self.blocking = owner.connection.blocking_client(owner.block_timeout)
        self.woken = threading.Event()    # ends a rest (see QueueEvents._rest)
        # rest (when it may) before the next read: after a read, or a rest cut short
        self._rest_first = False

    def loop(self) -> None:
        self.blocking.take_interrupt()
        streams = self.owner._stream_positions(self.shard)
        if not streams:
            self.owner._wait_for_queues(self.shard)
            return
        if self._rest_first:
            woken = self.owner._rest(self)
            if woken is not None:
                self._rest_first = woken    # woken early: check again; a full rest: read
                return
        try:
            reply = self.blocking.xread(streams, int(self.owner.block_timeout * 1000),
                                        READ_COUNT)
        except errors.ConnectionError:
            if self.blocking.take_interrupt():
                return      # woken on purpose (a queue was added): read again at once
            raise
        full = False
        for stream, entries in reply:
            self.owner._deliver(stream, entries)
            full = full or len(entries) >= READ_COUNT
        self._rest_first = not full    # more to read: no rest before it is read

    def interrupt(self) -> None:
        self.woken.set()
        self.blocking.interrupt()

    def halt(self) -> None:
        """Stop (the stop event is set) and close its connection. Its thread is joined,
        unless this is it (a listener closing the QueueEvents): a thread cannot join
        itself; it ends as soon as the listener returns, delivering nothing more."""
        if not self.is_current_thread():
            self.stop()
        self.blocking.close()
