"""``python manage.py orijs_worker QUEUE module:function [options]``: the arguments and
options of ``orijs-sync worker`` (but ``--processes``); the connection and prefix come
from ``settings.ORIJS_SYNC`` unless ``--url`` / ``--prefix`` are given. Each job runs between two
``close_old_connections()`` calls, as a request does."""
from __future__ import annotations

import argparse
import functools
from typing import Any, Callable

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from orijs_sync.cli.main import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    USAGE_ERRORS,
    WORKER_HELP,
    add_connection_arguments,
    add_worker_arguments,
    run_worker,
)
from orijs_sync.contrib.django._settings import SETTING, get_hub
from orijs_sync.errors import ConnectionError as RedisDown


def with_fresh_connections(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler``, its job run between two ``close_old_connections()`` calls (a database
    connection past its ``CONN_MAX_AGE`` or broken is dropped, as around a request)."""
    @functools.wraps(handler)
    def run(job: Any) -> Any:
        close_old_connections()
        try:
            return handler(job)
        finally:
            close_old_connections()
    return run


class Command(BaseCommand):
    help = f"{WORKER_HELP} (connection and prefix: settings.{SETTING})"

    def add_arguments(self, parser: CommandParser) -> None:
        add_connection_arguments(parser, None, None, f"settings.{SETTING}['connection']")
        add_worker_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        hub = get_hub()
        try:
            run_worker(argparse.Namespace(**options), options["url"] or hub.connection,
                       options["prefix"] or hub.prefix, wrap=with_fresh_connections)
        except RedisDown as exc:      # not reached within --connect-timeout
            raise CommandError(str(exc), returncode=EXIT_UNREACHABLE) from exc
        except USAGE_ERRORS as exc:
            raise CommandError(str(exc), returncode=EXIT_USAGE) from exc
