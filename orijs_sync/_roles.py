"""Background roles: each is a small class with one ``loop()`` step run by its own
thread until the shared stop event is set. Waits are ``stop_event.wait(n)`` so
stopping is immediate; a role's errors are logged and retried with backoff,
never allowed to kill its thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

log = logging.getLogger(__name__)


class Role:
    """One background role. Subclasses implement ``loop()``: one step of work."""

    name = "role"

    def __init__(self, stop_event: threading.Event) -> None:
        self.stop_event = stop_event
        self._thread: Optional[threading.Thread] = None

    def loop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _run(self) -> None:
        failures = 0
        while not self.stop_event.is_set():
            try:
                self.loop()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - a role must survive any error
                if self.stop_event.is_set():
                    break
                failures += 1
                delay = min(0.1 * 2 ** (failures - 1), 5.0)
                log.warning("%s: %s (retrying in %.1fs)", self.name, exc, delay,
                            exc_info=failures == 1)
                self.on_error(exc)
                self.stop_event.wait(delay)

    def on_error(self, exc: BaseException) -> None:
        """Hook for owners that publish errors (e.g. a worker's ``error`` listeners)."""

    def start(self, thread_name: str) -> None:
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def interrupt(self) -> None:
        """Cut a blocking call short; the stop event is already set."""

    def is_current_thread(self) -> bool:
        return self._thread is threading.current_thread()

    def join(self, timeout: Optional[float] = None) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


class Periodic(Role):
    """Runs ``action`` now and then every ``interval`` seconds."""

    def __init__(self, stop_event: threading.Event, name: str, interval: float,
                 action: Callable[[], None]) -> None:
        super().__init__(stop_event)
        self.name = name
        self.interval = interval
        self.action = action

    def loop(self) -> None:
        self.action()
        self.stop_event.wait(self.interval)
