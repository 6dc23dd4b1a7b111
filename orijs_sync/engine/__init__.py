"""How a process runs jobs: the threads behind ``orijs_sync.Worker`` and
``orijs_sync.WorkerGroup`` (which hold each queue's own state and use this).

- ``engine``: one set of threads serving one or many queues;
- ``engine_roles``: its fetcher, finisher, marker watcher and per-queue periodic roles;
- ``handler_pool``: the handler threads; ``children``: process mode, each handler run in
  a child process (``processes=``), the threads then waiting on the children;
- ``processing``: a handler's result -> an ``Outcome``, written many at a time;
- ``locks``: lock renewal paced by the lock; ``routing``: ``{job_name: fn}`` processors;
- ``local``: short cuts between the Queues, Workers and QueueEvents of one process
  (a local hand-off of added jobs, finished outcomes to local waiters).

May import: ``orijs_sync.errors``, ``orijs_sync.base``, ``orijs_sync.store`` and
the job model (``job``, ``job_scheduler``, ``options``, ``keys``). The classes that use it
(``worker``, ``queue_events``...) only under ``TYPE_CHECKING``.
"""
