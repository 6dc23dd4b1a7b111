"""Checking a record of group job runs (for tests and examples).

Handlers append ``"start|job id|group id|n|who"`` before their work and
``"end|job id|group id|n|who"`` after it to one Redis list (``RPUSH`` is atomic,
so the list is one total order of events across threads, processes and
languages); ``n`` is the job's position in its group (submission order).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterable, List, Set, Tuple


def record(client: object, log_key: str, kind: str, job_id: str, group_id: str, n: object,
           who: str) -> None:
    client.rpush(log_key, f"{kind}|{job_id}|{group_id}|{n}|{who}")  # type: ignore[attr-defined]


def check_runs(entries: Iterable[str], dead: Iterable[str] = ()) -> Dict[str, List[int]]:
    """Asserts that no two runs of one group ever overlapped and that each group ran
    its jobs in order (``n`` never goes back; a retried job may run again before the
    next one). A run left open by a process in ``dead`` (killed) is cut short by the
    next start in its group. Returns each group's sequence of started ``n``."""
    dead_set: Set[str] = set(dead)
    open_run: Dict[str, Tuple[str, str]] = {}          # group -> (job id, who)
    started: Dict[str, List[int]] = defaultdict(list)
    for entry in entries:
        kind, job_id, group, n, who = entry.split("|")
        if kind == "start":
            if group in open_run:
                other = open_run[group]
                assert other[1] in dead_set, (
                    f"group {group} overlapped: {job_id} ({who}) started while {other[0]} "
                    f"({other[1]}) was running")
            open_run[group] = (job_id, who)
            seq = started[group]
            assert not seq or int(n) >= seq[-1], (
                f"group {group} ran out of order: n={n} after n={seq[-1]} ({seq})")
            seq.append(int(n))
        else:
            assert open_run.get(group, ("", ""))[0] == job_id, (
                f"end of {job_id} in group {group} that it did not hold ({open_run.get(group)})")
            del open_run[group]
    return dict(started)
