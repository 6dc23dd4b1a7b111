"""Waiting for outcomes: from an events-stream entry to a settled Future.

- ``futures``: settling a ``concurrent.futures.Future`` once, from whichever thread comes
  first; timeouts that name what was waited for;
- ``event_entry``: one entry of a queue's events stream, and the outcome a waiter reads
  from it;
- ``expect``: what the waiters of one ``QueueEvents`` expect, and whether this process
  holds it (so an events thread may rest);
- ``event_tailer``: one events thread's XREAD BLOCK loop.

May import: ``orijs_sync.errors``, ``orijs_sync.base``, ``orijs_sync.store``,
the job model and ``orijs_sync.engine`` (its local hand-off). ``queue_events`` only
under ``TYPE_CHECKING``.
"""
