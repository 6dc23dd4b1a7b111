"""``settings.ORIJS_SYNC`` -> the process's ``orijs_sync.contrib.hub.Hub``, made on
first use, remade after the setting changes (``override_settings`` in tests) or after
``close``."""
from __future__ import annotations

import threading
from typing import Any, Optional

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from ... import errors
from ...base import fork
from ...base import validate as check
from ...events import BullMQEventProvider
from ...queue import Queue
from ...workflows import BullMQWorkflowProvider
from ..hub import Hub

SETTING = "ORIJS_SYNC"


def _build() -> Hub:
    """A hub from the setting as it is now (absent: every default); a bad setting is
    ``ImproperlyConfigured``, naming the key."""
    try:
        return Hub(getattr(settings, SETTING, None), where=SETTING)
    except (errors.ValidationError, ValueError) as exc:
        raise ImproperlyConfigured(str(exc)) from exc


class _Current:
    """The process's hub; its lock is made anew in a forked child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hub: Optional[Hub] = None
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        self.lock = threading.Lock()

    def get(self) -> Hub:
        with self.lock:
            if self.hub is None or self.hub.closed:
                self.hub = _build()
            return self.hub

    def take(self) -> Optional[Hub]:
        with self.lock:
            hub, self.hub = self.hub, None
        return hub


_current = _Current()


def check_settings() -> None:
    """Check ``settings.ORIJS_SYNC`` now (the app does at startup); makes nothing."""
    _build().close()


def get_hub() -> Hub:
    """The process's hub (fork-safe: a forked child keeps using it with its own sockets)."""
    return _current.get()


def get_queue(name: str) -> Queue:
    """The process's queue ``name``, on the settings' connection and prefix."""
    return get_hub().queue(name)


def get_events() -> BullMQEventProvider:
    """The process's event provider (started on first use, stopped at exit)."""
    return get_hub().events


def get_workflows() -> BullMQWorkflowProvider:
    """The process's workflow provider (started on first use, stopped at exit)."""
    return get_hub().workflows


def close(timeout: Optional[float] = None) -> None:
    """Close the process's hub (providers stopped within ``timeout`` seconds); the next
    call makes a new one from the settings."""
    timeout = check.seconds(timeout, "timeout")
    hub = _current.take()
    if hub is not None:
        hub.close(timeout=timeout)


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING:
        close()


setting_changed.connect(_on_setting_changed, dispatch_uid="orijs_sync.contrib.django")
