"""The ``events`` and ``workflows`` commands: run an OriJS provider's workers (its
subscriptions, or its registered workflows' steps) until SIGINT/SIGTERM.

``module:attribute`` names a configured ``BullMQEventProvider`` /
``BullMQWorkflowProvider`` (its subscriptions and registrations made at import), or a
function returning one, called with no argument. The provider brings its own
connection and prefix: ``--url`` and ``--prefix`` are refused here.
"""
from __future__ import annotations

import argparse
import logging
from typing import Any, List, Type

from .. import __version__, errors
from ..base import roles
from ..events import BullMQEventProvider
from ..worker import Worker
from ..workflows import BullMQWorkflowProvider
from .logs import mask_url, setup_logging
from .shutdown import Signals, exit_now, stop_warm_then_cold, wait_for_signal
from .worker_cmd import (
    RedisUnreachable,
    add_paths,
    add_run_arguments,
    check_run_arguments,
    import_module_of,
)

log = logging.getLogger("orijs_sync.cli")

PROVIDER_DESCRIPTION = """\
Run a {kind}'s workers until SIGINT/SIGTERM.

module:attribute names a configured {kind} (what it runs subscribed or
registered when the module is imported) or a function returning one,
called with no argument. The provider has its own connection and prefix
(--url and --prefix are refused here).

  orijs-sync {command} myapp.{command}:provider --shutdown-timeout 30

The first signal stops the provider (running handlers finish, up to
--shutdown-timeout); a second one moves the jobs still running back to wait
and exits."""
KINDS = {"events": BullMQEventProvider, "workflows": BullMQWorkflowProvider}


def load_provider(spec: str, kind: Type[Any]) -> Any:
    """The provider ``module:attribute`` names (called first if it is a function)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise errors.InvalidArgument(f"provider {spec!r}: must be module:attribute (a "
                                     f"{kind.__name__}, or a function returning one)",
                                     "provider", spec)
    target: Any = import_module_of(module_name, spec)
    for part in attr.split("."):
        if not hasattr(target, part):
            raise errors.InvalidArgument(f"provider {spec!r}: module {module_name} has no "
                                         f"{attr}", "provider", spec)
        target = getattr(target, part)
    if not isinstance(target, kind) and callable(target) and not isinstance(target, type):
        target = target()
    if not isinstance(target, kind):
        raise errors.InvalidArgument(f"provider {spec!r}: is a {type(target).__name__}, "
                                     f"not a {kind.__name__} (or a function returning one)",
                                     "provider", spec)
    return target


def _workers(provider: Any) -> List[Worker]:
    """The provider's Workers, in its worker group (those of another worker class, not
    in a group, are not found: their jobs are left to a stalled check)."""
    shared = (provider.queue_manager._group if isinstance(provider, BullMQEventProvider)
              else provider._group)
    return list(shared.workers())


def _cold_stop(provider: Any) -> None:
    """The running jobs of the provider's Workers back to wait (``Worker._cold_stop``)."""
    for worker in _workers(provider):
        worker._cold_stop(worker.lock_duration_ms / 1000.0)


def _where(provider: Any) -> "tuple[Any, str]":
    """The provider's connection and prefix (for the banner and Redis waits)."""
    if isinstance(provider, BullMQEventProvider):
        return provider.queue_manager.connection, provider.queue_manager.prefix
    return provider._connection, provider.prefix


def run_provider(args: argparse.Namespace, _queue: Any = None) -> int:
    """``events`` / ``workflows``: start the provider (waiting for Redis up to
    ``--connect-timeout``), block until a signal, ``stop(--shutdown-timeout)``. A
    second signal moves the jobs its workers still run back to wait and exits."""
    setup_logging(args.log_level, args.log_format)
    check_run_arguments(args)
    if args.url is not None or args.prefix is not None:
        raise errors.InvalidArgument(f"{args.command}: --url and --prefix are the "
                                     f"provider's own (set them where it is made)",
                                     "url" if args.url is not None else "prefix",
                                     args.url or args.prefix)
    add_paths(args.path)
    provider = load_provider(args.provider, KINDS[args.command])
    connection, prefix = _where(provider)
    log.info("orijs-sync %s: %s provider %s", __version__, args.command, args.provider)
    log.info("redis %s, prefix %s; shutdown timeout %s", mask_url(connection), prefix,
             "none" if args.shutdown_timeout is None else f"{args.shutdown_timeout:g} s")
    with Signals() as signals:
        try:
            started = roles.start_when_redis_answers(
                provider.start, signals.warm, args.connect_timeout, args.max_reconnect_delay,
                f"{args.command} provider", connection.address)
        except errors.TimeoutError as exc:
            raise RedisUnreachable(str(exc)) from exc
        if started:
            log.info("%s provider started: SIGTERM or SIGINT stops it", args.command)
            wait_for_signal(signals)

        def stop(timeout: Any) -> bool:
            """True when nothing ran on at the timeout (else given back now)."""
            workers = _workers(provider)
            provider.stop(timeout)
            return not any([w._give_back_running() for w in workers])
        warm = stop_warm_then_cold(signals, stop, args.shutdown_timeout,
                                   lambda: _cold_stop(provider), f"{args.command} provider")
    if not warm:
        exit_now(0)
    return 0


def add_provider_commands(sub: Any) -> None:
    for name, kind in KINDS.items():
        p = sub.add_parser(name, help=f"run a {kind.__name__}'s workers until "
                                      f"SIGINT/SIGTERM", description=PROVIDER_DESCRIPTION
                           .format(kind=kind.__name__, command=name),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("provider", metavar="module:attribute",
                       help=f"a {kind.__name__}, or a function returning one")
        add_run_arguments(p)
        p.set_defaults(run=run_provider, queue=None, provider_command=True)
