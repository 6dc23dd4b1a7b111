"""The ``orijs-sync`` command (console script ``orijs_sync.cli:main``; also
``python -m orijs_sync`` and ``python -m orijs_sync.cli``).

- ``main``: the parser, the reading commands (counts, job, jobs), exit statuses, ``main()``;
- ``actions``: the commands that list queues and act on them (retry, remove, clean...);
- ``worker_cmd``: the worker command (its arguments and runner, shared with Django's
  ``manage.py orijs_worker``): handlers, task modules, several queues, the banner;
- ``providers_cmd``: the ``events`` and ``workflows`` commands (an OriJS provider);
- ``shutdown``: warm then cold shutdown on SIGTERM/SIGINT;
- ``logs``: ``--log-level``, ``--log-format text|json``, masked Redis URLs.

May import: the public classes and anything below them; nothing imports this folder but
``contrib.django`` (the worker command) and ``orijs_sync.__main__``.
"""
from .main import main

__all__ = ["main"]
