"""Warm and cold shutdown of the long-running commands (``worker``, ``events``,
``workflows``).

The first SIGTERM/SIGINT is a warm shutdown: no new job, the running ones finish, for up
to ``--shutdown-timeout`` seconds. A second signal, or that timeout passing, is a cold
shutdown: the command's ``cut_off`` runs (for a thread-mode worker: its running jobs go
back to wait, by their lock tokens), then the process exits at once, without waiting for
handler threads that cannot be stopped.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Callable, Dict, Optional

log = logging.getLogger("orijs_sync.cli")

POLL = 0.2       # seconds between looks at the signals (the main thread runs the handlers)


class Signals:
    """SIGINT/SIGTERM counted: the first sets ``warm``, the second ``cold``. Installed
    on the main thread only (elsewhere Python cannot catch signals)."""

    def __init__(self) -> None:
        self.warm = threading.Event()
        self.cold = threading.Event()
        self._previous: Dict[int, object] = {}

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.warm.is_set():
            self.cold.set()
        self.warm.set()

    def __enter__(self) -> "Signals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def exit_now(code: int) -> None:
    """Flush what was logged and printed, and end the process without joining threads
    (handler threads still running a job that was given back)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def wait_for_signal(signals: Signals) -> None:
    while not signals.warm.wait(POLL):
        pass


def stop_warm_then_cold(signals: Signals, stop: Callable[[Optional[float]], bool],
                        timeout: Optional[float], cut_off: Callable[[], None],
                        what: str) -> bool:
    """After the first signal: ``stop(timeout)`` on a thread of its own (True when
    everything finished in time). A second signal, or ``stop`` returning False, runs
    ``cut_off()``; returns True for a warm stop, False for a cold one (the caller then
    exits with ``exit_now``)."""
    log.info("%s: warm shutdown: no new jobs, the running ones finish (%s); a second "
             "signal stops them now", what,
             "no time limit" if timeout is None else f"up to {timeout:g} s")
    result: Dict[str, bool] = {}
    closer = threading.Thread(target=lambda: result.setdefault("done", stop(timeout)),
                              name="orijs-cli-shutdown", daemon=True)
    closer.start()
    while closer.is_alive() and not signals.cold.is_set():
        closer.join(POLL)
    if result.get("done"):
        return True
    if signals.cold.is_set():
        why = "a second signal"
    else:
        why = "jobs still running" if timeout is None else f"{timeout:g} s passed"
    log.warning("%s: cold shutdown (%s): stopping the running jobs now", what, why)
    cut_off()
    return False
