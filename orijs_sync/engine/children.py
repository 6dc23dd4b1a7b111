"""Process mode: each job's handler runs in a child process, one job at a time per child,
while the parent keeps everything that talks to Redis for the job's life (fetching, lock
renewal, stalled checks, finishing, events). The only way to use more than one core for
CPU-bound handlers under the GIL; a child that crashes or overruns ``job_timeout`` costs
its job one attempt, and nothing else.

- The parent's side: ``ChildPool``, ``processes`` children; ``pool.run(job)`` is the
  worker's processor, called on a handler thread, returning the handler's return value
  or raising its exception as the thread mode would.
- The child's side: ``child_main``, started by ``multiprocessing``'s *forkserver*
  (never a fork of the threaded parent: its locks and sockets stay the parent's), the
  forkserver preloading this module, so a child starts without importing the library.
  It imports the handler once, then runs jobs until told to stop, or its parent dies.
- ``codec``: how a job crosses to the child and back (the plain queue's and the group
  queue's jobs differ); a picklable object with ``message(job)`` (parent),
  ``job(message, connection, cache)`` and ``report(job)`` (child) and
  ``apply(job, report)`` (parent).
"""
from __future__ import annotations

import atexit
import logging
import multiprocessing
import multiprocessing.connection as mp_connection
import os
import pickle
import signal
import threading
import time
import traceback
import weakref
from typing import Any, Dict, List, Optional, Protocol, Tuple

from .. import errors
from ..base import fork
from ..base.util import dumps, loads
from .routing import as_processor

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0      # a child that has not imported its handler by then is given up
STOP_TIMEOUT = 5.0        # a child told to stop is killed after this
_start_lock = threading.Lock()      # one Process.start() at a time (multiprocessing's
_pools: "weakref.WeakSet[ChildPool]" = weakref.WeakSet()   # bookkeeping is not thread-safe)


class JobCodec(Protocol):
    def message(self, job: Any) -> Any: ...
    def job(self, message: Any, connection: Any, cache: Dict[str, Any]) -> Any: ...
    def report(self, job: Any) -> Dict[str, Any]: ...
    def apply(self, job: Any, report: Dict[str, Any]) -> None: ...


class Abandoned(errors.RateLimitError):
    """The pool killed the child running the job (``close()`` ran out of time, or a second
    shutdown signal): the job goes back to wait with no attempt counted, as a job whose
    worker lost its lock is taken again."""


# -- the child's side ---------------------------------------------------------------

def child_main(conn: Any, spec: Any, codec: JobCodec, connection: Any) -> None:
    """A child's life: import the handler, say ready, run jobs until ``None`` or EOF."""
    for sig in (signal.SIGINT, signal.SIGTERM):   # the parent decides when a job stops
        signal.signal(sig, signal.SIG_IGN)
    _watch_parent()
    try:
        handler = as_processor(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        conn.send(("fatal", f"the handler cannot be loaded in the child process: "
                            f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", os.getpid()))
    cache: Dict[str, Any] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        conn.send(_run_in_child(handler, codec, connection, cache, message))


def _run_in_child(handler: Any, codec: JobCodec, connection: Any, cache: Dict[str, Any],
                  message: Any) -> Tuple[Any, ...]:
    job = None
    try:
        job = codec.job(message, connection, cache)
        result = handler(job)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: it fails the job, not the child
        return ("error", pack_error(exc), _report(codec, job))
    try:
        text = dumps(result, f"return value of job {getattr(job, 'id', '?')}")
    except TypeError as exc:
        return ("error", pack_error(errors.UnrecoverableError(str(exc))), _report(codec, job))
    return ("ok", text, _report(codec, job))


def _report(codec: JobCodec, job: Any) -> Dict[str, Any]:
    return {} if job is None else codec.report(job)


def _watch_parent() -> None:
    """Exit as soon as the parent process is gone (killed with -9 too): a thread blocks
    on the parent's sentinel, which multiprocessing closes only when the parent dies."""
    parent = multiprocessing.parent_process()
    if parent is None:     # pragma: no cover - always set for forkserver and spawn
        return

    def watch() -> None:
        mp_connection.wait([parent.sentinel])
        os._exit(70)

    threading.Thread(target=watch, name="orijs-parent-watch", daemon=True).start()


def pack_error(exc: BaseException) -> Dict[str, Any]:
    """An exception as it crosses back: itself when it pickles both ways, else its
    type's name and message; with the child's traceback text in any case."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__
        message = type(exc).__name__
    blob: Optional[bytes] = None
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)
        blob = pickled
    except Exception:  # noqa: BLE001 - unpicklable or not rebuilt: sent by name
        pass
    return {"blob": blob, "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": message, "trace": trace}


def trace_text(exc: BaseException) -> str:
    """The traceback a failed attempt stores: the child's for an exception that came
    back from a child process, else its own."""
    child: Optional[str] = getattr(exc, "child_traceback", None)
    return child or "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def unpack_error(packed: Dict[str, Any]) -> BaseException:
    exc: Optional[BaseException] = None
    blob = packed.get("blob")
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - e.g. its class exists in the child only
            exc = None
    if not isinstance(exc, BaseException):
        exc = errors.ChildError(packed["message"], packed["type"])
    exc.child_traceback = packed["trace"]  # type: ignore[attr-defined]
    return exc


# -- the parent's side --------------------------------------------------------------

class Child:
    """One handler process and the parent's end of its pipe; used by one thread at a time
    (the pool's), but for ``kill()``, which any thread may call."""

    def __init__(self, context: Any, spec: Any, codec: JobCodec, connection: Any,
                 name: str) -> None:
        parent_end, child_end = context.Pipe()
        self.process = context.Process(target=child_main, name=name, daemon=False,
                                       args=(child_end, spec, codec, connection))
        with _start_lock:
            self.process.start()
        child_end.close()
        self.conn = parent_end
        self.jobs = 0
        self.ready = False
        self.killed_by: Optional[str] = None    # "close" | "timeout"

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid  # type: ignore[no-any-return]

    def wait_ready(self) -> None:
        """Until the child has imported its handler; raises errors.ChildDied otherwise."""
        if self.ready:
            return
        reply = self.receive(time.monotonic() + START_TIMEOUT, "start")
        if reply[0] != "ready":
            self.kill("fatal")
            raise errors.ChildDied(str(reply[1]) if reply[0] == "fatal" else
                                   f"the child process sent {reply[0]!r} before starting")
        self.ready = True

    def receive(self, deadline: Optional[float], doing: str) -> Tuple[Any, ...]:
        """The child's next message; errors.ChildDied when it died, Abandoned when the pool
        killed it, ``("timeout",)`` at the deadline."""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return ("timeout",)
            ready = mp_connection.wait([self.conn, self.process.sentinel], left)
            if self.conn in ready or (ready and self.conn.poll()):
                try:
                    return tuple(self.conn.recv())
                except (EOFError, OSError):
                    pass
            if ready:
                raise self._death(doing)

    def _death(self, doing: str) -> BaseException:
        self.process.join(STOP_TIMEOUT)
        if self.killed_by == "close":
            return Abandoned("the worker was closing: the job's child process was stopped")
        return errors.ChildDied(exit_reason(self.process.exitcode, self.pid, doing))

    def kill(self, why: str) -> None:
        if self.killed_by is None:
            self.killed_by = why
        try:
            self.process.kill()
        except (OSError, ValueError, AttributeError):   # already reaped or closed
            pass

    def stop(self, timeout: float) -> None:
        """Ask it to end (it finishes nothing: it is idle), kill it if it does not."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.kill("stop")
            self.process.join(STOP_TIMEOUT)
        self.conn.close()


def exit_reason(code: Optional[int], pid: Optional[int], doing: str) -> str:
    """BullMQ's wording for a sandboxed processor that exits, then what it was doing."""
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
        head = f"Unexpected exit code: null signal: {sig}"
    else:
        head = f"Unexpected exit code: {code} signal: null"
    what = "running the job" if doing == "job" else "starting"
    return f"{head} (the child process {pid} died while {what})"


class ChildPool:
    """``size`` child processes running one handler; ``run(job)`` is thread-safe and runs
    the job in a free child (waiting for one), with ``job_timeout`` seconds at most.
    A child is replaced after it dies, is killed, or has run ``max_jobs`` jobs."""

    def __init__(self, spec: Any, codec: JobCodec, connection: Any, *, size: int,
                 job_timeout: Optional[float], max_jobs: Optional[int], label: str) -> None:
        self._spec, self._codec, self._connection = spec, codec, connection
        self.size, self.job_timeout, self.max_jobs = size, job_timeout, max_jobs
        self.label = label
        self._context = _context()
        # guards the fields below; reentrant: kill_busy() may run in a signal handler
        self._cv = threading.Condition(threading.RLock())
        self._idle: List[Child] = []
        self._busy: List[Child] = []
        self._started = 0                    # children made, for their names
        self._abandon = False                # kill_busy(): every run now gives its job back
        self._closed = False
        _pools.add(self)
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """A fork of the parent does not own its children: it forgets them untouched."""
        self._cv = threading.Condition(threading.RLock())
        self._idle, self._busy, self._closed = [], [], True
        _pools.discard(self)

    def start(self) -> None:
        """Start every child now (they import the handler meanwhile)."""
        with self._cv:
            missing = self.size - len(self._idle) - len(self._busy)
        for _ in range(missing):
            child = self._new_child()
            with self._cv:
                self._idle.append(child)
                self._cv.notify()

    def _new_child(self) -> Child:
        with self._cv:
            self._started += 1
            number = self._started
        return Child(self._context, self._spec, self._codec, self._connection,
                     f"orijs-child-{self.label}-{number}")

    @property
    def pids(self) -> List[int]:
        with self._cv:
            return [c.pid for c in self._idle + self._busy if c.pid is not None]

    def run(self, job: Any) -> Any:
        """Run ``job`` in a child: its handler's return value, or its exception raised."""
        child = self._checkout()
        try:
            reply = self._run_on(child, job)
        finally:
            self._checkin(child)
        kind, payload, report = reply
        self._codec.apply(job, report)
        if kind == "ok":
            return loads(payload)
        raise unpack_error(payload)

    def _run_on(self, child: Child, job: Any) -> Tuple[Any, ...]:
        child.wait_ready()
        child.jobs += 1
        child.conn.send(self._codec.message(job))
        deadline = None if self.job_timeout is None else time.monotonic() + self.job_timeout
        reply = child.receive(deadline, "job")
        if reply[0] == "timeout":
            child.kill("timeout")
            child.process.join(STOP_TIMEOUT)
            if child.killed_by == "close":
                raise Abandoned("the worker was closing: the job's child process was stopped")
            raise errors.JobTimedOut(
                f"job {getattr(job, 'id', '?')} timed out after {self.job_timeout:g} s; its "
                f"child process {child.pid} was killed")
        return reply

    def _checkout(self) -> Child:
        with self._cv:
            while not self._idle and not self._abandon and not self._closed:
                self._cv.wait()
            if self._abandon or self._closed:
                raise Abandoned("the worker was closing: the job did not start")
            child = self._idle.pop()
            self._busy.append(child)
            return child

    def _checkin(self, child: Child) -> None:
        """Back to the idle list; or stopped and replaced (dead, killed, used up)."""
        used_up = self.max_jobs is not None and child.jobs >= self.max_jobs
        spent = used_up or child.killed_by is not None or not child.process.is_alive()
        if spent:
            child.stop(STOP_TIMEOUT if used_up else 0)
        with self._cv:
            self._busy.remove(child)
            replace = spent and not self._closed and not self._abandon
            if not spent:
                self._idle.append(child)
                self._cv.notify()
        if replace:
            fresh = self._new_child()
            with self._cv:
                if self._closed or self._abandon:
                    fresh.kill("stop")
                    return
                self._idle.append(fresh)
                self._cv.notify()

    def kill_busy(self) -> None:
        """Kill every child running a job, and refuse jobs still waiting for one: their
        jobs go back to wait (``Abandoned``). For close() past its timeout."""
        with self._cv:
            self._abandon = True
            busy = list(self._busy)
            self._cv.notify_all()
        for child in busy:
            log.warning("%s: stopping child process %s with a job running (the job goes "
                        "back to wait)", self.label, child.pid)
            child.kill("close")

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every child (running ones are killed: call after the jobs ended)."""
        with self._cv:
            self._closed = True
            children, self._idle = self._idle + self._busy, []
            self._cv.notify_all()
        for child in children:
            child.stop(timeout)
        _pools.discard(self)


def _context() -> Any:
    """The forkserver context, its server preloading this module (and so the library)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, children of a pool never closed are stopped (multiprocessing
    would otherwise wait for them forever: they are not daemons, so that a handler may
    start processes of its own)."""
    for pool in list(_pools):
        pool.close(1.0)
