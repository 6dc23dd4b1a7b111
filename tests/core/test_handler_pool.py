"""The engine's handler pool: threads made as tasks need them up to the cap, every task
run once, tasks past the cap waiting for a thread, shutdown ending every thread."""
from __future__ import annotations

import threading
from typing import List

import pytest

from orijs_sync.engine.handler_pool import HandlerPool
from orijs_sync.testing import wait_until


def test_threads_are_made_as_needed_up_to_the_cap_and_reused():
    pool = HandlerPool(3, "test-pool")
    gate = threading.Event()
    ran: List[int] = []
    lock = threading.Lock()

    def task(i):
        gate.wait(10)
        with lock:
            ran.append(i)
    for i in range(3):
        pool.submit(task, i)
    assert len(pool.threads) == 3
    for i in range(3, 10):                    # past the cap: they wait for a thread
        pool.submit(task, i)
    assert len(pool.threads) == 3
    gate.set()
    pool.shutdown()
    for thread in pool.threads:
        thread.join(10)
        assert not thread.is_alive()
    assert sorted(ran) == list(range(10))
    assert [t.name for t in pool.threads] == ["test-pool_0", "test-pool_1", "test-pool_2"]


def test_an_idle_thread_takes_the_next_task_instead_of_a_new_thread():
    pool = HandlerPool(8, "idle-pool")
    for _ in range(20):                  # one task at a time: one thread serves all
        done = threading.Event()
        pool.submit(lambda e: e.set(), done)
        assert done.wait(10)
        wait_until(lambda: pool._idle == 1, 10)   # the thread is back, waiting
    assert len(pool.threads) == 1
    pool.shutdown()
    pool.threads[0].join(10)


def test_a_raising_task_does_not_end_its_thread_and_shutdown_refuses_new_tasks():
    pool = HandlerPool(1, "raise-pool")
    done = threading.Event()

    def boom(_):
        raise RuntimeError("boom")
    pool.submit(boom, None)
    pool.submit(lambda e: e.set(), done)
    assert done.wait(10)
    pool.shutdown()
    pool.threads[0].join(10)
    assert not pool.threads[0].is_alive()
    with pytest.raises(RuntimeError):
        pool.submit(lambda _: None, None)
