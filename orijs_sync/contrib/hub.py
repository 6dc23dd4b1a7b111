"""The queues and providers of one process, from one set of settings (what the Django
and Flask integrations share).

    hub = Hub({"connection": "redis://127.0.0.1:6379/0", "prefix": "bull"})
    hub.queue("emails").add("welcome", {"to": "a@example.com"})
    hub.events.emit("order.created", {"id": 1}).result(timeout=5)
    hub.close()            # else, once a provider was made, an atexit hook does

Settings are checked when the hub is made (an unknown key is refused, naming the
closest valid one; a bad value, naming the setting); nothing connects until first use.
Every queue and provider shares the hub's one connection pool. Fork-safe as the
library's objects are: a child forked after the hub was made (gunicorn ``--preload``)
keeps using it, with its own sockets and threads (see ``base/fork.py``); the exit hook
inherited by the child closes the child's copies.
"""
from __future__ import annotations

import atexit
import copy
import logging
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

from .. import errors
from .. import options as job_options
from ..base import fork
from ..base import validate as check
from ..base.pools import deadline_of, remaining
from ..base.util import Seconds
from ..events import BullMQEventProvider
from ..job import Job
from ..queue import Queue
from ..store.connect import as_connection
from ..workflows import BullMQWorkflowProvider

log = logging.getLogger(__name__)

__all__ = ["Hub", "SETTINGS", "EVENT_OPTIONS", "WORKFLOW_OPTIONS"]

# The settings a hub takes, and the keyword options of each provider they may set.
SETTINGS = ("connection", "prefix", "default_job_options", "events", "workflows")
EVENT_OPTIONS = ("queue_prefix", "default_timeout", "default_job_options",
                 "default_worker_options")
WORKFLOW_OPTIONS = ("queue_prefix", "default_timeout", "stall_interval", "step_timeout",
                    "concurrency", "parallel_workers", "max_flow_states",
                    "flow_state_cleanup_delay", "default_step_options", "provider_id")
T = TypeVar("T")
EXIT_TIMEOUT = 10.0      # seconds the exit hook gives the providers to stop


def _options(value: Any, valid: Tuple[str, ...], arg: str) -> Dict[str, Any]:
    options = check.mapping(value, arg)
    check.known_keys(options, valid, arg)
    return options


def _named(arg: str, make: Callable[..., T], *args: Any) -> T:
    """``make(*args)``; a refused value is reported as the setting ``arg``'s."""
    try:
        return make(*args)
    except errors.ValidationError as exc:
        raise type(exc)(f"{arg}: {exc}", arg, exc.value) from exc
    except ValueError as exc:           # redis-py's URL parser
        raise errors.InvalidArgument(f"{arg}: {exc}", arg) from exc


class Hub:
    """One process's queues (one per name) and providers (made and started on first use),
    on one connection. ``settings``: ``connection`` (anything ``Queue`` takes; default
    localhost), ``prefix`` (default ``bull``), ``default_job_options`` (every queue's),
    ``events`` (options of ``BullMQEventProvider``: ``queue_prefix``,
    ``default_timeout``, ``default_job_options``, ``default_worker_options``) and
    ``workflows`` (options of ``BullMQWorkflowProvider``). ``where`` names the
    settings in error messages. Thread-safe."""

    def __init__(self, settings: Optional[Mapping[str, Any]] = None, *,
                 where: str = "settings", names: Optional[Mapping[str, str]] = None) -> None:
        """``names``: how errors name a setting (default ``where['key']``)."""
        given = check.mapping(settings, where)
        check.known_keys(given, SETTINGS, where)
        self.where = where

        def arg(key: str) -> str:
            return (names or {}).get(key) or f"{where}[{key!r}]"
        self.prefix = check.string(given.get("prefix", "bull"), arg("prefix"))
        self.default_job_options = check.mapping(given.get("default_job_options"),
                                                 arg("default_job_options"))
        job_options.encode(self.default_job_options, arg=arg("default_job_options"))
        self._event_options = _options(given.get("events"), EVENT_OPTIONS, arg("events"))
        self._workflow_options = _options(given.get("workflows"), WORKFLOW_OPTIONS,
                                          arg("workflows"))
        raw = given.get("connection")
        self.connection = _named(arg("connection"), as_connection, raw)   # connects on first use
        self._owns_connection = self.connection is not raw
        # The providers' options are checked by making each (no thread, no socket) and
        # dropping it: the process's own are made on first use.
        try:
            _named(arg("events"), self._make_events).stop()
            _named(arg("workflows"), self._make_workflows).stop()
        except BaseException:
            if self._owns_connection:
                self.connection.close()
            raise
        self._lock = threading.Lock()     # guards the fields below
        self._queues: Dict[str, Queue] = {}
        self._events: Optional[BullMQEventProvider] = None
        self._workflows: Optional[BullMQWorkflowProvider] = None
        self._exit_hook = False
        self._closed = False
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()     # the objects reset themselves

    def __repr__(self) -> str:
        return f"<Hub {self.where} prefix={self.prefix!r}{' closed' if self._closed else ''}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ShutdownError(f"the queues and providers of {self.where} are closed")

    def _make_events(self) -> BullMQEventProvider:
        return BullMQEventProvider(self.connection, prefix=self.prefix, **self._event_options)

    def _make_workflows(self) -> BullMQWorkflowProvider:
        return BullMQWorkflowProvider(self.connection, prefix=self.prefix,
                                      **self._workflow_options)

    def dashboard_options(self) -> Dict[str, Any]:
        """The Dashboard options following these settings: prefix and the providers'
        queue prefixes."""
        return {"prefix": self.prefix,
                "events_prefix": self._event_options.get("queue_prefix", "event"),
                "workflows_prefix": self._workflow_options.get("queue_prefix", "workflow")}

    # -- what it hands out -------------------------------------------------
    def queue(self, name: str) -> Queue:
        """The process's queue ``name`` (made on first use)."""
        check.name(name, "queue name")
        with self._lock:
            self._check_open()
            queue = self._queues.get(name)
            if queue is None:
                queue = self._queues[name] = Queue(
                    name, self.connection, prefix=self.prefix,
                    default_job_options=self.default_job_options)
        return queue

    @property
    def events(self) -> BullMQEventProvider:
        """The process's event provider, made and started on first use; stopped by
        ``close`` (at exit at the latest)."""
        with self._lock:
            self._check_open()
            if self._events is None:
                self._events = self._make_events()
                self._register_exit_hook()
            provider = self._events
        return provider.start()

    @property
    def workflows(self) -> BullMQWorkflowProvider:
        """The process's workflow provider, made and started on first use (``register``
        a workflow before or after: its workers start either way); stopped as ``events``."""
        with self._lock:
            self._check_open()
            if self._workflows is None:
                self._workflows = self._make_workflows()
                self._register_exit_hook()
            provider = self._workflows
        return provider.start()

    # -- checked now, written later ----------------------------------------
    def prepare_add(self, queue_name: str, name: str, data: Any = None,
                    **opts: Any) -> Callable[[], Job]:
        """Check an add now as ``Queue.add`` does (nothing is written); returns the call
        that adds it (the data as it is now: a copy). Raises on bad input."""
        queue = self.queue(queue_name)
        queue._add_call(name, {} if data is None else data, opts)
        data = copy.deepcopy(data)
        return lambda: queue.add(name, data, **opts)

    def prepare_emit(self, event_name: str, payload: Any = None,
                     meta: Optional[Mapping[str, Any]] = None, *,
                     delay: Optional[Seconds] = None, timeout: Optional[Seconds] = None,
                     idempotency_key: Optional[str] = None,
                     causation_id: Optional[str] = None) -> Callable[[], None]:
        """Check an emit now as ``BullMQEventProvider.emit`` does (meta and causation id
        taken from the propagation context now); returns the call that emits it, no
        result expected, and raises if the add failed."""
        provider = self.events
        message, _, _ = provider._check_emit(event_name, payload, meta, delay, timeout,
                                             idempotency_key, causation_id, False)
        payload = copy.deepcopy(payload)

        def emit() -> None:
            sent = provider.emit(event_name, payload, message.meta, delay=delay,
                                 timeout=timeout, idempotency_key=idempotency_key,
                                 causation_id=message.causation_id, expects_result=False)
            failure = sent.exception() if sent.done() else None
            if failure is not None:
                raise failure
        return emit

    # -- closing -----------------------------------------------------------
    def _register_exit_hook(self) -> None:
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(self._close_at_exit)

    def _close_at_exit(self) -> None:
        try:
            self.close(timeout=EXIT_TIMEOUT)
        except Exception:  # noqa: BLE001 - at exit: report, never raise
            log.exception("closing %r at exit failed", self)

    def close(self, timeout: Optional[float] = None) -> None:
        """Stop the providers (within ``timeout`` seconds), close the queues and the
        connection. Idempotent; the hub refuses every call afterwards."""
        timeout = check.seconds(timeout, "timeout")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            providers: List[Any] = [p for p in (self._events, self._workflows) if p is not None]
            queues, self._queues = list(self._queues.values()), {}
            self._events = self._workflows = None
        if self._exit_hook:
            atexit.unregister(self._close_at_exit)
        deadline = deadline_of(timeout)
        try:
            for provider in providers:
                provider.stop(timeout=remaining(deadline))
        finally:
            for queue in queues:
                queue.close()
            if self._owns_connection:
                self.connection.close()
