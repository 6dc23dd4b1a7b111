"""Memory of a peer's handler child processes, read from /proc (Linux only).

Each sample reads every child's ``VmRSS`` (/proc/PID/status) and ``Pss``
(/proc/PID/smaps_rollup: pages shared with other processes, such as a fork's
copy-on-write pages, shared out among them). A child's figure is its peak over the
samples; the result is the mean over the children seen. RSS counts a forked child's
shared pages in full, so for children forked from a big parent PSS is the fairer figure.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Dict, Iterable, List, Optional, Tuple


def parent_of(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    # the name (field 2) may hold spaces and brackets: the fields after it follow the last ')'
    return int(text.rsplit(")", 1)[1].split()[1])


def children_of(parents: Iterable[int]) -> List[int]:
    """The live processes whose parent is one of ``parents`` (one scan of /proc)."""
    wanted = set(parents)
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and parent_of(int(name)) in wanted:
            found.append(int(name))
    return found


def descendants_at(root: int, depth: int) -> List[int]:
    """The processes ``depth`` generations below ``root`` (1: its children)."""
    level: List[int] = [root]
    for _ in range(depth):
        if not level:
            break
        level = children_of(level)
    return level


def memory_kb(pid: int) -> Optional[Tuple[int, int]]:
    """(VmRSS, Pss) in kB, or None when the process is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError):
        return None
    return (rss, pss) if rss else None


class ChildMemory:
    """Samples ``pids()`` every ``interval`` seconds on a thread between ``start()`` and
    ``stop()``, which returns the result's fields."""

    def __init__(self, pids: Callable[[], Iterable[int]], interval: float = 0.25) -> None:
        self.pids = pids
        self.interval = interval
        self.peak: Dict[int, Tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="child-memory")

    def sample(self) -> None:
        for pid in self.pids():
            got = memory_kb(pid)
            if got:
                old = self.peak.get(pid, (0, 0))
                self.peak[pid] = (max(old[0], got[0]), max(old[1], got[1]))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a sampling failure must not cost the cell
                pass

    def start(self) -> "ChildMemory":
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> Dict:
        self.sample()           # the children are still up: the worker is not closed yet
        self._stop.set()
        self._thread.join(timeout=5)
        return memory_fields(self.peak.values())


def memory_fields(peaks: Iterable[Tuple[int, int]]) -> Dict:
    peaks = list(peaks)
    if not peaks:
        return {"children_seen": 0}
    rss = [p[0] / 1024.0 for p in peaks]
    pss = [p[1] / 1024.0 for p in peaks]
    return {"children_seen": len(peaks),
            "child_rss_mb": round(sum(rss) / len(rss), 1),
            "child_pss_mb": round(sum(pss) / len(pss), 1),
            "child_rss_each_mb": [round(x, 1) for x in rss[:8]]}


def own_grandchildren() -> List[int]:
    """This process's grandchildren: a fork server's or a worker process's children."""
    return descendants_at(os.getpid(), 2)
