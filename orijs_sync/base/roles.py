"""Background roles: each is a small class with one ``loop()`` step run by its own
thread until the shared stop event is set. Waits are ``stop_event.wait(n)`` so
stopping is immediate; a role's errors are logged and retried with backoff,
never allowed to kill its thread. After a connection error, a role with a ``probe``
checks Redis during its pause and resumes as soon as Redis answers.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any, Callable, List, Optional

from .. import errors

log = logging.getLogger(__name__)

PROBE_INTERVAL = 0.1     # seconds between probes of Redis while a role pauses after an error


def backoff_delay(failures: int, cap: float) -> float:
    """The pause after ``failures`` failures in a row: 0.1 s, doubling, at most ``cap``."""
    return min(0.1 * 2.0 ** (min(failures, 32) - 1), cap)


def start_when_redis_answers(start: Callable[[], object], stop: threading.Event,
                             timeout: Optional[float], max_delay: float, what: str,
                             address: str) -> bool:
    """``start()`` until it succeeds (True) or ``stop`` is set (False). After an
    ``errors.ConnectionError`` it is tried again, at once, then after a logged pause
    growing to ``max_delay``; past ``timeout`` seconds (None: never)
    ``errors.TimeoutError`` is raised. An ``errors.InvalidStateError`` once ``stop``
    is set (closed while starting) is a False."""
    deadline = None if timeout is None else time.monotonic() + timeout
    failures = 0
    while not stop.is_set():
        try:
            start()
            return True
        except errors.InvalidStateError:
            if stop.is_set():
                return False
            raise
        except errors.ConnectionError as exc:
            failures += 1
            delay = backoff_delay(failures, max_delay)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.TimeoutError(
                        f"{what}: Redis at {address} did not answer within {timeout:g}s "
                        f"({exc})") from exc
                delay = min(delay, left)
            log.warning("%s: waiting for Redis at %s (%s); next try in %.1fs",
                        what, address, exc, delay)
            stop.wait(delay)
    return False


class Role:
    """One background role. Subclasses implement ``loop()``: one step of work."""

    name = "role"
    threads = 1              # threads running loop() (more for a role whose steps may overlap)

    def __init__(self, stop_event: threading.Event) -> None:
        self.stop_event = stop_event
        self._threads: List[threading.Thread] = []
        self.max_delay = 5.0     # cap of the pause after errors, in seconds
        self.probe: Optional[Callable[[], Any]] = None   # raises while Redis is down

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
                delay = backoff_delay(failures, self.max_delay)
                log.warning("%s: %s (retrying within %.1fs)", self.name, exc, delay,
                            exc_info=failures == 1)
                self.on_error(exc)
                self._pause(delay, exc)

    def _pause(self, delay: float, exc: BaseException) -> None:
        """Wait ``delay`` seconds; after a connection error, probe Redis meanwhile and
        end the pause as soon as it answers (work resumes at once after an outage)."""
        if self.probe is None or not isinstance(exc, errors.ConnectionError):
            self.stop_event.wait(delay)
            return
        deadline = time.monotonic() + delay
        while not self.stop_event.wait(min(PROBE_INTERVAL, max(deadline - time.monotonic(), 0))):
            if time.monotonic() >= deadline:
                return
            try:
                self.probe()
                return
            except Exception:  # noqa: BLE001 - still down: keep waiting
                continue

    def on_error(self, exc: BaseException) -> None:
        """Hook for owners that publish errors (e.g. a worker's ``error`` listeners)."""

    def start(self, thread_name: str) -> None:
        """Start its threads: ``thread_name``, then ``thread_name-2``... for more."""
        self._threads = [threading.Thread(target=self._run, daemon=True,
                                          name=thread_name + (f"-{i + 1}" if i else ""))
                         for i in range(self.threads)]
        for thread in self._threads:
            thread.start()

    def interrupt(self) -> None:
        """Cut a blocking call short; the stop event is already set."""

    def is_current_thread(self) -> bool:
        return threading.current_thread() in self._threads

    def join(self, timeout: Optional[float] = None) -> bool:
        """Join its threads but the calling one (stopping from one of its own steps: a
        listener it called), which ends on its own once the step returns."""
        deadline = None if timeout is None else time.monotonic() + timeout
        others = [t for t in self._threads if t is not threading.current_thread()]
        for thread in others:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        return not any(thread.is_alive() for thread in others)

    def stop(self, deadline: Optional[float] = None) -> bool:
        """Join the threads (the stop event already set), interrupting a blocking call
        until they end; False if one still runs at the monotonic ``deadline`` (the daemon
        thread is then left to end on its own). The calling thread is not waited for."""
        own = self.is_current_thread()        # not in a blocking call: nothing to cut
        while True:
            if not own:
                self.interrupt()
            if self.join(0.2):
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False


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


def run_until_signalled(start: Callable[[], object], close: Callable[[], object],
                        stop: threading.Event,
                        cut_off: Optional[Callable[[], object]] = None) -> None:
    """A component's blocking ``run()``: ``start()``, then wait until SIGINT/SIGTERM
    (caught only on the main thread) or ``stop`` is set, then ``close()``. A second
    signal while closing calls ``cut_off()`` (once): stop what can be stopped now."""
    previous = {}
    signals = {"count": 0}

    def on_signal(*_: object) -> None:
        signals["count"] += 1
        stop.set()
        if signals["count"] == 2 and cut_off is not None:
            cut_off()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        start()
        while not stop.wait(1.0):
            pass
    finally:
        close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
