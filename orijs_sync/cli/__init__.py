"""The ``orijs-sync`` command (console script ``orijs_sync.cli:main``; also
``python -m orijs_sync.cli``).

- ``main``: the parser, the worker command (its arguments and runner, shared with
  Django's ``manage.py orijs_worker``), ``main()``;
- ``actions``: the commands that list queues and act on them (retry, remove, clean...).

May import: the public classes and anything below them; nothing imports this folder but
``contrib.django`` (the worker command).
"""
from .main import main

__all__ = ["main"]
