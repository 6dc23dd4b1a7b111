"""Queue control and getters: pause/resume, drain, clean, obliterate, remove, get_jobs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Union, cast

from . import errors
from .base import validate as check
from .base.util import Seconds, now_ms, to_seconds

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job

LIST_STATES = {"wait", "paused", "active"}
SET_STATES = {"delayed", "prioritized", "completed", "failed", "waiting-children"}
CLEAN_STATES = ("completed", "failed", "delayed", "wait", "paused", "prioritized", "active",
                "waiting-children")


STATES = LIST_STATES | SET_STATES | {"waiting"}


def with_paused(states: Iterable[str]) -> List[str]:
    """``states``, each once, with "paused" added after them when "waiting" is named
    and "paused" is not, as BullMQ's getJobs and getJobCounts read "waiting": a paused
    queue keeps its waiting jobs in the paused list ("wait" names the wait list alone)."""
    wanted = list(dict.fromkeys(states))
    if "waiting" in wanted and "paused" not in wanted:
        wanted.append("paused")
    return wanted


def _state_key(state: str, arg: str = "state") -> str:
    state = check.one_of(state, STATES, arg, "job state")
    return "wait" if state == "waiting" else state


def _range(start: Any, end: Any) -> None:
    check.integer(start, "start")
    check.integer(end, "end")


def list_slice(start: int, end: int, asc: bool) -> "tuple[int, int]":
    """The LRANGE indexes of ranks ``start``..``end`` of a job list (pushed on the left:
    the oldest job at the right end), oldest first when ``asc`` (the slice read is then
    reversed), as BullMQ's getRanges and getJobs read them."""
    if not asc:
        return start, end
    return (0 if end == -1 else -(end + 1)), (0 if start == -1 else -(start + 1))


class QueueControlMixin:
    """Mixed into ``orijs_sync.queue.Queue`` (which provides keys, client, scripts)."""

    keys: Any
    client: Any
    scripts: Any
    name: str

    # -- pause -------------------------------------------------------------
    def _pause(self, paused: bool) -> None:
        k = self.keys
        src, dst = (k.wait, k.paused) if paused else (k.paused, k.wait)
        self.scripts.run("pause", [src, dst, k.meta, k.prioritized, k.events, k.delayed, k.marker],
                         ["paused" if paused else "resumed"])

    def pause(self) -> None:
        """Pause the queue for every worker (Node's too): nothing new becomes active."""
        self._pause(True)

    def resume(self) -> None:
        """Resume the queue after ``pause()``: workers (Node's too) take its jobs again."""
        self._pause(False)

    def is_paused(self) -> bool:
        """Whether the queue is paused (``pause()``, by either side)."""
        return bool(self.client.hexists(self.keys.meta, "paused"))

    # -- removal -----------------------------------------------------------
    def remove(self, job_id: str, states: Optional[Iterable[str]] = None, *,
               remove_children: bool = True) -> bool:
        """Remove a job and its keys, and with ``remove_children`` (BullMQ's default)
        its children down the tree, in whatever queue they are. A job locked by a
        worker is left alone (with children: also when one it still waits for is
        locked), and so is one not in ``states`` when they are given (atomically: e.g.
        cancel only if still ``("waiting", "delayed")``). Returns whether it was removed."""
        k = self.keys
        job_id = check.job_id(job_id)
        check.boolean(remove_children, "remove_children")
        wanted = check.states(states, "states", STATES) if states is not None else []
        allowed = ",".join(_state_key(s, "states") for s in wanted)
        if "wait" in allowed.split(","):
            allowed += ",paused"
        code = self.scripts.run("removeJob", [k.job(job_id), k.events],
                                [k.base, str(job_id), allowed,
                                 "1" if remove_children else "0"])
        return bool(code == 1)

    def drain(self, delayed: bool = False) -> int:
        """Remove every waiting (and prioritized, paused; with ``delayed`` also delayed) job."""
        check.boolean(delayed, "delayed")
        return int(self.scripts.run("drain", [self.keys.events],
                                    [self.keys.base, "1" if delayed else "0"]))

    def clean(self, grace: Seconds, limit: int = 0, state: str = "completed") -> List[str]:
        """Remove up to ``limit`` (0 = all) jobs of ``state`` older than ``grace`` seconds."""
        grace_s = to_seconds(grace, "grace", allow_none=False)
        check.integer(limit, "limit", minimum=0)
        state = _state_key(state)
        cutoff = now_ms() - int(grace_s * 1000)  # type: ignore[operator]
        removed = self.scripts.run("cleanJobsInSet", [self.keys.key(state), self.keys.events],
                                   [self.keys.base, state, cutoff, limit])
        return [str(r) for r in removed]

    def obliterate(self, force: bool = False, batch: int = 1000) -> None:
        """Delete the queue and all its jobs. Refused while jobs are active, unless ``force``."""
        k = self.keys
        check.boolean(force, "force")
        check.integer(batch, "batch", minimum=1)
        if not force and self.client.llen(k.active):
            raise errors.InvalidStateError(
                f"queue {self.name} has active jobs; obliterate(force=True) deletes them anyway")
        self.pause()
        while True:
            code = self.scripts.run("obliterate", [k.meta, k.active],
                                    [k.base, batch, "1" if force else "0"])
            if code == -2:
                raise errors.InvalidStateError(f"queue {self.name} has active jobs")
            if code == 0:
                break
        for pattern in (k.base + "de:*", k.base + "dn:*", k.base + "repeat:*"):
            keys = list(self.client.scan_iter(match=pattern, count=1000))
            for i in range(0, len(keys), 500):
                self.client.delete(*keys[i:i + 500])

    # -- getters -----------------------------------------------------------
    def get_jobs(self, states: Union[str, Sequence[str], None] = None, start: int = 0,
                 end: int = -1, asc: bool = False) -> List["Job"]:
        """Jobs in the given states (all when None), newest first unless ``asc``;
        ``start``/``end`` index each state's range, as BullMQ's getJobs does
        (``"waiting"`` reads the paused list too, ``"wait"`` the wait list alone)."""
        named = check.states(states, "states", STATES) if states is not None else []
        wanted = with_paused(named) or [
            "wait", "active", "delayed", "prioritized", "completed", "failed", "paused",
            "waiting-children"]
        _range(start, end)
        check.boolean(asc, "asc")
        ids: List[str] = []
        for state in wanted:
            ids.extend(self._ids_in_state(_state_key(state), start, end, asc))
        return self._jobs_by_ids(ids)

    def _ids_in_state(self, state: str, start: int, end: int, asc: bool) -> List[str]:
        key = self.keys.key(state)
        if state in LIST_STATES:
            # Lists are pushed on the left: the oldest job is at the right end.
            ids = self.client.lrange(key, *list_slice(start, end, asc))
            return list(reversed(ids)) if asc else cast("List[str]", ids)
        if asc:
            return cast("List[str]", self.client.zrange(key, start, end))
        return cast("List[str]", self.client.zrevrange(key, start, end))

    def _jobs_by_ids(self, ids: Iterable[str]) -> List["Job"]:
        from .job import Job
        ids = list(ids)
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
        return [Job.from_hash(self, job_id, fields)  # type: ignore[arg-type]
                for job_id, fields in zip(ids, pipe.execute()) if fields]

    def get_waiting(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Waiting jobs (in the paused list while the queue is paused), oldest first;
        ``start``/``end`` are ranks (``end=-1``: to the end)."""
        return self.get_jobs(["waiting"], start, end, asc=True)

    def get_active(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Active jobs (being processed), oldest first; ``start``/``end`` are ranks."""
        return self.get_jobs(["active"], start, end, asc=True)

    def get_delayed(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Delayed jobs, soonest due first; ``start``/``end`` are ranks."""
        return self.get_jobs(["delayed"], start, end, asc=True)

    def get_prioritized(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Prioritized jobs, in the order they will be taken; ``start``/``end`` are ranks."""
        return self.get_jobs(["prioritized"], start, end, asc=True)

    def get_completed(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Completed jobs (as kept by ``remove_on_complete``), newest first."""
        return self.get_jobs(["completed"], start, end, asc=False)

    def get_failed(self, start: int = 0, end: int = -1) -> List["Job"]:
        """Failed jobs (as kept by ``remove_on_fail``), newest first."""
        return self.get_jobs(["failed"], start, end, asc=False)

    def get_job_logs(self, job_id: str, start: int = 0, end: int = -1,
                     asc: bool = True) -> Dict[str, Any]:
        """``{"logs": [...], "count": n}`` as BullMQ's getJobLogs."""
        _range(start, end)
        check.boolean(asc, "asc")
        key = self.keys.logs(check.job_id(job_id))
        pipe = self.client.pipeline(transaction=False)
        if asc:
            pipe.lrange(key, start, end)
        else:
            pipe.lrange(key, -(end + 1) if end >= 0 else 0, -(start + 1))
        pipe.llen(key)
        logs, count = pipe.execute()
        return {"logs": logs if asc else list(reversed(logs)), "count": int(count)}
