"""GroupQueue: a per-group FIFO queue over GroupMQ 1.1's Redis layout
(``groupmq:{name}:...``), so Node services using GroupMQ share it both ways."""
from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime
from typing import Any, Dict, List, Optional, Sequence, Union

from .. import errors
from ..base.util import Seconds, loads, now_ms
from ..store.cluster import check_queue
from ..store.connect import ConnectionOwner
from ..store.connection import ConnectionLike
from ..store.scripts import Scripts
from . import _batch, _housekeeping, _listing, _manual, _repeat
from . import _options as opt
from .job import GroupJob

log = logging.getLogger(__name__)


class GroupQueue(ConnectionOwner):
    """Jobs in groups: strict order inside a group (by ``order_ms``, then submission),
    parallel across groups. Thread-safe; share one instance across threads.

    Durations are seconds; Redis holds GroupMQ's milliseconds. ``ordering`` is
    ``"none"``, ``"scheduler"`` (jobs wait ``ordering_window`` after their
    ``order_ms`` in Redis before they can run, so late arrivals sort in) or
    ``"in-memory"`` (GroupMQ's grace collection: a worker holding a group's job
    waits ``ordering_window`` from pickup, restarting the wait, shortened by
    ``ordering_grace_period_decay``, whenever more jobs reach the group, at most
    ``ordering_max_wait_multiplier`` windows; then runs the group's earliest job and
    up to ``ordering_max_batch_size`` more of it in order without another wait).

    ``auto_batch`` (GroupMQ's ``autoBatch``): ``True`` or ``{"size": 10, "max_wait":
    0.01}`` writes adds made at about the same time (by several threads) in one script
    call, up to ``size`` jobs, each add waiting at most ``max_wait`` seconds for others
    to join it; every ``add`` still returns only once its job is in Redis."""

    def __init__(self, name: str, connection: ConnectionLike = None, *,
                 job_timeout: Seconds = 30, max_attempts: int = 3, keep_completed: int = 0,
                 keep_failed: int = 0, ordering: str = "none",
                 ordering_window: Optional[Seconds] = None,
                 ordering_max_wait_multiplier: float = 3,
                 ordering_grace_period_decay: float = 1.0,
                 ordering_max_batch_size: int = 10,
                 auto_batch: Union[bool, Dict[str, Any], None] = False) -> None:
        if not isinstance(name, str) or not name or name.strip() != name:
            raise opt.GroupOptionError(f"queue name must be a non-empty string, not {name!r}")
        self.name = name
        self.ns = f"groupmq:{name}"
        self.job_timeout_ms = opt.seconds_ms(job_timeout, "job_timeout", positive=True) or 1
        self.max_attempts = opt.positive_int(max_attempts, "max_attempts")
        self.keep_completed = opt.count(keep_completed, "keep_completed")
        self.keep_failed = opt.count(keep_failed, "keep_failed")
        self.ordering = ordering
        self.ordering_window_ms = opt.ordering(ordering, ordering_window)
        self.ordering_max_wait_multiplier, self.ordering_grace_period_decay, \
            self.ordering_max_batch_size = opt.in_memory(ordering_max_wait_multiplier,
                                                         ordering_grace_period_decay,
                                                         ordering_max_batch_size)
        batching = _batch.settings(auto_batch)
        check_queue(connection, "groupmq", name)    # on a cluster: one hash tag, one slot
        self._use_connection(connection)
        self.scripts = Scripts(self.client)
        self._batcher = None if batching is None else _batch.AddBatcher(self, *batching)

    def settings(self) -> Dict[str, Any]:
        """The keyword options making an equal GroupQueue (on another connection: a
        child process's, in a GroupWorker's process mode)."""
        window = self.ordering_window_ms / 1000.0 if self.ordering != "none" else None
        return {"job_timeout": self.job_timeout_ms / 1000.0, "max_attempts": self.max_attempts,
                "keep_completed": self.keep_completed, "keep_failed": self.keep_failed,
                "ordering": self.ordering, "ordering_window": window,
                "ordering_max_wait_multiplier": self.ordering_max_wait_multiplier,
                "ordering_grace_period_decay": self.ordering_grace_period_decay,
                "ordering_max_batch_size": self.ordering_max_batch_size}

    # -- running scripts ---------------------------------------------------------------

    def run_script(self, name: str, *args: Any, client: Any = None) -> Any:
        """Run one of the group queue's Lua scripts (``lua/groups/{name}.lua``) with
        ``args`` (internal, shared with the workers)."""
        return self.scripts.run(f"groups/{name}", [self.ns], args, client=client)

    def run_hot(self, name: str, *args: Any) -> Any:
        """``run_script`` on the calling thread's own raw connection (for a worker's
        long-lived threads: no pool checkout, no client layer on the hot path). On a
        cluster, through the cluster client, which routes it to the queue's node."""
        if self.connection.is_cluster:
            return self.run_script(name, *args)
        return self.scripts.run_direct(self.connection.direct_connection(), f"groups/{name}",
                                       [self.ns], args, self.connection.address)

    def key(self, *parts: str) -> str:
        """A key of the queue (``groupmq:{name}:{parts}``)."""
        return ":".join((self.ns,) + parts)

    @property
    def staging_ms(self) -> int:
        """How long an added job is staged after its ``order_ms`` (ms; ordering
        "scheduler" only, else 0)."""
        return self.ordering_window_ms if self.ordering == "scheduler" else 0

    # -- adding ------------------------------------------------------------------------

    def add(self, *, group_id: Optional[str] = None, data: Any = None,
            order_ms: Optional[float] = None, max_attempts: Optional[int] = None,
            job_id: Optional[str] = None, delay: Optional[Seconds] = None,
            run_at: Union[datetime, float, None] = None,
            repeat: Optional[Dict[str, Any]] = None) -> GroupJob:
        """Add a job to ``group_id``; everything is validated before anything is written.
        ``delay`` (seconds) or ``run_at`` (a timezone-aware ``datetime`` or epoch
        seconds; a naive ``datetime`` is refused) holds it, and its group behind it.
        With ``repeat`` (``{"every": seconds}`` or ``{"pattern": cron}``) the job runs
        once per period from the workers' scheduler; the series' placeholder is returned."""
        gid = opt.group_id(group_id)
        data_text = opt.data_json(data)
        order = opt.order_ms(order_ms)
        attempts = self.max_attempts if max_attempts is None \
            else opt.positive_int(max_attempts, "max_attempts")
        jid = opt.job_id(job_id)
        if repeat is not None:
            if delay is not None or run_at is not None or jid is not None:
                raise opt.GroupOptionError("repeat cannot be combined with delay, run_at or "
                                           "job_id")
            return _repeat.add(self, gid, data, data_text, order, attempts, opt.repeat(repeat))
        until = opt.delay_until(delay, run_at)
        job = (gid, data_text, attempts, order, until, jid or str(uuid.uuid4()), now_ms())
        if self._batcher is not None:
            reply = self._batcher.add(job)
        else:
            reply = self.run_script("enqueue", *job[:6], self.keep_completed, job[6],
                                    self.staging_ms)
        return GroupJob(id=reply[0], group_id=reply[1], data=loads(reply[2]),
                        attempts_made=int(reply[3] or 0), max_attempts=int(reply[4] or 1),
                        timestamp=int(reply[5] or 0), order_ms=int(reply[6] or 0),
                        status=reply[8] or "unknown", queue=self)

    # -- reading -----------------------------------------------------------------------

    def get_job(self, job_id: str) -> Optional[GroupJob]:
        """The job (its state as GroupMQ reports it), or ``None`` when there is none."""
        jid = opt.job_id(job_id) or ""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.key("job", jid))
        pipe.zscore(self.key("processing"), jid)
        pipe.zscore(self.key("delayed"), jid)
        raw, processing, delayed = pipe.execute()
        if not raw:
            return None
        status = raw.get("status", "unknown")
        if processing is not None:
            status = "active"
        elif delayed is not None:
            status = "delayed"
        elif raw.get("groupId") and self.client.zscore(self.key("g", raw["groupId"]), jid) \
                is not None:
            status = "waiting"
        return GroupJob.from_hash(jid, raw, status, self)

    def get_job_counts(self) -> Dict[str, int]:
        """``active``, ``waiting`` (jobs in groups, GroupMQ's count), ``delayed``,
        ``completed``, ``failed``, ``staged``, ``groups`` (groups holding jobs)."""
        groups = self.get_unique_groups()
        pipe = self.client.pipeline(transaction=False)
        for name in ("processing", "delayed", "completed", "failed", "stage"):
            pipe.zcard(self.key(name))
        for gid in groups:
            pipe.zcard(self.key("g", gid))
        active, delayed, completed, failed, staged, *waiting = pipe.execute()
        return {"active": active, "waiting": sum(waiting), "delayed": delayed,
                "completed": completed, "failed": failed, "staged": staged,
                "groups": len(groups)}

    JOB_STATES = ("active", "waiting", "delayed", "completed", "failed")

    def get_jobs(self, status: str, limit: int = 100) -> List[GroupJob]:
        """Up to ``limit`` jobs in one state: ``active`` (by deadline), ``waiting``
        (group by group, each in its order), ``delayed`` (by run time), ``completed``
        or ``failed`` (newest first)."""
        if status not in self.JOB_STATES:
            raise opt.GroupOptionError(f"status must be one of {self.JOB_STATES}, not "
                                       f"{status!r}")
        limit = opt.positive_int(limit, "limit")
        if status == "waiting":
            ids: List[str] = []
            for gid in self.get_unique_groups():
                ids += [str(i) for i in self.client.zrange(self.key("g", gid), 0,
                                                           limit - len(ids) - 1)]
                if len(ids) >= limit:
                    break
        else:
            name = {"active": "processing"}.get(status, status)
            newest_first = status in ("completed", "failed")
            ids = [str(i) for i in self.client.zrange(self.key(name), 0, limit - 1,
                                                      desc=newest_first)]
        pipe = self.client.pipeline(transaction=False)
        for jid in ids:
            pipe.hgetall(self.key("job", jid))
        return [GroupJob.from_hash(jid, raw, status, self)
                for jid, raw in zip(ids, pipe.execute()) if raw]

    def get_jobs_by_status(self, statuses: Sequence[str], start: int = 0,
                           end: int = -1) -> List[GroupJob]:
        """GroupMQ's ``getJobsByStatus``: the jobs at positions ``start`` to ``end``
        (inclusive, 0-based; -1: to the end) of one list of the ``statuses`` asked for
        (``active``, ``delayed``, ``completed``, ``failed``, ``waiting``). The list is
        GroupMQ's, in that order whatever the order asked: active by deadline, delayed
        soonest due first, completed and failed newest first, then waiting group by
        group, each in its order; a job appears once (a delayed job held in its group
        as delayed). Unlike GroupMQ's, which reads at most 500 ids per state and 100
        groups (so later pages come back empty there), every page is served."""
        return _listing.jobs_by_status(self, statuses, start, end)

    def get_active_count(self) -> int:
        """How many jobs are active (reserved by a worker or by hand)."""
        return int(self.client.zcard(self.key("processing")))

    def get_waiting_count(self) -> int:
        """How many jobs wait in their groups (GroupMQ's waiting count)."""
        return self.get_job_counts()["waiting"]

    def get_delayed_count(self) -> int:
        """How many jobs are delayed."""
        return int(self.client.zcard(self.key("delayed")))

    def get_completed_count(self) -> int:
        """How many completed jobs are kept (``keep_completed``)."""
        return int(self.client.zcard(self.key("completed")))

    def get_failed_count(self) -> int:
        """How many failed jobs are kept (``keep_failed``)."""
        return int(self.client.zcard(self.key("failed")))

    def get_active_jobs(self) -> List[str]:
        """The ids of the active jobs (GroupMQ's ``getActiveJobs``: ids, not jobs)."""
        return [str(i) for i in self.client.zrange(self.key("processing"), 0, -1)]

    def get_waiting_jobs(self) -> List[str]:
        """The ids of the jobs in groups, group by group, each in its order; as
        GroupMQ lists (and ``get_waiting_count`` counts) them, a delayed job held in
        its group is included."""
        ids: List[str] = []
        for gid in self.get_unique_groups():
            ids += [str(i) for i in self.client.zrange(self.key("g", gid), 0, -1)]
        return ids

    def get_delayed_jobs(self) -> List[str]:
        """The ids of the delayed jobs, soonest due first."""
        return [str(i) for i in self.client.zrange(self.key("delayed"), 0, -1)]

    def get_completed_jobs(self, limit: Optional[int] = None) -> List[GroupJob]:
        """The newest completed jobs (``limit`` defaults to ``keep_completed``)."""
        return self._finished("completed", self.keep_completed if limit is None else limit)

    def get_failed_jobs(self, limit: Optional[int] = None) -> List[GroupJob]:
        """The newest failed jobs (``limit`` defaults to ``keep_failed``)."""
        return self._finished("failed", self.keep_failed if limit is None else limit)

    def _finished(self, status: str, limit: int) -> List[GroupJob]:
        n = opt.count(limit, "limit")
        return self.get_jobs(status, n) if n else []

    def get_unique_groups_count(self) -> int:
        """How many groups hold waiting (or delayed) jobs."""
        return len(self.get_unique_groups())

    def get_unique_groups(self) -> List[str]:
        """The groups that hold waiting (or delayed) jobs."""
        groups: List[str] = sorted(self.client.smembers(self.key("groups")))  # type: ignore
        pipe = self.client.pipeline(transaction=False)
        for gid in groups:
            pipe.zcard(self.key("g", gid))
        return [gid for gid, n in zip(groups, pipe.execute()) if n]

    def get_group_job_count(self, group_id: str) -> int:
        """How many jobs wait in the group (its active job not included)."""
        return int(self.client.zcard(self.key("g", opt.group_id(group_id))))

    def is_empty(self) -> bool:
        """Whether no job is active, delayed, staged or waiting (GroupMQ's ``isEmpty``)."""
        pipe = self.client.pipeline(transaction=False)
        for name in ("processing", "delayed", "ready", "stage"):
            pipe.zcard(self.key(name))
        if any(pipe.execute()):
            return False
        return not self.get_unique_groups()

    def wait_for_empty(self, timeout: Optional[Seconds] = 60) -> bool:
        """Wait (polling every 0.2 s, as GroupMQ does) until no job is waiting, delayed,
        staged or active; ``False`` when ``timeout`` seconds passed first."""
        limit = opt.seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        while not self.is_empty():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    # -- changing jobs -----------------------------------------------------------------

    def remove(self, job_id: str) -> bool:
        """Remove a job whatever its state; ``False`` when there was none."""
        return bool(self.run_script("remove", opt.job_id(job_id) or ""))

    def retry(self, job_id: str) -> None:
        """Put a failed job back at its place in its group, attempts reset."""
        self._check(self.run_script("retry_failed", opt.job_id(job_id) or ""), job_id,
                    "is not failed")

    def change_delay(self, job_id: str, seconds: Seconds) -> None:
        """Run a waiting or delayed job ``seconds`` from now (0: now)."""
        delay_ms = opt.seconds_ms(seconds, "seconds") or 0
        now = now_ms()
        self._check(self.run_script("change_delay", opt.job_id(job_id) or "",
                                    now + delay_ms if delay_ms else 0, now),
                    job_id, "is not waiting or delayed")

    def promote(self, job_id: str) -> None:
        """Let a delayed job run now."""
        self.change_delay(job_id, 0)

    def update_data(self, job_id: str, data: Any) -> None:
        """Replace a job's data (any JSON value); ``JobNotFound`` when it is gone."""
        text = opt.data_json(data)
        self._check(self.run_script("update_data", opt.job_id(job_id) or "", text), job_id, "")

    CLEANABLE = ("completed", "failed", "delayed")

    def clean(self, status: str, grace: Seconds = 0, limit: int = 1000) -> int:
        """Remove up to ``limit`` (at most 100,000) ``completed`` or ``failed`` jobs
        finished at least ``grace`` seconds ago, or ``delayed`` jobs due at least that
        long ago (GroupMQ 1.1's ``clean``); returns how many were removed."""
        if status not in self.CLEANABLE:
            raise opt.GroupOptionError(f"status must be one of {self.CLEANABLE}, not "
                                       f"{status!r}")
        grace_ms = opt.seconds_ms(grace, "grace")
        if grace_ms is None or grace_ms < 0:
            raise opt.GroupOptionError(f"grace must be >= 0 seconds, not {grace!r}")
        limit = min(opt.positive_int(limit, "limit"), 100_000)
        return int(self.run_script("clean", status, now_ms() - grace_ms, limit))

    @staticmethod
    def _check(code: Any, job_id: str, negative: str) -> None:
        if code == 0:
            raise errors.JobNotFound(f"group job {job_id!r} does not exist")
        if code == -1:
            raise errors.InvalidStateError(f"group job {job_id!r} {negative}")

    def remove_repeating_job(self, group_id: str, repeat: Dict[str, Any]) -> bool:
        """Stop a repeating job added with these ``group_id`` and ``repeat`` options."""
        return _repeat.remove(self, opt.group_id(group_id), opt.repeat(repeat))

    def pause(self) -> None:
        """Pause the queue: no worker (Node's or ours) reserves its jobs until ``resume``."""
        self.client.set(self.key("paused"), "1")

    def resume(self) -> None:
        """Resume the queue after ``pause``."""
        self.client.delete(self.key("paused"))

    def is_paused(self) -> bool:
        """Whether the queue is paused (by either side)."""
        return bool(self.client.exists(self.key("paused")))

    # -- processing by hand (GroupMQ's low-level calls) ---------------------------------

    def reserve(self) -> Optional[GroupJob]:
        """Take the next job of the free group whose head sorts first (GroupMQ's
        ``reserve``): it becomes active, its group busy, for ``job_timeout`` seconds
        (extend it with ``heartbeat``); end it with ``complete``, ``fail`` or
        ``dead_letter``.
        ``None`` when no job can be taken (or the queue is paused). A job whose
        deadline passes before that is recovered by a worker's stalled check."""
        jobs = _manual.reserve_by_hand(self, 1)
        return jobs[0] if jobs else None

    def reserve_batch(self, max_batch: int = 16) -> List[GroupJob]:
        """Take up to ``max_batch`` jobs at once, one per free group (GroupMQ's
        ``reserveBatch``, default 16); each as ``reserve`` takes one."""
        return _manual.reserve_by_hand(self, opt.positive_int(max_batch, "max_batch"))

    def complete(self, job: GroupJob, result: Any = None) -> bool:
        """Complete a job taken with ``reserve``/``reserve_batch`` (GroupMQ's
        ``completeWithMetadata``): ``result`` (JSON) is its ``returnvalue`` (kept when
        ``keep_completed``), its group's next job may run. ``False`` when the job was no
        longer held by that reservation (recovered after its deadline, removed or
        finished): nothing is written then."""
        return _manual.complete(self, _manual.held(job, self), result)

    def heartbeat(self, job: GroupJob, extend: Optional[Seconds] = None) -> bool:
        """Hold a reserved job ``extend`` seconds from now (default: ``job_timeout``),
        as GroupMQ's ``heartbeat``. ``False`` when it is no longer held."""
        return _manual.heartbeat(self, _manual.held(job, self), extend)

    def dead_letter(self, job: GroupJob, error: Any = None) -> bool:
        """Fail a reserved job for good, whatever attempts it has left (GroupMQ's
        ``deadLetter`` with the worker's ``recordFinalFailure``): it leaves its group
        and ``error`` (an exception, or a message; default "dead-lettered") becomes its
        ``failed_reason``; kept in failed when ``keep_failed``, else deleted. Its
        group's next job may run. ``False`` when it is no longer held. (A job that is
        not reserved is dropped with ``remove``.)"""
        return _manual.dead_letter(self, _manual.held(job, self), error)

    def fail(self, job: GroupJob, error: Any = None, *, backoff: Optional[Seconds] = 0) -> bool:
        """Fail this attempt of a reserved job, as a worker fails a handler's exception
        (GroupMQ's low-level ``retry(jobId, backoffMs)``, which its worker calls): the
        attempt is counted and, while the job has attempts left, it goes back to its
        place in its group, ``delayed`` for ``backoff`` seconds (holding its group back
        meanwhile) or ``waiting`` at once; with none left it is failed for good (kept
        when ``keep_failed``). ``error`` (an exception, or a message; default "failed by
        hand") is recorded. ``job.status`` and ``attempts_made`` show which happened.
        ``False`` when the job is no longer held: nothing is written then.

        Named ``fail``: ``retry(job_id)`` here puts a failed job back, as GroupMQ's
        README shows ``queue.retry``; GroupMQ's script under that name is this call."""
        return _manual.fail_by_hand(self, _manual.held(job, self), error, backoff)

    def cleanup(self, max_stalled_count: int = 1) -> int:
        """GroupMQ's ``cleanup`` (what workers run every ``cleanup_interval``): unless a
        worker, Node's or ours, ran one in the last 60 s, recover every job whose
        deadline passed (counted as a stall: found stalled more than
        ``max_stalled_count`` times, it fails) and put back in ready every group left
        out of it. Returns how many jobs were recovered or failed."""
        stalled = opt.count(max_stalled_count, "max_stalled_count")
        return len(_housekeeping.cleanup(self, stalled))

    # -- the scheduler's work (the workers run it; callable by hand) -------------------

    def run_scheduler_once(self) -> int:
        """Promote due delayed and staged jobs and add due runs of repeating jobs;
        returns how many jobs moved or were added."""
        return self.promote_delayed_jobs() + _repeat.run_due(self, now_ms())

    def promote_delayed_jobs(self) -> int:
        """Let due delayed (and staged) jobs run; returns how many moved."""
        delayed, staged, _ = self.run_script("promote_due", now_ms(), 500)
        return int(delayed) + int(staged)

    def recover_delayed_groups(self) -> int:
        """Put back in ready every group holding runnable jobs that nothing would put
        back (one pass over all groups); returns how many were put back."""
        cursor, total = "0", 0
        while True:
            cursor, fixed = self.run_script("recover_groups", cursor, 200)
            total += int(fixed)
            if str(cursor) == "0":
                return total
