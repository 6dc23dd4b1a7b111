"""The rest of GroupMQ 1.1's API on real Redis: the queue's ``auto_batch``, processing
by hand (``reserve``, ``reserve_batch``, ``heartbeat``, ``complete``, ``dead_letter``),
``get_jobs_by_status`` with an offset, ``cleanup``, and the worker's ``name``,
``heartbeat``, ``on_error``, ``max_attempts``, ``stalled_grace_period``,
``enable_cleanup``/``cleanup_interval`` and default ``concurrency``. Waits are
generous guards; the one timing assertion is a lower bound a grace period promises."""
from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from orijs_sync import errors
from orijs_sync.base.util import now_ms
from orijs_sync.groups import GroupJob, GroupQueue, GroupWorker
from orijs_sync.groups._options import GroupOptionError
from orijs_sync.testing import orijs_threads, wait_until


def count_scripts(queue: GroupQueue) -> List[Tuple[str, int]]:
    """Record (script, number of args) of every script call the queue makes."""
    calls: List[Tuple[str, int]] = []
    original = queue.run_script

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((name, len(args)))
        return original(name, *args, **kwargs)
    queue.run_script = counting  # type: ignore[method-assign]
    return calls


@pytest.fixture
def kept(redis_url: str, gname: str) -> Iterator[GroupQueue]:
    queue = GroupQueue(gname, connection=redis_url, keep_completed=2000, keep_failed=100,
                       job_timeout=5)
    yield queue
    queue.close()


# -- auto_batch ------------------------------------------------------------------------


@pytest.mark.parametrize("value, words", [
    ("yes", "auto_batch must be"), ({"size": 0}, "auto_batch size"),
    ({"maxWaitMs": 5}, "unknown key"), ({"max_wait": -1}, "auto_batch max_wait"),
    ({"size": 2.5}, "auto_batch size"), (1, "auto_batch must be")])
def test_auto_batch_is_validated(redis_url: str, gname: str, value: Any, words: str) -> None:
    with pytest.raises(GroupOptionError, match=words):
        GroupQueue(gname, connection=redis_url, auto_batch=value)


def test_concurrent_adds_share_script_calls(redis_url: str, gname: str) -> None:
    """Eight threads adding at once: every add returns its own job, already in Redis,
    in fewer script calls than adds, none over the batch size; each thread's group
    keeps that thread's order."""
    gq = GroupQueue(gname, connection=redis_url, auto_batch={"size": 8, "max_wait": 0.05})
    calls = count_scripts(gq)
    returned: Dict[str, List[Tuple[GroupJob, int]]] = {}
    start = threading.Barrier(8)

    def produce(t: int) -> None:
        start.wait()
        jobs = returned.setdefault(f"t{t}", [])
        for n in range(25):
            job = gq.add(group_id=f"t{t}", data={"n": n}, job_id=f"t{t}-{n}")
            jobs.append((job, gq.client.exists(gq.key("job", job.id))))   # stored by now?
    threads = [threading.Thread(target=produce, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for t in range(8):
        jobs = returned[f"t{t}"]
        assert [(j.id, j.data["n"], j.status, stored) for j, stored in jobs] == \
            [(f"t{t}-{n}", n, "waiting", 1) for n in range(25)]
        assert [int(i.split("-")[1]) for i in gq.client.zrange(gq.key("g", f"t{t}"), 0, -1)] \
            == list(range(25))
    batches = [args for name, args in calls if name == "enqueue_batch"]
    assert calls and all(name == "enqueue_batch" for name, _ in calls)
    assert sum((args - 2) // 7 for args in batches) == 200
    assert len(batches) < 200 and max(batches) <= 2 + 7 * 8
    gq.close()


def test_a_batched_add_keeps_add_semantics(redis_url: str, gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, auto_batch=True)
    first = gq.add(group_id="g", data={"a": 1}, job_id="same", delay=60)
    again = gq.add(group_id="g", data={"a": 2}, job_id="same")
    assert first.status == "delayed" and again.id == "same" and again.data == {"a": 1}
    assert gq.get_job("same").status == "delayed" and gq.get_delayed_count() == 1
    with pytest.raises(errors.InvalidArgumentType):
        gq.add(group_id="g", data={"x": object()})
    repeating = gq.add(group_id="r", data={}, repeat={"every": 60})     # not batched
    assert gq.client.zcard(gq.key("repeat", "schedule")) == 1 and repeating.id
    gq.close()


def test_a_failed_batch_write_raises_in_every_add_of_it(redis_url: str, gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, auto_batch={"size": 3, "max_wait": 1})

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        raise errors.ConnectionError("redis went away")
    gq.run_script = refuse  # type: ignore[method-assign]
    raised: List[BaseException] = []

    def add(n: int) -> None:
        try:
            gq.add(group_id="g", data={"n": n})
        except errors.ConnectionError as exc:
            raised.append(exc)
    threads = [threading.Thread(target=add, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(raised) == 3
    gq.close()


# -- processing by hand ----------------------------------------------------------------


def test_reserve_complete_heartbeat_by_hand(kept: GroupQueue) -> None:
    assert kept.reserve() is None
    for n in range(2):
        kept.add(group_id="a", data={"n": n}, job_id=f"a{n}")
    kept.add(group_id="b", data={"n": 0}, job_id="b0")
    jobs = kept.reserve_batch(10)
    assert sorted(j.id for j in jobs) == ["a0", "b0"]           # one per group
    assert kept.reserve() is None                                 # a1 waits behind a0
    a0 = next(j for j in jobs if j.id == "a0")
    deadline = kept.client.zscore(kept.key("processing"), "a0")
    time.sleep(0.01)
    assert kept.heartbeat(a0, extend=120) is True
    assert kept.client.zscore(kept.key("processing"), "a0") > deadline + 100_000
    assert kept.complete(a0, {"done": 0}) is True
    assert a0.status == "completed" and a0.returnvalue == {"done": 0}
    stored = kept.get_job("a0")
    assert stored.status == "completed" and stored.returnvalue == {"done": 0}
    assert stored.processed_on and stored.finished_on >= stored.processed_on
    assert kept.complete(a0, "twice") is False and kept.heartbeat(a0) is False
    a1 = kept.reserve()
    assert a1 is not None and a1.id == "a1" and a1.data == {"n": 1}
    assert kept.complete(a1) is True and kept.get_job("a1").returnvalue is None


def test_dead_letter_by_hand(kept: GroupQueue) -> None:
    kept.add(group_id="g", data={}, job_id="x", max_attempts=5)
    kept.add(group_id="g", data={}, job_id="y")
    kept.add(group_id="h", data={}, job_id="z")
    x, z = sorted(kept.reserve_batch(), key=lambda j: j.id)
    assert kept.dead_letter(x, ValueError("bad input")) is True
    assert x.status == "failed" and x.failed_reason == "bad input"
    failed = kept.get_job("x")
    assert failed.status == "failed" and failed.attempts_made == 1
    assert failed.raw["failedName"] == "ValueError" and "bad input" in failed.stacktrace
    assert kept.dead_letter(z) is True
    assert kept.get_job("z").failed_reason == "dead-lettered"
    assert kept.dead_letter(x) is False
    y = kept.reserve()                               # its group goes on
    assert y is not None and y.id == "y"
    assert kept.dead_letter(y, "no luck") is True and kept.get_job("y").failed_reason == "no luck"
    assert kept.get_failed_count() == 3


def test_fail_by_hand_retries_with_a_backoff_then_fails_for_good(kept: GroupQueue) -> None:
    kept.add(group_id="g", data={}, job_id="x", max_attempts=2)
    kept.add(group_id="g", data={}, job_id="y")
    x = kept.reserve()
    assert x is not None and x.id == "x"
    before = int(time.time() * 1000)
    assert kept.fail(x, ValueError("flaky"), backoff=60) is True
    assert (x.status, x.attempts_made, x.failed_reason) == ("delayed", 1, "flaky")
    stored = kept.get_job("x")
    assert stored.status == "delayed" and stored.attempts_made == 1
    assert stored.raw["lastErrorName"] == "ValueError"
    assert kept.client.zscore(kept.key("delayed"), "x") >= before + 60_000
    assert kept.fail(x) is False                       # no longer held: nothing written
    assert kept.reserve() is None                      # the delayed head holds g back
    kept.promote("x")
    x = kept.reserve()
    assert x is not None and x.id == "x"
    assert kept.fail(x, "still no") is True           # attempts spent: failed for good
    assert (x.status, x.attempts_made) == ("failed", 2)
    assert kept.get_job("x").failed_reason == "still no"
    y = kept.reserve()                                 # its group goes on
    assert y is not None and y.id == "y"
    assert kept.fail(y, backoff=0) is True and y.status == "waiting"
    assert kept.get_job("y").failed_reason == "failed by hand"
    again = kept.reserve()
    assert again is not None and again.id == "y" and again.attempts_made == 1


def test_by_hand_calls_refuse_what_they_cannot_act_on(kept: GroupQueue,
                                                      redis_url: str) -> None:
    kept.add(group_id="g", data={}, job_id="j")
    with pytest.raises(GroupOptionError, match="was not reserved"):
        kept.complete(kept.get_job("j"))              # no reservation
    with pytest.raises(GroupOptionError, match="GroupJob"):
        kept.complete("j")                            # type: ignore[arg-type]
    with pytest.raises(GroupOptionError, match="max_batch"):
        kept.reserve_batch(0)
    job = kept.reserve()
    assert job is not None
    with pytest.raises(errors.InvalidArgumentType, match="result"):
        kept.complete(job, object())
    with pytest.raises(GroupOptionError, match="extend"):
        kept.heartbeat(job, extend=0)
    with pytest.raises(GroupOptionError, match="error must be"):
        kept.dead_letter(job, 42)
    with pytest.raises(GroupOptionError, match="backoff"):
        kept.fail(job, "x", backoff=-1)
    with pytest.raises(GroupOptionError, match="error must be"):
        kept.fail(job, 42)
    with pytest.raises(GroupOptionError, match="was not reserved"):
        kept.fail(kept.get_job("j"))
    other = GroupQueue(kept.name + "-other", connection=redis_url)
    with pytest.raises(GroupOptionError, match="belongs to group queue"):
        other.complete(job)
    other.close()
    assert kept.get_job("j").status == "active"      # nothing was written
    assert kept.complete(job, "ok") is True


def test_a_reservation_past_its_deadline_is_recovered_and_its_finish_refused(
        redis_url: str, gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, job_timeout=0.05, keep_completed=10)
    gq.add(group_id="g", data={}, job_id="j")
    job = gq.reserve()
    assert job is not None
    time.sleep(0.1)
    assert gq.cleanup() == 1 and gq.get_job("j").status == "waiting"
    assert gq.complete(job, "late") is False and gq.get_job("j").status == "waiting"
    again = gq.reserve()
    assert again is not None and again.id == "j" and gq.complete(again, "ok") is True
    gq.close()


def test_paused_queue_reserves_nothing(gq: GroupQueue) -> None:
    gq.add(group_id="g", data={})
    gq.pause()
    assert gq.reserve() is None and gq.reserve_batch(4) == []
    gq.resume()
    assert gq.reserve() is not None


# -- get_jobs_by_status ----------------------------------------------------------------


def _mixed_states(q: GroupQueue) -> None:
    """c0..c2 completed, f0 failed, a0 active, d0 delayed (held in group w), w0 w1
    waiting in group w, v0 waiting in group v."""
    for n in range(3):
        q.add(group_id=f"c{n}", data={}, job_id=f"c{n}")
        job = q.reserve()
        assert job is not None and q.complete(job, n)
        time.sleep(0.002)                             # distinct finish times
    q.add(group_id="f", data={}, job_id="f0")
    job = q.reserve()
    assert job is not None and q.dead_letter(job)
    q.add(group_id="a", data={}, job_id="a0")
    job = q.reserve()
    assert job is not None and job.id == "a0"
    q.add(group_id="w", data={}, job_id="d0", delay=60)
    q.add(group_id="w", data={}, job_id="w0")
    q.add(group_id="w", data={}, job_id="w1")
    q.add(group_id="v", data={}, job_id="v0")


def test_get_jobs_by_status_lists_in_groupmqs_order(kept: GroupQueue) -> None:
    _mixed_states(kept)
    every = ["waiting", "failed", "completed", "delayed", "active"]   # asked in any order
    listed = [(j.id, j.status) for j in kept.get_jobs_by_status(every)]
    assert listed == [("a0", "active"), ("d0", "delayed"), ("c2", "completed"),
                      ("c1", "completed"), ("c0", "completed"), ("f0", "failed"),
                      ("v0", "waiting"), ("w0", "waiting"), ("w1", "waiting")]
    assert [j.id for j in kept.get_jobs_by_status(every, 2, 4)] == ["c2", "c1", "c0"]
    assert [j.id for j in kept.get_jobs_by_status(every, 7)] == ["w0", "w1"]
    assert kept.get_jobs_by_status(every, 9) == []
    # waiting alone: every job in a group, the delayed one held there included (GroupMQ's)
    assert [(j.id, j.status) for j in kept.get_jobs_by_status(("waiting",))] == \
        [("v0", "waiting"), ("d0", "waiting"), ("w0", "waiting"), ("w1", "waiting")]
    assert kept.get_jobs_by_status({"completed"}, 0, 0)[0].returnvalue == 2


@pytest.mark.parametrize("args, words", [
    (("waiting",), "list of states"), ((["waiting", "paused"],), "one or more of"),
    (([],), "one or more of"), ((["active"], -1), "start"), ((["active"], 0, -2), "end"),
    ((["active"], 5, 2), "must be >= start"), ((["active"], 0, 1.5), "end")])
def test_get_jobs_by_status_is_validated(gq: GroupQueue, args: tuple, words: str) -> None:
    with pytest.raises(GroupOptionError, match=words):
        gq.get_jobs_by_status(*args)


def test_get_jobs_by_status_pages_past_groupmqs_500_ids(kept: GroupQueue) -> None:
    """1,200 completed jobs (one per group): a page at offset 1,000 is served (GroupMQ's
    reads 500 ids per state at most, so it returns nothing there)."""
    for n in range(1200):
        kept.add(group_id=f"g{n}", data={"n": n}, job_id=f"j{n}")
    for job in kept.reserve_batch(1200):
        assert kept.complete(job, job.data["n"])
    newest_first = kept.client.zrange(kept.key("completed"), 0, -1, desc=True)
    page = kept.get_jobs_by_status(["completed"], 1000, 1009)
    assert [j.id for j in page] == newest_first[1000:1010]
    assert len(kept.get_jobs_by_status(["completed"])) == 1200


# -- cleanup ---------------------------------------------------------------------------


def test_cleanup_recovers_expired_jobs_and_groups_once_a_minute(redis_url: str,
                                                                 gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, job_timeout=0.05)
    for gid in ("a", "b"):
        gq.add(group_id=gid, data={}, job_id=gid)
    gq.add(group_id="c", data={}, job_id="c")
    gq.client.zrem(gq.key("ready"), "c")                  # a group left out of ready
    held = gq.reserve_batch(2)
    assert sorted(j.id for j in held) == ["a", "b"]
    time.sleep(0.1)
    assert gq.cleanup() == 2
    assert gq.get_job("a").status == "waiting" and gq.get_job("a").raw["stalledCount"] == "1"
    assert gq.client.zscore(gq.key("ready"), "c") is not None
    assert 0 < gq.client.pttl(gq.key("cleanup", "lock")) <= 60_000
    gq.reserve()
    time.sleep(0.1)
    assert gq.cleanup() == 0                              # the lock holds for 60 s
    gq.client.delete(gq.key("cleanup", "lock"))
    assert gq.cleanup(max_stalled_count=0) == 1           # stalled once more: fails
    assert gq.get_failed_count() == 1
    with pytest.raises(GroupOptionError, match="max_stalled_count"):
        gq.cleanup(max_stalled_count=-1)
    gq.close()


def test_worker_runs_cleanup_unless_disabled(gq: GroupQueue) -> None:
    def cleanup_threads() -> List[threading.Thread]:
        return [t for t in orijs_threads() if t.name == f"orijs-group-cleanup-{gq.name}"]
    with GroupWorker(gq, lambda job: None, enable_cleanup=False):
        assert cleanup_threads() == []
    assert not gq.client.exists(gq.key("cleanup", "lock"))
    with GroupWorker(gq, lambda job: None, cleanup_interval=0.05):
        assert len(cleanup_threads()) == 1
        wait_until(lambda: bool(gq.client.exists(gq.key("cleanup", "lock"))), 10,
                   "the first cleanup took GroupMQ's lock")


# -- worker options --------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, words", [
    ({"name": ""}, "name"), ({"name": 3}, "name"), ({"heartbeat": 0}, "heartbeat"),
    ({"heartbeat": 5}, "heartbeat must be shorter"), ({"on_error": "log"}, "on_error"),
    ({"max_attempts": 0}, "max_attempts"), ({"stalled_grace_period": -1},
                                            "stalled_grace_period"),
    ({"enable_cleanup": "yes"}, "enable_cleanup"), ({"cleanup_interval": 0}, "cleanup_interval"),
    ({"cleanup_interval": None}, "cleanup_interval")])
def test_worker_options_are_validated(gq: GroupQueue, kwargs: Dict[str, Any],
                                      words: str) -> None:
    with pytest.raises(GroupOptionError, match=words):
        GroupWorker(gq, print, **kwargs)
    assert not [t for t in orijs_threads() if gq.name in t.name]


def test_defaults_are_groupmqs(gq: GroupQueue) -> None:
    params = inspect.signature(GroupWorker).parameters
    assert params["concurrency"].default is None       # 1, or ``processes`` with them
    assert params["enable_cleanup"].default is True
    assert params["cleanup_interval"].default == 60
    w = GroupWorker(gq, print)
    assert w.concurrency == 1 and w.name == gq.name
    assert w.heartbeat_interval == pytest.approx(5 / 3)         # job_timeout / 3
    assert GroupWorker(gq, print, heartbeat=0.5).heartbeat_interval == 0.5
    assert w.get_worker_metrics()["name"] == gq.name
    assert GroupWorker(gq, print, name="billing").get_worker_metrics()["name"] == "billing"


def test_heartbeat_option_holds_a_job_past_its_timeout(redis_url: str, gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, job_timeout=1.0)
    gq.add(group_id="g", data={})
    runs: List[str] = []
    stalled: List[str] = []

    def slow(job: GroupJob) -> None:
        runs.append(job.id)
        time.sleep(2.0)
    with GroupWorker(gq, slow, heartbeat=0.1, stalled_interval=0.05) as w:
        beats = [r for r in w._roles if r.name == "group-heartbeat"]
        assert [r.interval for r in beats] == [0.1]          # type: ignore[attr-defined]
        w.on("stalled", lambda job_id, group_id: stalled.append(job_id))
        wait_until(lambda: bool(runs), 30)
        assert gq.wait_for_empty(30)
    assert len(runs) == 1 and stalled == []
    gq.close()


def test_on_error_gets_handler_failures_with_the_job_and_worker_errors_without(
        gq: GroupQueue) -> None:
    seen: List[Tuple[str, Optional[str]]] = []

    def on_error(exc: BaseException, job: Optional[GroupJob]) -> None:
        seen.append((type(exc).__name__, job.id if job else None))
        raise RuntimeError("a broken callback does not stop the worker")

    done: List[str] = []

    def handler(job: GroupJob) -> None:
        if job.id == "k":
            raise KeyError(job.id)
        done.append(job.id)
    gq.add(group_id="g", data={}, job_id="k", max_attempts=1)
    gq.add(group_id="h", data={}, job_id="m")
    # a repeating job's definition that is no JSON: the scheduler's step raises
    gq.client.zadd(gq.key("repeat", "schedule"), {"broken": 0})
    gq.client.set(gq.key("repeat", "broken"), "{not json")
    with GroupWorker(gq, handler, on_error=on_error, backoff=0, scheduler_interval=0.05):
        wait_until(lambda: ("KeyError", "k") in seen and
                   any(job is None for _, job in seen) and done == ["m"], 30)
    assert gq.get_job("k") is None                        # failed for good (not kept)
    assert ("JSONDecodeError", None) in seen


def test_worker_max_attempts_caps_every_job(redis_url: str, gname: str) -> None:
    gq = GroupQueue(gname, connection=redis_url, max_attempts=5, keep_failed=10)
    gq.add(group_id="g", data={}, job_id="five")               # the queue's 5
    gq.add(group_id="h", data={}, job_id="one", max_attempts=1)
    runs: List[str] = []

    def handler(job: GroupJob) -> None:
        runs.append(job.id)
        raise ValueError("always")
    with GroupWorker(gq, handler, max_attempts=2, backoff=0, concurrency=2):
        wait_until(lambda: gq.get_failed_count() == 2, 30)
    assert sorted(runs) == ["five", "five", "one"]
    assert gq.get_job("five").attempts_made == 2 and gq.get_job("one").attempts_made == 1
    gq.close()


def test_stalled_grace_period_delays_recovery(gq: GroupQueue) -> None:
    gq.add(group_id="g", data={}, job_id="j")
    reserved = now_ms()
    gq.run_script("reserve", reserved, 1, 1, "", "dead", 100)   # its worker died at once
    stalled: List[int] = []
    done: List[str] = []
    with GroupWorker(gq, lambda job: done.append(job.id), stalled_interval=0.05,
                     stalled_grace_period=1.0, enable_cleanup=False) as w:
        w.on("stalled", lambda job_id, group_id: stalled.append(now_ms()))
        wait_until(lambda: done == ["j"], 30)
    assert len(stalled) == 1 and stalled[0] - reserved >= 1000

