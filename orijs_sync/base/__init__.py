"""Plumbing every other layer uses; no Redis, no jobs.

- ``validate``: argument checks shared by every public call (errors name the argument),
  and how text that is not UTF-8 travels (``DECODING_ERRORS``);
- ``util``: time, durations, JSON that refuses what it cannot hold;
- ``fork``: fork safety, each long-lived object resets itself in a forked child;
- ``roles``: background roles (one ``loop()`` step, a stop event, back-off after errors);
- ``pools``: stopping thread pools by a deadline; ``shards``: dealing keys over threads;
- ``timer``: the one timer thread (a heap of deadlines); ``lanes``: ordered task lanes;
- ``cancellation``: a running job's cancellation (what an ``AbortSignal`` is in Node).

May import: ``orijs_sync.errors`` and each other. Nothing above (the Redis layer,
the engine, the public classes) at run time.
"""
