"""Web framework integrations, each an optional dependency: ``django`` (settings, queues
and providers per process, adds and emits on transaction commit, the ``orijs_worker``
management command, a test runner with a throwaway Redis) and ``flask`` (the
``OrijsSync`` extension). ``hub`` is what both share: settings checked once, the
process's queues and providers made on first use, fork-safe, stopped at exit.

May import: the public classes, the OriJS layers, ``cli`` (the worker command's parser
and runner) and anything below them; nothing imports this folder.
"""
