"""What the fault tests share: a seeded fault schedule run on a FaultProxy, a record of
handler runs that finds overlapping ones, a record of the errors the library raised,
and a bounded call in a thread of the test's own (for calls that may hang)."""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from fault_proxy import FaultProxy

from orijs_sync import errors

# Slack on every "returns within its timeout" bound: the machine is shared and loaded.
MARGIN = 3.0
# After the schedule, with the proxy healthy, everything acknowledged completes within it.
RECOVERY = 30.0


def through(proxy: FaultProxy, redis_url: str) -> str:
    """``redis_url`` (its user, password and db kept) with the proxy's address."""
    parts = urlsplit(redis_url)
    auth = parts.netloc.rpartition("@")[0]
    netloc = f"{auth}@127.0.0.1:{proxy.port}" if auth else f"127.0.0.1:{proxy.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


# -- the schedule ------------------------------------------------------------------------

@dataclass
class Fault:
    kind: str            # latency | hold | cut | refuse
    seconds: float       # how long it lasts (0 for a cut)
    amount: float = 0.0  # the latency, per direction
    mode: str = ""       # refuse: "closed" (listener closed) or "reset" (accept, close)
    calm: float = 0.0    # healthy time after it


def make_schedule(seed: int, each: int = 2) -> List[Fault]:
    """``each`` faults of every kind in a seeded order: latency bursts (50-250 ms each
    way for 1-2 s), holds of 1-3 s, cuts, refusals of 2-3 s (after a cut, so that the
    library must reconnect through them); 0.5-1.5 s healthy after each."""
    rng = random.Random(seed)
    kinds = [kind for kind in ("latency", "hold", "cut", "refuse") for _ in range(each)]
    rng.shuffle(kinds)
    faults = []
    modes = ["closed", "reset"]      # the refusals take turns
    for kind in kinds:
        calm = round(rng.uniform(0.5, 1.5), 2)
        if kind == "latency":
            faults.append(Fault(kind, round(rng.uniform(1.0, 2.0), 2),
                                amount=round(rng.uniform(0.05, 0.25), 3), calm=calm))
        elif kind == "hold":
            faults.append(Fault(kind, round(rng.uniform(1.0, 3.0), 2), calm=calm))
        elif kind == "cut":
            faults.append(Fault(kind, 0.0, calm=calm))
        else:
            faults.append(Fault(kind, round(rng.uniform(2.0, 3.0), 2),
                                mode=modes[len([f for f in faults if f.kind == kind]) % 2],
                                calm=calm))
    return faults


@dataclass
class ScheduleRun:
    """Runs the faults on the proxy in a thread it owns; ``join()`` waits for the end
    (the proxy is healed then, also when stopped early or when a step fails)."""

    proxy: FaultProxy
    faults: List[Fault]
    timeline: List[Tuple[float, str]] = field(default_factory=list)
    error: Optional[BaseException] = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None
    _began: float = 0.0

    @property
    def total(self) -> float:
        return sum(f.seconds + f.calm for f in self.faults)

    def start(self) -> "ScheduleRun":
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fault-schedule", daemon=True)
        self._thread.start()
        return self

    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self.join()

    def join(self, timeout: Optional[float] = None) -> None:
        if self._thread is None:
            return
        self._thread.join(self.total + 30 if timeout is None else timeout)
        assert not self._thread.is_alive(), "the fault schedule did not end"
        if self.error is not None:
            raise AssertionError(f"the fault schedule failed: {self.error!r}")

    def _note(self, what: str) -> None:
        self.timeline.append((round(time.monotonic() - self._began, 2), what))

    def _pause(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _run(self) -> None:
        proxy = self.proxy
        try:
            for fault in self.faults:
                if self._stop.is_set():
                    break
                if fault.kind == "latency":
                    self._note(f"latency {fault.amount}s for {fault.seconds}s")
                    proxy.set_latency(fault.amount)
                    self._pause(fault.seconds)
                    proxy.set_latency(0.0)
                elif fault.kind == "hold":
                    self._note(f"hold for {fault.seconds}s")
                    proxy.hold()
                    self._pause(fault.seconds)
                    proxy.release()
                elif fault.kind == "cut":
                    self._note(f"cut {proxy.open_connections} connections")
                    proxy.cut()
                else:
                    self._note(f"cut, then refuse ({fault.mode}) for {fault.seconds}s")
                    proxy.cut()
                    proxy.refuse(fault.mode)
                    self._pause(fault.seconds)
                    proxy.allow()
                self._note("healthy")
                self._pause(fault.calm)
        except BaseException as exc:  # noqa: BLE001 - join() raises it in the test
            self.error = exc
        finally:
            try:
                proxy.heal()
            except BaseException as exc:  # noqa: BLE001
                self.error = self.error or exc
            self._note("end")

    def describe(self) -> str:
        return "; ".join(f"{at}s {what}" for at, what in self.timeline)


# -- handler runs ------------------------------------------------------------------------

class Runs:
    """Handler starts and ends per job id (and per group): a job started while a run of
    it is still going, or a group's job started while another of the group runs, is an
    overlap. Sequential reruns are counted, not reported (at least once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running: Dict[str, int] = {}
        self.group_running: Dict[str, str] = {}
        self.started: Dict[str, int] = {}
        self.first_start: Dict[str, float] = {}
        self.overlaps: List[str] = []

    def start(self, key: str, group: Optional[str] = None) -> None:
        with self._lock:
            if self.running.get(key):
                self.overlaps.append(f"{key} started while a run of it was going")
            if group is not None:
                other = self.group_running.get(group)
                if other is not None:
                    self.overlaps.append(f"group {group}: {key} started while {other} ran")
                self.group_running[group] = key
            self.running[key] = self.running.get(key, 0) + 1
            self.started[key] = self.started.get(key, 0) + 1
            self.first_start.setdefault(key, time.monotonic())

    def end(self, key: str, group: Optional[str] = None) -> None:
        with self._lock:
            self.running[key] -= 1
            if group is not None and self.group_running.get(group) == key:
                del self.group_running[group]

    def reruns(self) -> int:
        with self._lock:
            return sum(n - 1 for n in self.started.values() if n > 1)


# -- errors ------------------------------------------------------------------------------

class Raised:
    """Every exception a library call raised, with what was called."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: List[Tuple[str, BaseException]] = []

    def add(self, what: str, exc: BaseException) -> None:
        with self._lock:
            self.seen.append((what, exc))

    def foreign(self) -> List[str]:
        """The ones that are no ``errors.OrijsError``."""
        return [f"{what}: {type(exc).__module__}.{type(exc).__name__}: {exc}"
                for what, exc in self.seen if not isinstance(exc, errors.OrijsError)]

    def kinds(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for _, exc in self.seen:
            out[type(exc).__name__] = out.get(type(exc).__name__, 0) + 1
        return out


# -- bounded calls -----------------------------------------------------------------------

def start_workers(stack: Any, workers: List[Any]) -> None:
    """Start each worker, closed (10 s) by ``stack`` (an ExitStack); errors they report
    are not raised, so not counted."""
    for worker in workers:
        stack.callback(worker.close, 10)
        worker.on("error", lambda exc: None)
        worker.start()


def add_while_faulting(schedule: ScheduleRun, add: Callable[[int], str], raised: Raised,
                       most: int, pause: float = 0.04) -> Tuple[Dict[str, int], int]:
    """Call ``add(n)`` (returning the job's id) every ``pause`` seconds until the schedule
    ends or ``most`` calls were made; then join the schedule. Returns the acknowledged
    adds (job id -> n, in add order) and how many were made; what raised is in ``raised``."""
    acked: Dict[str, int] = {}
    n = 0
    while not schedule.done() and n < most:
        try:
            acked[add(n)] = n
        except Exception as exc:  # noqa: BLE001 - looked at by the test
            raised.add(f"add #{n}", exc)
        n += 1
        time.sleep(pause)
    schedule.join()
    print(f"faults: {schedule.describe()}\nadds acknowledged: {len(acked)} of {n}; "
          f"raised: {raised.kinds()}")
    return acked, n


class Bounded:
    """``fn()`` in a thread of the test's own: ``wait(bound)`` says whether it returned
    within ``bound`` seconds of its start; ``finish(guard)`` joins the thread (after the
    fault that held it is gone). What it returned or raised is kept."""

    def __init__(self, what: str, fn: Callable[[], Any]) -> None:
        self.what = what
        self.outcome: Any = None
        self.raised: Optional[BaseException] = None
        self.elapsed: Optional[float] = None
        self._fn = fn
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"bounded {what}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.outcome = self._fn()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            self.raised = exc
        finally:
            self.elapsed = time.monotonic() - self._began

    def wait(self, bound: float) -> bool:
        self._thread.join(max(self._began + bound - time.monotonic(), 0.0))
        return not self._thread.is_alive()

    def finish(self, guard: float = 30.0) -> bool:
        self._thread.join(guard)
        return not self._thread.is_alive()
